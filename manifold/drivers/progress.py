"""Progress of a call whose length depends on the data: a folder removed entry by
entry, a folder renamed by copying its objects one by one.

Such a call says ``made_progress()`` after each round trip to its back end, and
whoever watches the call (``vfs.layers.TimeoutLayer``, SMB's watchdog) gives it more
time: it fails when its back end stops answering, not because the folder is big. A
call no one watches: ``made_progress`` does nothing. A driver's threads may say it
too (``run_blocking`` runs them in the caller's context); a watcher is told in the
thread that says it, so it must be safe to call from any thread.

A call that is one request whose answer takes as long as its data (a WebDAV server
removing a folder in one DELETE) shows no steps: ``waited`` watches it as under way
until its own ceiling instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from manifold.errors import TemporaryFailure

T = TypeVar("T")

# Seconds between two "still under way" of a call that waits on one long answer, and
# the most such an answer may take.
TICK_SECONDS = 1.0
LONG_CALL_SECONDS = 30 * 60.0

_watchers: ContextVar[tuple[Callable[[], None], ...]] = ContextVar("progress", default=())


@contextmanager
def watching(on_progress: Callable[[], None]) -> Iterator[None]:
    """``on_progress()`` after each step the block's calls make, as well as the
    watchers around it (a layer's deadline and a connection's watchdog both move)."""
    token = _watchers.set((*_watchers.get(), on_progress))
    try:
        yield
    finally:
        _watchers.reset(token)


def made_progress() -> None:
    """One more step of the call under way is done: tell whoever watches it."""
    for on_progress in _watchers.get():
        on_progress()


async def waited(work: Awaitable[T], what: str, ceiling: float = LONG_CALL_SECONDS) -> T:
    """``work`` (one long request) told to the watchers as under way every
    ``TICK_SECONDS``, for ``ceiling`` seconds at most, then given up with a
    ``TemporaryFailure`` that says ``what`` did not finish; cancelled with its caller."""
    task = asyncio.ensure_future(work)
    try:
        async with asyncio.timeout(ceiling) as limit:
            while not (await asyncio.wait({task}, timeout=TICK_SECONDS))[0]:
                made_progress()
    except TimeoutError as exc:
        if not limit.expired():
            raise
        minutes = round(ceiling / 60)
        raise TemporaryFailure(f"{what} did not finish in {minutes} minutes") from exc
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return task.result()
