"""Writes through StorageOps patch the cached listings instead of dropping them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.drivers.base import Upload
from manifold.errors import NotAFolder, ObjectExists, ServerError
from manifold.models import Obj
from manifold.vfs.storage_ops import StorageOps
from tests.unit.storage_ops_helpers import Scans, local_ops


@pytest.fixture
async def ops(tmp_path: Path) -> AsyncIterator[tuple[StorageOps, Scans, Path]]:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub/s.txt").write_text("s")  # empty listings are never cached
    ops = await local_ops(root)
    yield ops, Scans(ops.driver), root
    await ops.driver.drop()


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


def listed(objs: list[Obj]) -> set[str]:
    return {o.name for o in objs}


async def test_each_write_patches_the_cache(
    ops: tuple[StorageOps, Scans, Path],
) -> None:
    storage_ops, counter, root = ops
    assert listed(await storage_ops.list("/")) == {"a.txt", "sub"}
    await storage_ops.list("/sub")
    assert counter.count == 2

    await storage_ops.make_dir("/new")
    await storage_ops.put("/", Upload("up.txt", chunks(b"up"), 2, None))
    await storage_ops.rename("/a.txt", "b.txt")
    await storage_ops.move("/b.txt", "/sub")
    await storage_ops.copy("/up.txt", "/sub")
    await storage_ops.remove("/up.txt")

    assert listed(await storage_ops.list("/")) == {"sub", "new"}
    assert listed(await storage_ops.list("/sub")) == {"s.txt", "b.txt", "up.txt"}
    assert counter.count == 2, "writes must patch the cached listings, not drop them"
    assert listed(await storage_ops.list("/", refresh=True)) == {"sub", "new"}
    assert sorted(p.name for p in root.iterdir()) == ["new", "sub"]


async def test_put_creates_missing_folders(ops: tuple[StorageOps, Scans, Path]) -> None:
    storage_ops, _, root = ops
    await storage_ops.put("/x/y", Upload("f", chunks(b"f"), 1, None))
    assert (root / "x/y/f").read_bytes() == b"f"


async def test_make_dir_over_file_and_removing_the_root(
    ops: tuple[StorageOps, Scans, Path],
) -> None:
    storage_ops, _, root = ops
    with pytest.raises(ObjectExists, match="file exists"):
        await storage_ops.make_dir("/a.txt")
    with pytest.raises(NotAFolder):
        await storage_ops.make_dir("/a.txt/deeper")
    with pytest.raises(ServerError, match="delete root folder is not allowed"):
        await storage_ops.remove("/")
    assert (root / "a.txt").read_text() == "a"
