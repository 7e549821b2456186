"""Many requests of one driver call at once: the objects of a folder copied, moved or
removed one by one (object stores have no folders to do it in one step), checks run
side by side, and clean-ups that must finish even when their caller is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from contextlib import suppress
from typing import Any, TypeVar

from manifold.drivers.progress import made_progress

T = TypeVar("T")

# Clean-ups that outlive a cancelled caller, kept referenced until they end.
_BACKGROUND: set[asyncio.Future[Any]] = set()


async def each(items: Iterable[T], work: Callable[[T], Awaitable[None]], concurrency: int) -> None:
    """``work`` on every item, ``concurrency`` at a time, saying ``made_progress``
    after each.

    The first failure (or the caller's cancellation) stops new work, and the requests
    under way are let finish before it is raised: a request cancelled on this side may
    still be carried out by the back end, after a clean-up that was meant to undo it.
    """
    queue = iter(items)
    failures: list[BaseException] = []

    async def worker() -> None:
        for item in queue:
            if failures:
                return
            try:
                await work(item)
            except Exception as exc:
                failures.append(exc)
            made_progress()

    workers = asyncio.gather(*(worker() for _ in range(concurrency)))
    try:
        await asyncio.shield(workers)
    except asyncio.CancelledError:
        failures.append(asyncio.CancelledError())
        with suppress(BaseException):
            await workers
        raise
    if failures:
        raise failures[0]


async def together(*calls: Awaitable[None]) -> None:
    """Run independent checks at once; the first failure is raised after all ended."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


def background(work: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
    """``work`` as a task that runs to its end even if its starter is cancelled."""
    task = asyncio.ensure_future(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    return task


async def shielded(call: Coroutine[Any, Any, None]) -> None:
    """Finish a clean-up even when the caller is being cancelled; its own failure is
    dropped (the error that caused it is what the caller sees)."""
    task = background(call)
    with suppress(Exception, asyncio.CancelledError):
        await asyncio.shield(task)
