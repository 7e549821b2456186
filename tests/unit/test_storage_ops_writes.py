"""Writes through StorageOps patch the cached listings instead of dropping them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.drivers.base import Driver, Upload
from manifold.drivers.registry import builtin_registry
from manifold.errors import NotAFolder, ObjectExists, ServerError
from manifold.models import Obj, Storage
from manifold.vfs.storage_ops import MemoryListCache, StorageOps


class CountingDriver:
    """Wraps a driver's ``list`` to count how often the back end is listed."""

    def __init__(self, driver: Driver[object]) -> None:
        self.calls = 0
        original = driver.list

        async def counted(folder: Obj) -> list[Obj]:
            self.calls += 1
            return await original(folder)

        driver.list = counted  # type: ignore[method-assign]


@pytest.fixture
async def ops(tmp_path: Path) -> AsyncIterator[tuple[StorageOps, CountingDriver, Path]]:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub/s.txt").write_text("s")  # empty listings are never cached
    storage = Storage(
        id=1,
        mount_path="/m",
        driver="Local",
        addition=json.dumps({"root_folder_path": str(root)}),
        cache_expiration=30,
    )
    driver = builtin_registry().build(storage)
    await driver.init()
    counter = CountingDriver(driver)
    yield StorageOps(storage, driver, MemoryListCache(), no_cache=False), counter, root
    await driver.drop()


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


def listed(objs: list[Obj]) -> set[str]:
    return {o.name for o in objs}


async def test_each_write_patches_the_cache(
    ops: tuple[StorageOps, CountingDriver, Path],
) -> None:
    storage_ops, counter, root = ops
    assert listed(await storage_ops.list("/")) == {"a.txt", "sub"}
    await storage_ops.list("/sub")
    assert counter.calls == 2

    await storage_ops.make_dir("/new")
    await storage_ops.put("/", Upload("up.txt", chunks(b"up"), 2, None))
    await storage_ops.rename("/a.txt", "b.txt")
    await storage_ops.move("/b.txt", "/sub")
    await storage_ops.copy("/up.txt", "/sub")
    await storage_ops.remove("/up.txt")

    assert listed(await storage_ops.list("/")) == {"sub", "new"}
    assert listed(await storage_ops.list("/sub")) == {"s.txt", "b.txt", "up.txt"}
    assert counter.calls == 2, "writes must patch the cached listings, not drop them"
    assert listed(await storage_ops.list("/", refresh=True)) == {"sub", "new"}
    assert sorted(p.name for p in root.iterdir()) == ["new", "sub"]


async def test_put_creates_missing_folders(ops: tuple[StorageOps, CountingDriver, Path]) -> None:
    storage_ops, _, root = ops
    await storage_ops.put("/x/y", Upload("f", chunks(b"f"), 1, None))
    assert (root / "x/y/f").read_bytes() == b"f"


async def test_make_dir_over_file_and_removing_the_root(
    ops: tuple[StorageOps, CountingDriver, Path],
) -> None:
    storage_ops, _, root = ops
    with pytest.raises(ObjectExists, match="file exists"):
        await storage_ops.make_dir("/a.txt")
    with pytest.raises(NotAFolder):
        await storage_ops.make_dir("/a.txt/deeper")
    with pytest.raises(ServerError, match="delete root folder is not allowed"):
        await storage_ops.remove("/")
    assert (root / "a.txt").read_text() == "a"
