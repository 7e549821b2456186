"""A process that may have missed changes reloads (its handlers hear ``RESYNC``):
on Redis when its subscription drops (the connection killed, the server restarted,
or hung and silent), on the database when rows were pruned before it read them.
Afterwards messages flow again. While Redis is away the bus is not ``live``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from manifold.config import Config
from manifold.db.state_repo import ChangeRepo
from manifold.state import State, open_state
from manifold.state.bus import RESYNC, Bus
from manifold.state.sql_bus import KEEP_SECONDS, DatabaseBus
from tests.fixtures.processes import Daemon
from tests.fixtures.redisserver import RedisServer, redis_daemon, start_redis

# Long enough for any slow machine; the tests end as soon as the event comes.
WAIT_SECONDS = 60.0


class Heard:
    """What one process's handlers were told."""

    def __init__(self, bus: Bus, topic: str) -> None:
        self.resyncs = 0
        self.messages: list[dict[str, Any]] = []
        self.resynced = asyncio.Event()
        bus.subscribe(RESYNC, self._resync)
        bus.subscribe(topic, self._message)

    async def _resync(self, _: dict[str, Any]) -> None:
        self.resyncs += 1
        self.resynced.set()

    async def _message(self, data: dict[str, Any]) -> None:
        self.messages.append(data)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def opened(url: str, engine: Any, tmp_path: Path) -> State:
    state = open_state(Config(data_dir=tmp_path, redis_url=url), engine)
    await state.start()
    state.bus.handlers.open()
    return state


@pytest.fixture
async def states() -> AsyncIterator[list[State]]:
    made: list[State] = []
    yield made
    for state in made:
        await state.stop()


async def test_a_killed_subscription_resubscribes_and_resyncs(
    redis_server: RedisServer, engine_of: Any, tmp_path: Path, states: list[State]
) -> None:
    engine = await engine_of("sqlite")
    a = await opened(redis_server.url, engine, tmp_path)
    b = await opened(redis_server.url, engine, tmp_path)
    states += [a, b]
    heard = Heard(a.bus, "storage")
    async with aioredis.Redis.from_url(redis_server.url) as admin:
        killed = await admin.client_kill_filter(_type="pubsub")
    assert killed >= 2  # both processes' subscriptions
    await asyncio.wait_for(heard.resynced.wait(), WAIT_SECONDS)
    await b.bus.publish("storage", {"id": 1})
    await a.bus.sync()
    assert heard.messages == [{"id": 1}]


async def test_a_restarted_server_is_subscribed_again_with_a_resync(
    engine_of: Any, tmp_path: Path, states: list[State]
) -> None:
    server = start_redis(tmp_path / "redis")  # this test's own: it goes away
    try:
        engine = await engine_of("sqlite")
        a = await opened(server.url, engine, tmp_path)
        b = await opened(server.url, engine, tmp_path)
        states += [a, b]
        heard = Heard(a.bus, "metas")
        server.stop()
        server = start_redis(tmp_path / "redis", port=server.port)
        await asyncio.wait_for(heard.resynced.wait(), WAIT_SECONDS)
        await b.bus.publish("metas", {"path": "/x"})
        await asyncio.wait_for(a.bus.sync(), WAIT_SECONDS)
        assert heard.messages == [{"path": "/x"}]
    finally:
        for state in states:
            await state.stop()
        states.clear()
        server.stop()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_rows_pruned_before_a_slow_process_read_them_make_it_resync(
    kind: str, engine_of: Any
) -> None:
    engine = await engine_of(kind)
    clock = Clock()
    writer = DatabaseBus(engine, "writer", poll=3600)
    slow = DatabaseBus(engine, "slow", poll=3600, clock=clock)
    heard = Heard(slow, "user")
    for bus in (writer, slow):
        await bus.start()
        bus.handlers.open()
    try:
        await writer.publish("user", {"name": "before"})
        await slow.sync()
        assert (heard.messages, heard.resyncs) == ([{"name": "before"}], 0)
        for n in range(3):
            await writer.publish("user", {"name": f"missed-{n}"})
        # The slow process sleeps past the rows' lifetime; another process prunes them.
        await ChangeRepo(engine).prune(time.time() + 1)
        clock.now += KEEP_SECONDS
        await slow.sync()
        assert heard.resyncs == 1
        assert {"name": "missed-0"} not in heard.messages
        await writer.publish("user", {"name": "after"})
        await slow.sync()
        assert heard.messages[-1] == {"name": "after"}
        assert heard.resyncs == 1
    finally:
        await writer.stop()
        await slow.stop()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_messages_still_arrive_after_every_row_was_old_enough_to_prune(
    kind: str, engine_of: Any
) -> None:
    engine = await engine_of(kind)
    writer = DatabaseBus(engine, "writer", poll=3600)
    reader = DatabaseBus(engine, "reader", poll=3600)
    heard = Heard(reader, "settings")
    for bus in (writer, reader):
        await bus.start()
        bus.handlers.open()
    try:
        for n in range(3):
            await writer.publish("settings", {"n": n})
        await reader.sync()
        await ChangeRepo(engine).prune(time.time() + 1)  # a quiet minute went by
        await writer.publish("settings", {"n": 3})
        await reader.sync()
        assert heard.messages == [{"n": n} for n in range(4)]
        assert heard.resyncs == 0
    finally:
        await writer.stop()
        await reader.stop()


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        assert time.monotonic() < deadline, f"not within {WAIT_SECONDS} s: {what}"
        await asyncio.sleep(0.05)


@contextlib.contextmanager
def outage(redis: Daemon, kind: str) -> Iterator[None]:
    """Redis hung (SIGSTOP: connections open, no answers) or dead while the block runs."""
    if kind == "hung":
        with redis.paused():
            yield
        return
    redis.kill()
    try:
        yield
    finally:
        redis.start()


@pytest.mark.parametrize("kind", ["hung", "dead"])
async def test_while_redis_is_away_the_bus_is_not_live_and_keeps_what_it_could_not_send(
    kind: str, engine_of: Any, tmp_path: Path, states: list[State]
) -> None:
    redis, url = redis_daemon(tmp_path / "redis")  # this test's own: it goes away
    redis.start()
    try:
        engine = await engine_of("sqlite")
        a = await opened(url, engine, tmp_path)
        b = await opened(url, engine, tmp_path)
        states += [a, b]
        heard = Heard(b.bus, "user")
        assert a.bus.live and b.bus.live
        with outage(redis, kind):
            # Answers within the bound, without raising: the change is made already.
            await asyncio.wait_for(a.bus.publish("user", {"name": "during"}), WAIT_SECONDS)
            assert not a.bus.live
            await until(lambda: not b.bus.live, "b no longer trusts what it heard")
        await until(lambda: a.bus.live and b.bus.live, "both live again")
        assert heard.resyncs >= 1  # b reloaded before it counted as live again
        await a.bus.publish("user", {"name": "after"})
        await asyncio.wait_for(b.bus.sync(), WAIT_SECONDS)
        assert heard.messages[-1] == {"name": "after"}
        assert heard.messages.count({"name": "after"}) == 1
    finally:
        for state in states:
            await state.stop()
        states.clear()
        redis.stop()
