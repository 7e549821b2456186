"""One contract for every shared-state back end: memory, the database (SQLite and
PostgreSQL) and Redis. Each test opens one or two "processes" (``open_state`` on the
same database or Redis, each with its own origin) and checks what they share."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from manifold.config import Config
from manifold.errors import LeaseLost
from manifold.services.auth.limiter import (
    GuessLimiter,
    LoginLimiter,
    MemoryGuessLimiter,
    MemoryLoginLimiter,
)
from manifold.state import State, open_state
from manifold.state.bus import RESYNC
from manifold.state.locks import LeaseLocks

BACKENDS = ("memory", "sqlite", "postgresql", "redis")
MAX_FAILURES = 5
LOCKOUT = 300.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Processes:
    """Opens states of one back end, as separate processes would have them."""

    def __init__(self, kind: str, make: Callable[[], Awaitable[State]]) -> None:
        self.kind = kind
        self.shared = kind != "memory"
        self._make = make
        self.opened: list[State] = []

    async def open(self) -> State:
        state = await self._make()
        await state.start()
        state.bus.handlers.open()
        self.opened.append(state)
        return state

    def limiter(self, state: State, scope: str, clock: Clock) -> LoginLimiter:
        shared = state.login_limiter(scope, MAX_FAILURES, LOCKOUT)
        limiter = shared or MemoryLoginLimiter(MAX_FAILURES, LOCKOUT)
        limiter.clock = clock
        return limiter

    def guesses(self, state: State, scope: str, clock: Clock) -> GuessLimiter:
        shared = state.guess_limiter(scope, MAX_FAILURES, LOCKOUT)
        limiter = shared or MemoryGuessLimiter(MAX_FAILURES, LOCKOUT)
        limiter.clock = clock
        return limiter


@pytest.fixture(params=BACKENDS)
async def processes(
    request: pytest.FixtureRequest, tmp_path: Path, engine_of: Any
) -> AsyncIterator[Processes]:
    kind = request.param
    engine = await engine_of("postgresql" if kind == "postgresql" else "sqlite")
    redis_url = request.getfixturevalue("redis_server").url if kind == "redis" else ""

    async def make() -> State:
        config = Config(data_dir=tmp_path, redis_url=redis_url)
        return open_state(config, engine, shared=kind != "memory")

    made = Processes(kind, make)
    yield made
    for state in made.opened:
        await state.stop()


def recorder(state: State, topic: str) -> list[dict[str, Any]]:
    heard: list[dict[str, Any]] = []

    async def handler(data: dict[str, Any]) -> None:
        heard.append(data)

    state.bus.subscribe(topic, handler)
    return heard


# --- the bus ----------------------------------------------------------------------


async def test_a_message_reaches_the_other_process_and_not_its_sender(
    processes: Processes,
) -> None:
    a, b = await processes.open(), await processes.open()
    at_a, at_b = recorder(a, "storage"), recorder(b, "storage")
    await a.bus.publish("storage", {"id": 7})
    await b.bus.sync()
    assert at_b == ([{"id": 7}] if processes.shared else [])
    assert at_a == []


async def test_posted_messages_arrive_in_order(processes: Processes) -> None:
    a, b = await processes.open(), await processes.open()
    heard = recorder(b, "listing")
    for n in range(30):
        a.bus.post("listing", {"n": n})
    await a.bus.sync()
    await b.bus.sync()
    assert [m["n"] for m in heard] == (list(range(30)) if processes.shared else [])


async def test_every_process_hears_each_message(processes: Processes) -> None:
    a, b, c = await processes.open(), await processes.open(), await processes.open()
    at_b, at_c = recorder(b, "metas"), recorder(c, "metas")
    await a.bus.publish("metas", {})
    await b.bus.sync()
    await c.bus.sync()
    expected = [{}] if processes.shared else []
    assert (at_b, at_c) == (expected, expected)


async def test_a_failing_handler_leaves_the_others_to_run(processes: Processes) -> None:
    a, b = await processes.open(), await processes.open()

    async def broken(_: dict[str, Any]) -> None:
        raise RuntimeError("broken listener")

    b.bus.subscribe("user", broken)
    heard = recorder(b, "user")
    await a.bus.publish("user", {"name": "bob"})
    await a.bus.publish("user", {"name": "eve"})
    await b.bus.sync()
    expected = [{"name": "bob"}, {"name": "eve"}] if processes.shared else []
    assert heard == expected


async def test_a_resync_reaches_only_this_process_handlers(processes: Processes) -> None:
    a, b = await processes.open(), await processes.open()
    at_a, at_b = recorder(a, RESYNC), recorder(b, RESYNC)
    await a.bus.handlers.resync()
    await b.bus.sync()
    assert (at_a, at_b) == ([{}], [])


# --- locks ------------------------------------------------------------------------


async def test_a_lock_is_held_by_one_process_at_a_time(processes: Processes) -> None:
    a = await processes.open()
    b = await processes.open() if processes.shared else a
    name = "build-" + secrets.token_hex(4)
    async with a.locks.hold(name, 30) as first, b.locks.hold(name, 30) as second:
        assert (first, second) == (True, False)
    async with b.locks.hold(name, 30) as after:
        assert after


async def test_a_waiting_holder_gets_the_lock_once_it_is_let_go(processes: Processes) -> None:
    a = await processes.open()
    b = await processes.open() if processes.shared else a
    name = "init-" + secrets.token_hex(4)
    order: list[str] = []
    released = asyncio.Event()

    async def first() -> None:
        async with a.locks.hold(name, 30) as got:
            assert got
            order.append("a")
            released.set()
            await asyncio.sleep(0.3)
        order.append("a done")

    async def second() -> None:
        await released.wait()
        async with b.locks.hold(name, 30, wait=20) as got:
            assert got
            order.append("b")

    await asyncio.gather(first(), second())
    assert order == ["a", "a done", "b"]


async def test_a_lease_that_ran_out_goes_to_another_and_stays_there(
    processes: Processes,
) -> None:
    a = await processes.open()
    b = await processes.open() if processes.shared else a
    name = "lease-" + secrets.token_hex(4)
    locks_a = a.locks
    assert hasattr(locks_a, "take") and hasattr(locks_a, "release")
    assert await locks_a.take(name, "dead-holder", 0.2)  # a holder that never renews
    await asyncio.sleep(0.5)
    async with b.locks.hold(name, 30) as got:
        assert got
        await locks_a.release(name, "dead-holder")  # too late: not the holder any more
        async with a.locks.hold(name, 30) as third:
            assert not third


async def test_a_long_hold_is_renewed_past_its_lease(processes: Processes) -> None:
    a = await processes.open()
    b = await processes.open() if processes.shared else a
    name = "long-" + secrets.token_hex(4)
    # Renewed every third of the lease: 2 s leaves a loaded machine's database room
    # to answer a renewal in time; the hold outlasts the lease almost three times.
    async with a.locks.hold(name, 2.0) as got:
        assert got
        await asyncio.sleep(5.0)
        async with b.locks.hold(name, 30) as other:
            assert not other


class Unrenewable(LeaseLocks):
    """The locks of ``store`` whose renewals fail once ``failing`` is set: as if the
    store could not be reached (``raises``) or had given the lease to another."""

    def __init__(self, store: LeaseLocks, raises: bool) -> None:
        self.store = store
        self.raises = raises
        self.failing = False

    async def take(self, name: str, token: str, ttl: float) -> bool:
        return await self.store.take(name, token, ttl)

    async def extend(self, name: str, token: str, ttl: float) -> bool:
        if not self.failing:
            return await self.store.extend(name, token, ttl)
        if self.raises:
            raise ConnectionError("the store cannot be reached")
        return False

    async def release(self, name: str, token: str) -> None:
        await self.store.release(name, token)


@pytest.mark.parametrize("raises", [True, False], ids=["renewal fails", "renewal refused"])
async def test_a_holder_that_cannot_renew_stops_before_another_enters(
    processes: Processes, raises: bool
) -> None:
    a = await processes.open()
    b = await processes.open() if processes.shared else a
    assert isinstance(a.locks, LeaseLocks)
    flaky, name = Unrenewable(a.locks, raises), "lost-" + secrets.token_hex(4)
    events: list[str] = []
    entered = asyncio.Event()

    async def first() -> None:
        with pytest.raises(LeaseLost):
            async with flaky.hold(name, 1.0) as got:
                assert got
                flaky.failing = True
                entered.set()
                try:
                    await asyncio.sleep(10)
                finally:
                    events.append("first stopped")

    async def second() -> None:
        await entered.wait()
        async with b.locks.hold(name, 30, wait=20) as got:
            assert got
            events.append("second entered")

    await asyncio.gather(first(), second())
    assert events == ["first stopped", "second entered"]


async def test_a_timeout_inside_a_held_block_is_not_a_lost_lease(processes: Processes) -> None:
    a = await processes.open()
    with pytest.raises(TimeoutError):
        async with a.locks.hold("own-" + secrets.token_hex(4), 30) as got:
            assert got
            async with asyncio.timeout(0.05):
                await asyncio.sleep(5)


# --- login failure counters ---------------------------------------------------------


async def test_failures_lock_the_address_and_the_name(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    limiter = processes.limiter(await processes.open(), scope, clock)
    for n in range(MAX_FAILURES):
        assert not await limiter.is_locked("198.51.100.1", "admin")
        await limiter.record_failure("198.51.100.1", f"name{n}" if n % 2 else "admin")
    assert await limiter.is_locked("198.51.100.1", "someone")
    assert not await limiter.is_locked("198.51.100.2", "someone")
    for n in range(MAX_FAILURES):
        await limiter.record_failure(f"203.0.113.{n}", "carol")
    assert await limiter.is_locked("203.0.113.200", "carol")


async def test_a_success_clears_its_own_pair_only(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    limiter = processes.limiter(await processes.open(), scope, clock)
    for _ in range(MAX_FAILURES - 1):
        await limiter.record_failure("198.51.100.1", "admin")
    await limiter.record_failure("198.51.100.1", "bob")
    await limiter.record_success("198.51.100.1", "bob")
    await limiter.record_failure("198.51.100.1", "bob")
    assert await limiter.is_locked("198.51.100.1", "bob")
    await limiter.record_success("198.51.100.1", "admin")
    assert not await limiter.is_locked("198.51.100.1", "bob")


async def test_failures_expire_a_lockout_after_the_last(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    limiter = processes.limiter(await processes.open(), scope, clock)
    for _ in range(MAX_FAILURES):
        await limiter.record_failure("198.51.100.1", "admin")
        clock.now += LOCKOUT - 1
    assert await limiter.is_locked("198.51.100.1", "admin")
    clock.now += 1
    assert not await limiter.is_locked("198.51.100.1", "admin")
    await limiter.record_failure("198.51.100.1", "admin")
    assert not await limiter.is_locked("198.51.100.1", "admin")


async def test_a_known_address_is_not_kept_out_by_the_name_lock(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    limiter = processes.limiter(await processes.open(), scope, clock)
    await limiter.record_success("192.0.2.10", "admin")
    for n in range(MAX_FAILURES):
        await limiter.record_failure(f"203.0.113.{n}", "admin")
    assert await limiter.is_locked("203.0.113.99", "admin")
    assert not await limiter.is_locked("192.0.2.10", "admin")


async def test_failures_spread_over_processes_add_up(processes: Processes) -> None:
    if not processes.shared:
        pytest.skip("one process keeps its own counters")
    clock, scope = Clock(), secrets.token_hex(4)
    a = processes.limiter(await processes.open(), scope, clock)
    b = processes.limiter(await processes.open(), scope, clock)
    for n in range(MAX_FAILURES):
        await (a if n % 2 else b).record_failure("198.51.100.1", "admin")
    assert await a.is_locked("198.51.100.7", "admin")
    assert await b.is_locked("198.51.100.1", "bob")


async def test_parallel_attempts_past_the_limit_are_refused(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    a = processes.limiter(await processes.open(), scope, clock)
    b = processes.limiter(await processes.open(), scope, clock) if processes.shared else a
    tries = [(a if n % 2 else b).attempt("198.51.100.1", "admin") for n in range(30)]
    let_through = sum(await asyncio.gather(*tries))
    assert let_through <= MAX_FAILURES
    assert await a.is_locked("198.51.100.1", "admin")
    assert not await b.attempt("198.51.100.9", "admin")  # the name is locked too


async def test_an_attempt_refused_as_locked_does_not_extend_the_lock(
    processes: Processes,
) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    limiter = processes.limiter(await processes.open(), scope, clock)
    for _ in range(MAX_FAILURES):
        assert await limiter.attempt("198.51.100.1", "admin")
    clock.now += LOCKOUT - 1
    assert not await limiter.attempt("198.51.100.1", "admin")
    clock.now += 1
    assert await limiter.attempt("198.51.100.1", "admin")


# --- wrong folder passwords ---------------------------------------------------------


async def test_wrong_guesses_lock_their_address_only(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    guesses = processes.guesses(await processes.open(), scope, clock)
    for _ in range(MAX_FAILURES):
        assert not await guesses.is_locked("198.51.100.1")
        await guesses.record_failure("198.51.100.1")
    assert await guesses.is_locked("198.51.100.1")
    assert not await guesses.is_locked("198.51.100.2")


async def test_wrong_guesses_expire_a_lockout_after_the_last(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    guesses = processes.guesses(await processes.open(), scope, clock)
    for _ in range(MAX_FAILURES):
        await guesses.record_failure("198.51.100.1")
        clock.now += LOCKOUT - 1
    assert await guesses.is_locked("198.51.100.1")
    clock.now += 1
    assert not await guesses.is_locked("198.51.100.1")
    await guesses.record_failure("198.51.100.1")
    assert not await guesses.is_locked("198.51.100.1")


async def test_parallel_guesses_past_the_limit_are_refused(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    a = processes.guesses(await processes.open(), scope, clock)
    b = processes.guesses(await processes.open(), scope, clock) if processes.shared else a
    tries = [(a if n % 2 else b).attempt("198.51.100.1", f"g{n}") for n in range(30)]
    let_through = sum(await asyncio.gather(*tries))
    assert let_through <= MAX_FAILURES
    assert await a.is_locked("198.51.100.1")
    assert await b.attempt("198.51.100.9", "other")  # another address guesses on


async def test_a_forgiven_guess_does_not_count(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    guesses = processes.guesses(await processes.open(), scope, clock)
    for n in range(3 * MAX_FAILURES):  # right guesses, each counted then forgiven
        assert await guesses.attempt("198.51.100.1", f"right-{n}")
        await guesses.forgive("198.51.100.1", f"right-{n}")
    for n in range(MAX_FAILURES):
        assert await guesses.attempt("198.51.100.1", f"wrong-{n}")
    assert not await guesses.attempt("198.51.100.1", "one-more")
    assert await guesses.is_locked("198.51.100.1")


async def test_wrong_guesses_count_apart_from_logins(processes: Processes) -> None:
    clock, scope = Clock(), secrets.token_hex(4)
    state = await processes.open()
    guesses = processes.guesses(state, scope, clock)
    logins = processes.limiter(state, scope, clock)
    for _ in range(MAX_FAILURES):
        await guesses.record_failure("198.51.100.1")
    assert not await logins.is_locked("198.51.100.1", "admin")


async def test_wrong_guesses_spread_over_processes_add_up(processes: Processes) -> None:
    if not processes.shared:
        pytest.skip("one process keeps its own counters")
    clock, scope = Clock(), secrets.token_hex(4)
    a = processes.guesses(await processes.open(), scope, clock)
    b = processes.guesses(await processes.open(), scope, clock)
    for n in range(MAX_FAILURES):
        await (a if n % 2 else b).record_failure("198.51.100.1")
    assert await a.is_locked("198.51.100.1")
    assert await b.is_locked("198.51.100.1")
