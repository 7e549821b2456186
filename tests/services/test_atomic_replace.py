"""A move or rename over a file, on a storage whose driver replaces in one step
(``move_over``): the name never stands empty and nothing is left parked.

A reader stats the destination over and over while it is replaced, through the same
file services every protocol stands on; it must find a file there every time. Then
the same replace through the protocols that ask for it: a WebDAV MOVE with
``Overwrite: T`` and an SFTP ``posix-rename``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.drivers.local.driver import LocalDriver
from manifold.drivers.local.meta import CONFIG, Addition
from manifold.errors import FileExists, NotSupported, ObjectNotFound
from manifold.models import Obj, Storage
from tests.api.fs_helpers import make_tree
from tests.conftest import open_api
from tests.protocols.dav_helpers import Dav, mount, user
from tests.protocols.sftp_helpers import add_user, live_manifold
from tests.services.test_file_ops import caller

REPLACES = 200
PARKED = ".manifold"


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "a", {"x/report.txt": "first", "y/report.txt": "first"})
    await mount(services, "/a", root)
    return root


async def never_missing(
    services: Services, path: str, times: int, replace: Callable[[int], Awaitable[None]]
) -> int:
    """Run ``replace(0)`` .. ``replace(times - 1)`` while a reader stats ``path`` in a
    loop; how many times the reader found nothing there."""
    done = asyncio.Event()
    missing = 0

    async def read() -> None:
        nonlocal missing
        while not done.is_set():
            try:
                await services.ops.stat(caller(), path)
            except ObjectNotFound:
                missing += 1
            await asyncio.sleep(0)

    reader = asyncio.create_task(read())
    try:
        for turn in range(times):
            await replace(turn)
            await asyncio.sleep(0)  # the reader's turn, at the least
    finally:
        done.set()
        await reader
    return missing


def parked(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(PARKED)]


@pytest.mark.parametrize("source_dir", ["y", "x"], ids=["rename", "move"])
async def test_a_move_over_a_file_never_leaves_the_name_empty(
    services: Services, disk: Path, source_dir: str
) -> None:
    assert "move_over" in services.tree.place("/a").ops.driver.capabilities()

    async def replace(turn: int) -> None:
        (disk / source_dir / "next.txt").write_text(f"version {turn}")
        dst = "/a/y/report.txt"
        await services.ops.rename(caller(), f"/a/{source_dir}/next.txt", dst, overwrite=True)

    assert await never_missing(services, "/a/y/report.txt", REPLACES, replace) == 0
    assert (disk / "y" / "report.txt").read_text() == f"version {REPLACES - 1}"
    assert not (disk / source_dir / "next.txt").exists()
    assert parked(disk / "x") == parked(disk / "y") == []
    listed = [o for o in await services.ops.list(caller(), "/a/y") if o.name == "report.txt"]
    assert [o.size for o in listed] == [len(f"version {REPLACES - 1}")]


async def test_a_folder_and_a_file_replace_each_other_the_old_way(
    services: Services, disk: Path
) -> None:
    """Only a file replaces a file in one step; where a request replaces folders too
    (WebDAV's ``Overwrite: T``), a folder over a file, or a file over a folder, is
    replaced as before (set aside, then removed), leaving nothing parked."""
    make_tree(disk / "y", {"folder/inside.txt": "in", "other/": ""})
    with pytest.raises(FileExists):
        await services.ops.rename(caller(), "/a/y/folder", "/a/y/report.txt", overwrite=True)
    assert (disk / "y" / "report.txt").is_file()
    await services.ops.rename(
        caller(), "/a/y/folder", "/a/y/report.txt", overwrite=True, folders=True
    )
    assert (disk / "y" / "report.txt" / "inside.txt").read_text() == "in"
    await services.ops.rename(
        caller(), "/a/x/report.txt", "/a/y/other", overwrite=True, folders=True
    )
    assert (disk / "y" / "other").read_text() == "first"
    assert sorted(p.name for p in (disk / "y").iterdir()) == ["other", "report.txt"]
    assert parked(disk / "x") == []


class UnableLocal(LocalDriver):
    """Test-only: a Local whose back end turns out unable to replace in one step, as an
    SFTP server without ``posix-rename`` does."""

    async def move_over(self, src: Obj, dst_dir: Obj, name: str, replaced: Obj) -> Obj:
        raise NotSupported()


async def test_a_back_end_unable_after_all_is_replaced_the_old_way(
    services: Services, tmp_path: Path
) -> None:
    root = make_tree(tmp_path / "u", {"x/next.txt": "new", "y/report.txt": "old"})
    services.registry.register(
        "UnableLocal", UnableLocal, Addition, dataclasses.replace(CONFIG, name="UnableLocal")
    )
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, "/u", "UnableLocal", addition=addition))
    await services.ops.rename(caller(), "/u/x/next.txt", "/u/y/report.txt", overwrite=True)
    assert (root / "y" / "report.txt").read_text() == "new"
    assert sorted(p.name for p in (root / "y").iterdir()) == ["report.txt"]
    assert list((root / "x").iterdir()) == []


class SlowRemoveLocal(UnableLocal):
    """Test-only: an UnableLocal whose removals wait for ``gate`` once they began
    (``removing``), as a slow back end's do."""

    removing = asyncio.Event()
    gate = asyncio.Event()

    async def remove(self, obj: Obj) -> None:
        type(self).removing.set()
        await type(self).gate.wait()
        await super().remove(obj)


async def test_a_replace_cancelled_after_its_last_rename_leaves_nothing_parked(
    services: Services, tmp_path: Path
) -> None:
    """Cancelled while the replaced file, set aside, is being removed: the removal
    runs to its end, and nothing stays parked."""
    SlowRemoveLocal.removing, SlowRemoveLocal.gate = asyncio.Event(), asyncio.Event()
    root = make_tree(tmp_path / "s", {"x/next.txt": "new", "y/report.txt": "old"})
    config = dataclasses.replace(CONFIG, name="SlowRemoveLocal")
    services.registry.register("SlowRemoveLocal", SlowRemoveLocal, Addition, config)
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, "/s", "SlowRemoveLocal", addition=addition))
    moving = asyncio.ensure_future(
        services.ops.rename(caller(), "/s/x/next.txt", "/s/y/report.txt", overwrite=True)
    )
    await SlowRemoveLocal.removing.wait()
    moving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await moving
    SlowRemoveLocal.gate.set()
    for _ in range(600):  # the removal goes on by itself; a guard, not a timing check
        if not parked(root / "y"):
            break
        await asyncio.sleep(0.05)
    assert parked(root / "y") == []
    assert (root / "y" / "report.txt").read_text() == "new"


