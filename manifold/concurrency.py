"""Small concurrency helpers shared by every layer (no Manifold imports).

``SingleFlight`` lets identical concurrent calls share one run. The run belongs to
the flight, not to whichever caller started it: a caller that is cancelled (a client
hanging up) stops waiting, but the others still get the result. Without that, the
first caller's cancellation would reach every waiter as a ``CancelledError`` of its
own, which no error handler catches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """One run per key at a time; callers arriving meanwhile share its outcome."""

    def __init__(self) -> None:
        self._running: dict[str, asyncio.Future[T]] = {}

    async def run(self, key: str, call: Callable[[], Awaitable[T]]) -> T:
        task = self._running.get(key)
        if task is None:
            task = asyncio.ensure_future(call())
            self._running[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(task)

    def _finished(self, key: str, task: asyncio.Future[T]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
        if not task.cancelled():
            task.exception()  # retrieved: every caller may have gone already

    def running(self) -> int:
        """How many runs are under way (for tests and diagnostics)."""
        return len(self._running)
