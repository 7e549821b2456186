"""The protocols' strict writes (``strict=True``) and the API's lenient ones.

WebDAV, FTP and SFTP need exact answers: removing what is not there, making a folder
that exists, writing under a folder that does not. The JSON API keeps AList's
lenient answers (nothing to remove is fine, missing folders are made).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.errors import ObjectExists, ObjectNotFound, ParentNotFound
from manifold.models import Storage
from tests.api.fs_helpers import make_tree
from tests.services.test_file_ops import caller, chunks

KINDS = ["/a", "/al"]


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "a", {"docs/readme.txt": "hello", "file.txt": "f"})
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, "/a", "Local", addition=addition))
    alias = json.dumps({"paths": "/a", "writable": True})
    await services.storages.create(Storage(0, "/al", "Alias", addition=alias))
    return root


def tree_of(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_missing_parent_is_a_missing_object_to_every_existing_mapping() -> None:
    assert issubclass(ParentNotFound, ObjectNotFound)


@pytest.mark.parametrize("mount", KINDS)
async def test_removing_a_missing_path(services: Services, disk: Path, mount: str) -> None:
    await services.ops.remove(caller(), f"{mount}/docs/nothing.txt")
    with pytest.raises(ObjectNotFound):
        await services.ops.remove(caller(), f"{mount}/docs/nothing.txt", strict=True)
    await services.ops.remove(caller(), f"{mount}/docs/readme.txt", strict=True)
    assert tree_of(disk) == ["docs", "file.txt"]


@pytest.mark.parametrize("mount", KINDS)
async def test_making_a_folder_that_exists(services: Services, disk: Path, mount: str) -> None:
    assert (await services.ops.mkdir(caller(), f"{mount}/docs")).is_dir
    with pytest.raises(ObjectExists):
        await services.ops.mkdir(caller(), f"{mount}/docs", strict=True)
    with pytest.raises(ObjectExists):
        await services.ops.mkdir(caller(), f"{mount}/file.txt", strict=True)
    assert (await services.ops.mkdir(caller(), f"{mount}/docs/new", strict=True)).is_dir
    assert (disk / "docs" / "new").is_dir()


@pytest.mark.parametrize("mount", KINDS)
async def test_writes_under_a_missing_folder(services: Services, disk: Path, mount: str) -> None:
    ops, who = services.ops, caller()
    before = tree_of(disk)
    with pytest.raises(ParentNotFound):
        await ops.mkdir(who, f"{mount}/no/new", strict=True)
    with pytest.raises(ParentNotFound):
        await ops.put(who, f"{mount}/no/f.txt", chunks(b"x"), 1, strict=True)
    with pytest.raises(ParentNotFound):
        await ops.open_writer(who, f"{mount}/no/f.txt", strict=True)
    with pytest.raises(ParentNotFound):
        await ops.copy(who, f"{mount}/file.txt", f"{mount}/no/f.txt", strict=True)
    with pytest.raises(ParentNotFound):
        await ops.rename(who, f"{mount}/file.txt", f"{mount}/no/f.txt", strict=True)
    with pytest.raises(ParentNotFound):  # a file is no folder to write in
        await ops.put(who, f"{mount}/file.txt/f.txt", chunks(b"x"), 1, strict=True)
    assert tree_of(disk) == before


@pytest.mark.parametrize("mount", KINDS)
async def test_the_api_makes_missing_folders_for_new_objects(
    services: Services, disk: Path, mount: str
) -> None:
    ops, who = services.ops, caller()
    await ops.mkdir(who, f"{mount}/m1/new")
    await ops.put(who, f"{mount}/m2/f.txt", chunks(b"x"), 1)
    await ops.copy(who, f"{mount}/file.txt", f"{mount}/m3/f.txt")
    assert {"m1/new", "m2/f.txt", "m3/f.txt"} <= set(tree_of(disk))
    # A move never made its destination folder (AList's "object not found").
    with pytest.raises(ObjectNotFound):
        await ops.rename(who, f"{mount}/file.txt", f"{mount}/m4/f.txt")
    assert (disk / "file.txt").read_text() == "f"


@pytest.mark.parametrize("mount", KINDS)
async def test_strict_writes_in_an_existing_folder_work(
    services: Services, disk: Path, mount: str
) -> None:
    ops, who = services.ops, caller()
    await ops.put(who, f"{mount}/docs/new.txt", chunks(b"new"), 3, strict=True)
    await ops.copy(who, f"{mount}/docs/new.txt", f"{mount}/copy.txt", strict=True)
    await ops.rename(who, f"{mount}/copy.txt", f"{mount}/docs/moved.txt", strict=True)
    assert (disk / "docs" / "new.txt").read_text() == "new"
    assert (disk / "docs" / "moved.txt").read_text() == "new"
    assert not (disk / "copy.txt").exists()
