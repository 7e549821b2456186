"""SingleFlight: one run per key, shared; a caller's cancellation stays its own."""

from __future__ import annotations

import asyncio

import pytest

from manifold.concurrency import SingleFlight


async def test_a_cancelled_first_caller_leaves_the_others_their_result() -> None:
    flight: SingleFlight[str] = SingleFlight()
    release = asyncio.Event()
    runs = 0

    async def slow() -> str:
        nonlocal runs
        runs += 1
        await release.wait()
        return "listing"

    first = asyncio.ensure_future(flight.run("k", slow))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(flight.run("k", slow))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    release.set()
    assert await second == "listing"
    assert first.cancelled()
    assert runs == 1


async def test_a_run_whose_callers_all_left_finishes_quietly() -> None:
    flight: SingleFlight[str] = SingleFlight()
    release = asyncio.Event()

    async def failing() -> str:
        await release.wait()
        raise RuntimeError("back end gone")

    caller = asyncio.ensure_future(flight.run("k", failing))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert flight.running() == 0  # and no "exception never retrieved" warning


async def test_every_caller_gets_the_shared_error_and_the_next_call_runs_again() -> None:
    flight: SingleFlight[str] = SingleFlight()
    release = asyncio.Event()
    runs = 0

    async def failing() -> str:
        nonlocal runs
        runs += 1
        await release.wait()
        raise ValueError("nope")

    callers = [asyncio.ensure_future(flight.run("k", failing)) for _ in range(3)]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(r, ValueError) for r in results)
    assert runs == 1

    async def fine() -> str:
        return "ok"

    assert await flight.run("k", fine) == "ok"
