"""WebDAV locks that several processes share: rows of the ``dav_locks`` table, or
entries of one Redis hash. ``lock_store(state)`` picks the store of the state back
end (``manifold.state``): memory for one process alone, else the database or Redis.

A LOCK is taken under the run-once lock ``webdav-locks`` of the state, so two
processes never both grant conflicting locks: the check and the insert run as one.
Reads (``covering``, ``below``) load the live locks and filter them here, by the same
rules as the memory store (a lock table holds few entries: those clients hold open).
Expiry is a time in every entry, compared with the wall clock of each process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace

import orjson
import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncEngine

from manifold.errors import TemporaryFailure
from manifold.paths import is_sub_path
from manifold.protocols.webdav.locks import Lock, LockConflict, LockStore, MemoryLockStore
from manifold.state import State
from manifold.state.locks import Locks
from manifold.state.records import DavLockRepo, LockRow

MUTEX = "webdav-locks"
MUTEX_TTL = 10.0
# How long a LOCK waits for another process's LOCK before answering 503.
MUTEX_WAIT = 10.0
HASH = "manifold:dav:locks"


def lock_store(state: State) -> LockStore:
    if state.redis is not None:
        return RedisLockStore(state.redis, state.locks)
    if state.shared:
        return DatabaseLockStore(state.engine, state.locks)
    return MemoryLockStore()


class SharedLockStore:
    """``LockStore`` over a store's primitives: ``_live``, ``_insert``, ``_renew``,
    ``_delete``."""

    def __init__(self, mutex: Locks, clock: Callable[[], float] = time.time) -> None:
        self._mutex = mutex
        self._clock = clock

    async def create(self, lock: Lock) -> None:
        async with self._mutex.hold(MUTEX, MUTEX_TTL, wait=MUTEX_WAIT) as got:
            if not got:
                raise TemporaryFailure("another LOCK is being taken; try again")
            for held in await self._live():
                if held.conflicts(lock):
                    raise LockConflict(held.token)
            await self._insert(lock)

    async def refresh(self, token: str, seconds: int) -> Lock | None:
        return await self._renew(token, seconds, self._clock())

    async def remove(self, token: str) -> bool:
        return await self._delete(token)

    async def covering(self, path: str) -> list[Lock]:
        return [lock for lock in await self._live() if lock.covers(path)]

    async def below(self, path: str) -> list[Lock]:
        return [lock for lock in await self._live() if is_sub_path(path, lock.path)]

    async def _live(self) -> list[Lock]:
        raise NotImplementedError

    async def _insert(self, lock: Lock) -> None:
        raise NotImplementedError

    async def _renew(self, token: str, seconds: int, now: float) -> Lock | None:
        raise NotImplementedError

    async def _delete(self, token: str) -> bool:
        raise NotImplementedError


class DatabaseLockStore(SharedLockStore):
    def __init__(
        self, engine: AsyncEngine, mutex: Locks, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(mutex, clock)
        self._repo = DavLockRepo(engine)

    async def _live(self) -> list[Lock]:
        return [Lock(**asdict(row)) for row in await self._repo.live(self._clock())]

    async def _insert(self, lock: Lock) -> None:
        await self._repo.add(LockRow(**asdict(lock)), self._clock())

    async def _renew(self, token: str, seconds: int, now: float) -> Lock | None:
        if not await self._repo.renew(token, seconds, now):
            return None
        found = [lock for lock in await self._live() if lock.token == token]
        return found[0] if found else None

    async def _delete(self, token: str) -> bool:
        return await self._repo.remove(token)


# Sets a lock's entry only while it is there (a refresh never brings back a lock
# that another process removed meanwhile).
_REPLACE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    return 1
end
return 0
"""


class RedisLockStore(SharedLockStore):
    def __init__(
        self, client: aioredis.Redis, mutex: Locks, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(mutex, clock)
        self._client = client
        self._replace = client.register_script(_REPLACE)

    async def _live(self) -> list[Lock]:
        now = self._clock()
        return [lock for lock in await self._all() if lock.expires > now]

    async def _insert(self, lock: Lock) -> None:
        now = self._clock()
        entries = await self._entries()
        ended = [token for token, held in entries.items() if held is None or held.expires <= now]
        if ended:
            await self._client.hdel(HASH, *ended)
        await self._client.hset(HASH, lock.token, orjson.dumps(asdict(lock)))

    async def _renew(self, token: str, seconds: int, now: float) -> Lock | None:
        held = [lock for lock in await self._live() if lock.token == token]
        if not held:
            return None
        renewed = replace(held[0], timeout=seconds, expires=now + seconds)
        entry = orjson.dumps(asdict(renewed))
        return renewed if await self._replace(keys=[HASH], args=[token, entry]) else None

    async def _delete(self, token: str) -> bool:
        return bool(await self._client.hdel(HASH, token))

    async def _all(self) -> list[Lock]:
        return [lock for lock in (await self._entries()).values() if lock is not None]

    async def _entries(self) -> dict[bytes, Lock | None]:
        """Every entry by token; None for one written before locks named their holder,
        which holds nothing and goes with the expired ones."""
        entries: dict[bytes, bytes] = await self._client.hgetall(HASH)  # type: ignore[assignment]
        return {token: _decoded(value) for token, value in entries.items()}


def _decoded(value: bytes) -> Lock | None:
    fields = orjson.loads(value)
    return Lock(**fields) if "holder" in fields else None