async def test_a_webdav_move_with_overwrite_replaces_in_one_step(
    services: Services, disk: Path
) -> None:
    await user(services, "dora")
    async with open_api(services) as api:
        dav = Dav(api.client, "dora")

        async def replace(turn: int) -> None:
            (disk / "x" / "next.txt").write_text(f"version {turn}")
            answer = await dav(
                "MOVE", "/a/x/next.txt", Destination="/dav/a/y/report.txt", Overwrite="T"
            )
            assert answer.status_code == 204, answer.text

        assert await never_missing(services, "/a/y/report.txt", 50, replace) == 0
    assert (disk / "y" / "report.txt").read_text() == "version 49"
    assert sorted(p.name for p in (disk / "x").iterdir()) == ["report.txt"]
    assert parked(disk / "y") == []


async def test_an_sftp_posix_rename_replaces_in_one_step(
    services: Services, tmp_path: Path
) -> None:
    async with live_manifold(services, tmp_path / "disk") as live:
        await add_user(services, "sam")
        async with live.sftp("sam") as sftp:

            async def replace(turn: int) -> None:
                async with sftp.open("/local/docs/next.txt", "wb") as f:
                    await f.write(f"version {turn}".encode())
                await sftp.posix_rename("/local/docs/next.txt", "/local/docs/readme.txt")

            assert await never_missing(services, "/local/docs/readme.txt", 50, replace) == 0
            assert "next.txt" not in await sftp.listdir("/local/docs")
        docs = live.disk / "docs"
        assert (docs / "readme.txt").read_text() == "version 49"
        assert parked(docs) == []
