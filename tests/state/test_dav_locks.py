"""One contract for every WebDAV lock store: memory, the database (SQLite and
PostgreSQL) and Redis. Two stores opened on one database or Redis stand for two
processes; the memory store is one process, so both names are one store there."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from manifold.config import Config
from manifold.protocols.webdav.locks import Lock, LockConflict, LockStore, new_lock
from manifold.protocols.webdav.shared_locks import HASH, lock_store
from manifold.state import open_state

BACKENDS = ("memory", "sqlite", "postgresql", "redis")


@dataclass(slots=True)
class Pair:
    a: LockStore
    b: LockStore
    root: str  # a folder of this test's own, so that tests never share locks


@pytest.fixture(params=BACKENDS)
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path, engine_of: Any
) -> AsyncIterator[Pair]:
    kind = request.param
    engine = await engine_of("postgresql" if kind == "postgresql" else "sqlite")
    redis_url = request.getfixturevalue("redis_server").url if kind == "redis" else ""
    config = Config(data_dir=tmp_path, redis_url=redis_url)
    states = [open_state(config, engine, shared=kind != "memory") for _ in range(2)]
    a = lock_store(states[0])
    b = lock_store(states[1]) if kind != "memory" else a
    yield Pair(a, b, "/t" + secrets.token_hex(4))
    for state in states:
        await state.stop()


def exclusive(path: str, infinite: bool = False, timeout: int = 600, holder: int = 7) -> Lock:
    return new_lock(path, infinite, True, "<D:href>me</D:href>", timeout, holder=holder)


def shared(path: str, holder: int = 7) -> Lock:
    return new_lock(path, False, False, "", 600, holder=holder)


async def test_a_lock_taken_on_one_refuses_a_conflicting_one_on_the_other(stores: Pair) -> None:
    path = stores.root + "/doc.txt"
    held = exclusive(path)
    await stores.a.create(held)
    with pytest.raises(LockConflict):
        await stores.b.create(exclusive(path))
    with pytest.raises(LockConflict):
        await stores.b.create(shared(path))
    assert [lock.token for lock in await stores.b.covering(path)] == [held.token]
    found = (await stores.b.covering(path))[0]
    assert (found.path, found.exclusive, found.owner, found.timeout) == (
        path, True, "<D:href>me</D:href>", 600,
    )  # fmt: skip


async def test_every_store_keeps_who_holds_a_lock(stores: Pair) -> None:
    path = stores.root + "/doc.txt"
    first, second = shared(path, holder=3), shared(path, holder=4)
    await stores.a.create(first)
    await stores.a.create(second)
    holders = {lock.token: lock.holder for lock in await stores.b.covering(path)}
    assert holders == {first.token: 3, second.token: 4}
    renewed = await stores.b.refresh(first.token, 60)
    assert renewed is not None and renewed.held_by(3) and not renewed.held_by(4)


async def test_shared_locks_sit_together(stores: Pair) -> None:
    path = stores.root + "/doc.txt"
    first, second = shared(path), shared(path)
    await stores.a.create(first)
    await stores.b.create(second)
    tokens = {lock.token for lock in await stores.a.covering(path)}
    assert tokens == {first.token, second.token}
    with pytest.raises(LockConflict):
        await stores.a.create(exclusive(path))


async def test_a_deep_lock_covers_what_is_below_it(stores: Pair) -> None:
    folder = stores.root + "/folder"
    deep = exclusive(folder, infinite=True)
    await stores.a.create(deep)
    assert [lock.token for lock in await stores.b.covering(folder + "/a/b.txt")] == [deep.token]
    assert await stores.b.covering(stores.root + "/folder-2") == []
    with pytest.raises(LockConflict):
        await stores.b.create(exclusive(folder + "/a/b.txt"))
    assert [lock.token for lock in await stores.b.below(stores.root)] == [deep.token]
    assert await stores.b.below(folder + "/a") == []


async def test_a_deep_lock_is_refused_above_a_held_one(stores: Pair) -> None:
    inner = exclusive(stores.root + "/folder/inner.txt")
    await stores.a.create(inner)
    with pytest.raises(LockConflict):
        await stores.b.create(exclusive(stores.root + "/folder", infinite=True))
    await stores.b.create(exclusive(stores.root + "/folder"))  # depth 0: no overlap


async def test_a_lock_is_refreshed_and_removed_from_either(stores: Pair) -> None:
    path = stores.root + "/doc.txt"
    held = exclusive(path, timeout=60)
    await stores.a.create(held)
    renewed = await stores.b.refresh(held.token, 3600)
    assert renewed is not None
    assert (renewed.token, renewed.timeout) == (held.token, 3600)
    assert renewed.expires > held.expires
    assert [lock.timeout for lock in await stores.a.covering(path)] == [3600]
    assert await stores.b.remove(held.token)
    assert await stores.a.covering(path) == []
    assert not await stores.a.remove(held.token)
    assert await stores.a.refresh(held.token, 60) is None
    await stores.a.create(exclusive(path))


async def test_an_expired_lock_holds_nothing(stores: Pair) -> None:
    path = stores.root + "/doc.txt"
    old = replace(exclusive(path, infinite=True), expires=time.time() - 1)
    await stores.a.create(old)
    assert await stores.b.covering(path) == []
    assert await stores.b.below(stores.root) == []
    assert await stores.b.refresh(old.token, 600) is None
    fresh = exclusive(path)
    await stores.b.create(fresh)
    assert [lock.token for lock in await stores.a.covering(path)] == [fresh.token]


async def test_of_two_conflicting_locks_at_once_one_is_granted(stores: Pair) -> None:
    path = stores.root + "/race.txt"
    outcomes = await asyncio.gather(
        *(store.create(exclusive(path)) for store in (stores.a, stores.b, stores.a, stores.b)),
        return_exceptions=True,
    )
    assert sum(outcome is None for outcome in outcomes) == 1
    assert all(isinstance(o, LockConflict) for o in outcomes if o is not None)
    assert len(await stores.a.covering(path)) == 1


async def test_a_redis_lock_kept_before_locks_named_their_holder_holds_nothing(
    redis_server: Any, tmp_path: Path, engine_of: Any
) -> None:
    config = Config(data_dir=tmp_path, redis_url=redis_server.url)
    state = open_state(config, await engine_of("sqlite"), shared=True)
    assert state.redis is not None
    store = lock_store(state)
    path = "/t" + secrets.token_hex(4) + "/doc.txt"
    old = exclusive(path)
    unnamed = {key: value for key, value in asdict(old).items() if key != "holder"}
    await state.redis.hset(HASH, old.token, orjson.dumps(unnamed))
    assert await store.covering(path) == []
    await store.create(exclusive(path))  # and the old entry goes
    assert not await state.redis.hexists(HASH, old.token)
    await state.stop()
