"""Operations on one mounted storage, in paths inside it: lookup, list cache, sorting.

Listings are cached per path for the storage's ``cache_expiration`` minutes, and
identical concurrent calls share one driver call. ``ListCache`` is the interface;
this process keeps entries in memory, several instances would share one.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast

from manifold.drivers.base import Driver, LinkArgs
from manifold.errors import NotAFile, NotAFolder, ObjectNotFound
from manifold.models import Link, Obj, Storage
from manifold.vfs.paths import clean_path, split_path

T = TypeVar("T")


class ListCache(Protocol):
    def get(self, key: str) -> builtins.list[Obj] | None: ...

    def put(self, key: str, objs: builtins.list[Obj], ttl: float) -> None: ...

    def drop(self, key: str) -> None: ...

    def drop_prefix(self, prefix: str) -> None: ...


class MemoryListCache:
    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, list[Obj]]] = {}

    def get(self, key: str) -> builtins.list[Obj] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] < time.monotonic():
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: str, objs: builtins.list[Obj], ttl: float) -> None:
        self._entries[key] = (time.monotonic() + ttl, objs)

    def drop(self, key: str) -> None:
        self._entries.pop(key, None)

    def drop_prefix(self, prefix: str) -> None:
        for key in [k for k in self._entries if k == prefix or k.startswith(prefix + "/")]:
            del self._entries[key]


class SingleFlight:
    """Runs one call per key at a time; callers arriving meanwhile share its result."""

    def __init__(self) -> None:
        self._running: dict[str, asyncio.Future[object]] = {}

    async def run(self, key: str, call: Callable[[], Awaitable[T]]) -> T:
        running = self._running.get(key)
        if running is not None:
            return cast(T, await asyncio.shield(running))
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            result = await call()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: no waiter is not an error
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self._running[key]


class StorageOps:
    def __init__(
        self, storage: Storage, driver: Driver[Any], cache: ListCache, no_cache: bool = False
    ) -> None:
        self.storage = storage
        self._no_cache = no_cache
        self.driver = driver
        self._cache = cache
        self._flight = SingleFlight()
        self._prefix = f"{storage.id}:"

    @property
    def _ttl(self) -> float:
        return float(self.storage.cache_expiration) * 60

    async def get(self, path: str) -> Obj:
        """The object at ``path`` inside the storage."""
        path = clean_path(path)
        if path == "/":
            return await self.driver.root_obj()
        if "get" in self.driver.capabilities():
            return await self.driver.get(path)
        parent, name = split_path(path)
        for obj in await self.list(parent):
            if obj.name == name:
                return obj
        raise ObjectNotFound()

    async def list(self, path: str, refresh: bool = False) -> builtins.list[Obj]:
        path = clean_path(path)
        key = self._prefix + path
        if refresh:
            self._cache.drop(key)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        return await self._flight.run(key, lambda: self._list_fresh(path, key))

    async def _list_fresh(self, path: str, key: str) -> builtins.list[Obj]:
        folder = await self.get(path)
        if not folder.is_dir:
            raise NotAFolder()
        objs = self._sorted(await self.driver.list(folder))
        if self._ttl > 0 and not self._no_cache:
            self._cache.put(key, objs, self._ttl)
        return objs

    async def link(self, path: str, args: LinkArgs) -> tuple[Obj, Link]:
        obj = await self.get(path)
        if obj.is_dir:
            raise NotAFile()
        return obj, await self.driver.link(obj, args)

    def forget(self, path: str) -> None:
        """Drop the cached listings of ``path`` and everything below it."""
        self._cache.drop_prefix(self._prefix + clean_path(path))

    def _sorted(self, objs: builtins.list[Obj]) -> builtins.list[Obj]:
        storage = self.storage
        if storage.order_by in ("name", "size", "modified"):
            reverse = storage.order_direction == "desc"
            objs = sorted(objs, key=_SORT_KEYS[storage.order_by], reverse=reverse)
        if storage.extract_folder == "front":
            objs = sorted(objs, key=lambda o: not o.is_dir)
        elif storage.extract_folder == "back":
            objs = sorted(objs, key=lambda o: o.is_dir)
        return objs


_SORT_KEYS: dict[str, Callable[[Obj], Any]] = {
    "name": lambda o: o.name,
    "size": lambda o: o.size,
    "modified": lambda o: o.modified,
}
