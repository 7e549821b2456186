"""What the StorageOps tests share: a Local storage's operations and a count of how
often its back end is listed."""

from __future__ import annotations

import json
from pathlib import Path

from manifold.drivers.base import Driver
from manifold.drivers.registry import builtin_registry
from manifold.models import Obj, Storage
from manifold.vfs.storage_ops import MemoryListCache, StorageOps


class Scans:
    """Wraps a driver's ``list`` to count how often the back end is listed."""

    def __init__(self, driver: Driver[object]) -> None:
        self.count = 0
        original = driver.list

        async def counted(folder: Obj) -> list[Obj]:
            self.count += 1
            return await original(folder)

        driver.list = counted  # type: ignore[method-assign]


async def local_ops(root: Path, cache_expiration: int = 30, no_cache: bool = False) -> StorageOps:
    """StorageOps over an initialised Local storage of ``root`` at /m (drop its driver)."""
    addition = json.dumps({"root_folder_path": str(root)})
    storage = Storage(
        id=7, mount_path="/m", driver="Local", addition=addition, cache_expiration=cache_expiration
    )
    driver = builtin_registry().build(storage)
    await driver.init()
    return StorageOps(storage, driver, MemoryListCache(), no_cache=no_cache)
