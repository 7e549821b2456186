"""The single-path file services the protocol servers stand on, called directly.

No HTTP here: a caller (user, address, protocol) and a path go in, objects, bytes
or ``manifold.errors`` classes come out. Real services, a real SQLite database
and Local storages on temporary folders.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.errors import (
    FileExists,
    ManifoldError,
    Overlapping,
    PasswordRequired,
    PermissionDenied,
    RelativePath,
    ServerError,
    StorageNotFound,
)
from manifold.models import Meta, Perm, Role, Storage, User
from manifold.services.auth.service import Caller, Protocol
from tests.api.fs_helpers import make_tree, store
from tests.fixtures.silent import sftp_addition, silent_server

ALL_FILE_BITS = int(Perm(0xFF))


def caller(
    permission: int = ALL_FILE_BITS, base_path: str = "/", protocol: Protocol = "api"
) -> Caller:
    user = User(1000, "carol", "", 0, base_path, Role.GENERAL, False, permission, "", "")
    return Caller(user, "198.51.100.4", protocol=protocol)


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


@pytest.fixture
async def disks(services: Services, tmp_path: Path) -> tuple[Path, Path]:
    a = make_tree(tmp_path / "a", {"docs/readme.txt": "hello", "docs/deep/x.bin": b"x" * 3000})
    b = make_tree(tmp_path / "b", {"kept.txt": "kept"})
    for mount, root in (("/a", a), ("/b", b)):
        addition = json.dumps({"root_folder_path": str(root)})
        await services.storages.create(Storage(0, mount, "Local", addition=addition))
    return a, b


async def test_stat_list_and_a_ranged_read(services: Services, disks: tuple[Path, Path]) -> None:
    files = services.ops
    assert (await files.stat(caller(), "/a/docs/readme.txt")).size == 5
    assert {o.name for o in await files.list(caller(), "/a/docs")} == {"readme.txt", "deep"}
    obj, body = await files.open_read(caller(), "/a/docs/readme.txt", 1, 3)
    assert obj.name == "readme.txt"
    assert b"".join([chunk async for chunk in body]) == b"ell"


async def test_writes_one_path_at_a_time(services: Services, disks: tuple[Path, Path]) -> None:
    a, _ = disks
    files, who = services.ops, caller()
    await files.mkdir(who, "/a/new/inner")
    await files.put(who, "/a/new/inner/f.txt", chunks(b"ab", b"c"), 3)
    await files.rename(who, "/a/new/inner/f.txt", "/a/new/g.txt")
    assert (a / "new" / "g.txt").read_bytes() == b"abc"
    await files.remove(who, "/a/new")
    assert not (a / "new").exists()


async def test_a_copy_across_storages_is_whole_when_it_returns(
    services: Services, disks: tuple[Path, Path]
) -> None:
    a, b = disks
    await services.ops.copy(caller(), "/a/docs", "/b/docs")
    assert (b / "docs" / "deep" / "x.bin").read_bytes() == (
        a / "docs" / "deep" / "x.bin"
    ).read_bytes()
    await services.ops.copy(caller(), "/a/docs/readme.txt", "/b/other.txt")
    assert (b / "other.txt").read_text() == "hello"
    with pytest.raises(FileExists):
        await services.ops.copy(caller(), "/a/docs/readme.txt", "/b/docs/readme.txt")


async def test_a_move_across_storages_is_done_when_it_returns(
    services: Services, disks: tuple[Path, Path]
) -> None:
    a, b = disks
    moved = await services.ops.rename(caller(), "/a/docs", "/b/papers")
    assert moved.is_dir and moved.name == "papers"
    assert (b / "papers" / "readme.txt").read_text() == "hello"
    assert not (a / "docs").exists()


@pytest.mark.parametrize("path", ["/a", "/b"])
async def test_a_storage_root_is_never_renamed_or_removed(
    services: Services, disks: tuple[Path, Path], path: str
) -> None:
    with pytest.raises(ServerError, match="delete root folder is not allowed"):
        await services.tree.remove(path)
    with pytest.raises(ServerError, match="can't rename a storage's root folder"):
        await services.tree.rename(path, "x")


async def test_permission_bits_base_path_and_passwords_hold(
    services: Services, disks: tuple[Path, Path]
) -> None:
    files = services.ops
    read_only = caller(permission=0)
    with pytest.raises(PermissionDenied):
        await files.mkdir(read_only, "/a/nope")
    with pytest.raises(PermissionDenied):
        await files.remove(read_only, "/a/docs/readme.txt")
    confined = caller(base_path="/a/docs")
    assert {o.name for o in await files.list(confined, "/")} == {"readme.txt", "deep"}
    with pytest.raises(RelativePath):
        await files.list(confined, "/../..")
    await services.metas.create(Meta(0, "/a/docs", password="pw", p_sub=True))
    no_bypass = caller(ALL_FILE_BITS & ~Perm.ACCESS_WITHOUT_PASSWORD)
    with pytest.raises(PasswordRequired):
        await files.stat(no_bypass, "/a/docs/readme.txt")
    assert (await files.stat(no_bypass, "/a/docs/readme.txt", password="pw")).size == 5


async def test_hidden_entries_are_not_listed(services: Services, disks: tuple[Path, Path]) -> None:
    await services.metas.create(Meta(0, "/a/docs", password="", hide="^deep$"))
    no_see_hidden = caller(ALL_FILE_BITS & ~Perm.SEE_HIDDEN)
    assert [o.name for o in await services.ops.list(no_see_hidden, "/a/docs")] == ["readme.txt"]
    assert len(await services.ops.list(caller(), "/a/docs")) == 2


@pytest.mark.parametrize(
    ("protocol", "read", "write"),
    [("webdav", Perm.WEBDAV_READ, Perm.WEBDAV_MANAGE), ("ftp", Perm.FTP_READ, Perm.FTP_MANAGE),
     ("sftp", Perm.FTP_READ, Perm.FTP_MANAGE)],
)  # fmt: skip
async def test_protocols_check_their_own_bits(
    services: Services, disks: tuple[Path, Path], protocol: Protocol, read: Perm, write: Perm
) -> None:
    files = services.ops
    without = caller(protocol=protocol)
    with pytest.raises(PermissionDenied):
        await files.list(without, "/a")
    reader = caller(ALL_FILE_BITS | read, protocol=protocol)
    assert await files.list(reader, "/a")
    with pytest.raises(PermissionDenied):
        await files.mkdir(reader, "/a/made")
    writer = caller(ALL_FILE_BITS | read | write, protocol=protocol)
    await files.mkdir(writer, "/a/made")
    assert await files.list(caller(), "/a")  # the API needs none of these bits


async def test_the_error_vocabulary(services: Services, disks: tuple[Path, Path]) -> None:
    tree = services.tree
    with pytest.raises(StorageNotFound) as missing:
        await tree.listing("/nowhere/x")
    assert missing.value.message == "failed get storage: storage not found; rawPath: /nowhere/x"
    with silent_server() as silent:  # /c's back end never answers: /c stays loading
        await store(services, "/c", "SFTP", sftp_addition(silent))
        await services.storages.load_all()
        with pytest.raises(ServerError, match=r"^storage not init: loading$"):
            await tree.lookup("/c/x")
        with pytest.raises(ServerError, match=r"^storage not init: loading$"):
            await tree.make_dir("/c/x")


async def test_no_storages_at_all(services: Services) -> None:
    with pytest.raises(StorageNotFound, match=r"^storage not found; please add a storage first$"):
        await services.tree.listing("/x")


async def test_a_copy_under_a_new_name_into_a_password_folder_uses_the_password(
    services: Services, disks: tuple[Path, Path]
) -> None:
    _, b = disks
    await services.metas.create(Meta(0, "/b", password="pw", p_sub=True))
    no_bypass = caller(ALL_FILE_BITS & ~Perm.ACCESS_WITHOUT_PASSWORD)
    await services.metas.create(Meta(0, "/a", password="pw", p_sub=True))
    await services.ops.copy(no_bypass, "/a/docs/readme.txt", "/b/renamed.txt", password="pw")
    assert (b / "renamed.txt").read_text() == "hello"


# --- nothing the caller asked to keep is lost ------------------------------------------


@pytest.fixture
async def aliased(services: Services, disks: tuple[Path, Path]) -> tuple[Path, Path]:
    """``disks`` plus a writable Alias at ``/al`` over ``/a``."""
    addition = json.dumps({"paths": "/a", "writable": True})
    await services.storages.create(Storage(0, "/al", "Alias", addition=addition))
    return disks


async def test_a_move_or_copy_into_its_own_folder_with_overwrite_keeps_it(
    services: Services, disks: tuple[Path, Path]
) -> None:
    a, _ = disks
    writer, who = services.writer, caller()
    await writer.move(who, "/a/docs", "/a/docs", ["readme.txt"], True)
    await writer.copy(who, "/a/docs", "/a/docs", ["readme.txt", "deep"], True)
    await writer.copy_now(who, "/a/docs/readme.txt", "/a/docs", True)
    await services.ops.rename(who, "/a/docs/readme.txt", "/a/docs/readme.txt", True)
    await services.ops.copy(who, "/a/docs/deep", "/a/docs/deep", True)
    await writer.rename(who, "/a/docs/readme.txt", "readme.txt", True)
    assert (a / "docs" / "readme.txt").read_text() == "hello"
    assert (a / "docs" / "deep" / "x.bin").stat().st_size == 3000
    with pytest.raises(FileExists):
        await writer.move(who, "/a/docs", "/a/docs", ["readme.txt"], False)


async def test_the_same_file_through_a_writable_alias_is_kept(
    services: Services, aliased: tuple[Path, Path]
) -> None:
    a, _ = aliased
    writer, who = services.writer, caller()
    await writer.copy_now(who, "/a/docs/readme.txt", "/al/docs", True)
    await writer.copy_now(who, "/al/docs/readme.txt", "/a/docs", True)
    tasks = await writer.copy(who, "/a/docs", "/al/docs", ["readme.txt"], True)
    for task in tasks:
        await services.tasks.wait_done(task.id)
    await services.ops.copy(who, "/al/docs/deep", "/a/docs/deep", True)
    assert (a / "docs" / "readme.txt").read_text() == "hello"
    assert (a / "docs" / "deep" / "x.bin").stat().st_size == 3000


@pytest.mark.parametrize("dst", ["/al/docs/deep", "/al/docs", "/a/docs/deep", "/al/docs/deep/new"])
async def test_a_folder_is_never_copied_into_its_own_subtree(
    services: Services, aliased: tuple[Path, Path], dst: str
) -> None:
    a, _ = aliased
    before = sorted(str(p.relative_to(a)) for p in a.rglob("*"))
    writer, who = services.writer, caller()
    with pytest.raises(ServerError, match="subfolder of the source folder"):
        await writer.copy_now(who, "/a/docs", dst, True)
    with pytest.raises(ServerError, match="subfolder of the source folder"):
        await writer.copy(who, "/a", dst, ["docs"], True)
    with pytest.raises(ServerError, match="subfolder of the source folder"):
        await services.ops.copy(who, "/a/docs", f"{dst}/other", True)
    with pytest.raises(ServerError, match="subfolder of the source folder"):
        await services.ops.rename(who, "/a/docs", "/a/docs/deep/docs", True)
    assert sorted(str(p.relative_to(a)) for p in a.rglob("*")) == before


async def test_a_refused_name_among_several_moves_nothing(
    services: Services, disks: tuple[Path, Path]
) -> None:
    a, _ = disks
    (a / "docs" / "deep" / "readme.txt").write_text("there")
    with pytest.raises(ServerError, match="subfolder of the source folder"):
        await services.writer.move(
            caller(), "/a/docs", "/a/docs/deep", ["readme.txt", "deep"], True
        )
    assert (a / "docs" / "readme.txt").read_text() == "hello"
    assert (a / "docs" / "deep" / "readme.txt").read_text() == "there"


@pytest.fixture
async def namesakes(services: Services, disks: tuple[Path, Path]) -> Path:
    """``/a/x/report.txt`` to be moved or copied, and a bystander ``/a/y/report.txt``."""
    a, _ = disks
    make_tree(a, {"x/report.txt": "mine", "y/report.txt": "bystander"})
    return a


@pytest.mark.parametrize("overwrite", [False, True])
async def test_a_rename_to_a_new_name_elsewhere_leaves_the_namesake_alone(
    services: Services, namesakes: Path, overwrite: bool
) -> None:
    a = namesakes
    await services.ops.rename(caller(), "/a/x/report.txt", "/a/y/final.txt", overwrite)
    assert (a / "y" / "final.txt").read_text() == "mine"
    assert (a / "y" / "report.txt").read_text() == "bystander"
    assert not (a / "x" / "report.txt").exists()
    assert sorted(p.name for p in (a / "y").iterdir()) == ["final.txt", "report.txt"]


@pytest.mark.parametrize("overwrite", [False, True])
async def test_a_copy_to_a_new_name_elsewhere_leaves_the_namesake_alone(
    services: Services, namesakes: Path, overwrite: bool
) -> None:
    a = namesakes
    await services.ops.copy(caller(), "/a/x/report.txt", "/a/y/final.txt", overwrite)
    await services.ops.copy(caller(), "/a/x/report.txt", "/b/report.txt", overwrite)
    assert (a / "y" / "final.txt").read_text() == "mine"
    assert (a / "y" / "report.txt").read_text() == "bystander"
    assert (a / "x" / "report.txt").read_text() == "mine"
    assert sorted(p.name for p in (a / "y").iterdir()) == ["final.txt", "report.txt"]


async def test_overwrite_replaces_only_the_exact_destination(
    services: Services, namesakes: Path
) -> None:
    a = namesakes
    make_tree(a, {"y/final.txt": "old", "y/copy.txt": "old"})
    files, who = services.ops, caller()
    with pytest.raises(FileExists):
        await files.rename(who, "/a/x/report.txt", "/a/y/final.txt")
    with pytest.raises(FileExists):
        await files.copy(who, "/a/x/report.txt", "/a/y/copy.txt")
    await files.copy(who, "/a/x/report.txt", "/a/y/copy.txt", overwrite=True)
    await files.rename(who, "/a/x/report.txt", "/a/y/final.txt", overwrite=True)
    assert (a / "y" / "final.txt").read_text() == "mine"
    assert (a / "y" / "copy.txt").read_text() == "mine"
    assert (a / "y" / "report.txt").read_text() == "bystander"
    assert sorted(p.name for p in (a / "y").iterdir()) == ["copy.txt", "final.txt", "report.txt"]


async def test_a_copy_task_with_overwrite_replaces_a_file_and_merges_a_folder(
    services: Services, disks: tuple[Path, Path]
) -> None:
    _, b = disks
    make_tree(b, {"readme.txt": "old", "docs/stale.txt": "stale"})
    writer, who = services.writer, caller()
    tasks = await writer.copy(who, "/a/docs", "/b", ["readme.txt", "deep"], True)
    tasks += await writer.copy(who, "/a", "/b", ["docs"], True)
    for task in tasks:
        await services.tasks.wait_done(task.id)
    while pending := await services.tasks.undone("copy", who.user):
        await services.tasks.wait_done(pending[0].id)
    assert (b / "readme.txt").read_text() == "hello"
    assert (b / "deep" / "x.bin").stat().st_size == 3000
    assert sorted(p.name for p in (b / "docs").iterdir()) == ["deep", "readme.txt", "stale.txt"]


@pytest.mark.parametrize("overwrite", [False, True])
async def test_a_name_too_long_changes_nothing(
    services: Services, namesakes: Path, overwrite: bool
) -> None:
    a = namesakes
    with pytest.raises(ManifoldError):
        await services.ops.rename(caller(), "/a/x/report.txt", f"/a/y/{'n' * 300}", overwrite)
    assert (a / "x" / "report.txt").read_text() == "mine"
    assert sorted(p.name for p in (a / "x").iterdir()) == ["report.txt"]
    assert sorted(p.name for p in (a / "y").iterdir()) == ["report.txt"]


async def test_overwrite_by_a_copy_or_move_of_the_same_name_leaves_nothing_parked(
    services: Services, disks: tuple[Path, Path]
) -> None:
    a, _ = disks
    make_tree(a, {"readme.txt": "old", "moved/readme.txt": "old"})
    writer, who = services.writer, caller()
    await writer.copy(who, "/a/docs", "/a", ["readme.txt"], True)
    await writer.move(who, "/a/docs", "/a/moved", ["readme.txt"], True)
    assert (a / "readme.txt").read_text() == "hello"
    assert (a / "moved" / "readme.txt").read_text() == "hello"
    assert not (a / "docs" / "readme.txt").exists()
    assert not [p for p in a.rglob("*") if p.name.startswith(".manifold")]


async def test_a_copy_never_replaces_the_folder_holding_its_source(
    services: Services, aliased: tuple[Path, Path]
) -> None:
    a, _ = aliased
    make_tree(a, {"x/x": "inner file"})
    writer, who = services.writer, caller()
    with pytest.raises(ServerError, match="the destination holds the source"):
        await writer.copy(who, "/a/x", "/a", ["x"], True)
    with pytest.raises(ServerError, match="the destination holds the source"):
        await writer.copy(who, "/al/x", "/a", ["x"], True)
    with pytest.raises(ServerError, match="the destination holds the source"):
        await services.ops.copy(who, "/a/x/x", "/a/x", True)
    with pytest.raises(Overlapping, match="the destination holds the source"):
        await services.ops.rename(who, "/a/x/x", "/a/x", True, folders=True)
    assert (a / "x" / "x").read_text() == "inner file"
