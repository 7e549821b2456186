"""The change bus: what one process changed, told to every other process.

A process applies its own changes directly, as it always has; ``publish`` tells the
others, and each applies the message through the handlers it ``subscribe``d for the
topic. A message reaches every other process at least once (handlers are idempotent:
they drop or reload what a message names), never the one that sent it.

When a process may have missed messages (its Redis connection dropped, or it polled
the database too late to find rows already pruned) it tells its own handlers
``RESYNC``: each then drops its caches wholesale and reloads from the database.

``post`` is ``publish`` for code that cannot wait (a listing patched in a
synchronous method): the message is queued and sent in order. ``sync`` waits until
what this process posted has been sent, and every message published anywhere
before the call has been applied here (tests; a request that must see the others).

``live`` says whether this process hears every change the others make right now.
A bus that lost its connection (Redis hung or gone) is not live until it is back and
has resynced; meanwhile what the messages keep fresh here (users, revoked tokens) is
confirmed from the database on each use instead of trusted from memory.

``MemoryBus`` is the bus of a single process: nothing to tell, nobody to hear.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from manifold.logs import error_text

log = logging.getLogger("manifold.state")

Handler = Callable[[dict[str, Any]], Awaitable[None]]
RESYNC = "resync"
# The longest wait between two tries of an ``Outbox`` that keeps what it could not send.
RETRY_LONGEST = 5.0


class Bus(Protocol):
    handlers: Handlers

    @property
    def live(self) -> bool:
        """Whether every change another process publishes reaches this one now."""

    async def publish(self, topic: str, data: dict[str, Any]) -> None:
        """Tell every other process; returns once the message is sent (on Redis: or
        kept to be sent when Redis answers again, the bus no longer ``live``)."""

    def post(self, topic: str, data: dict[str, Any]) -> None:
        """``publish`` without waiting: queued, sent in order, soon."""

    def subscribe(self, topic: str, handler: Handler) -> None:
        """Call ``handler`` with the data of every message of ``topic`` from another
        process (and of ``RESYNC`` from this one)."""

    async def sync(self) -> None: ...

    async def flush(self) -> None:
        """Wait until what this process posted has been sent (not yet applied)."""

    async def start(self) -> None:
        """Begin sending and receiving (after the database is migrated)."""

    async def stop(self) -> None: ...


class Handlers:
    """The handlers of each topic, called in turn; one that fails is logged, and the
    others still run (a message is never half-applied for want of a listener)."""

    def __init__(self) -> None:
        self._by_topic: dict[str, list[Handler]] = {}
        # Set once this process has loaded what the messages change (see ``open``).
        self._open = asyncio.Event()

    def open(self) -> None:
        """Begin applying messages; those that came before wait until now."""
        self._open.set()

    def subscribe(self, topic: str, handler: Handler) -> None:
        self._by_topic.setdefault(topic, []).append(handler)

    async def deliver(self, topic: str, data: dict[str, Any]) -> None:
        await self._open.wait()
        for handler in self._by_topic.get(topic, ()):
            try:
                await handler(data)
            except Exception as exc:
                log.warning("applying a %s change failed: %s", topic, error_text(exc))

    async def resync(self) -> None:
        log.warning("changes of other processes may have been missed; reloading")
        await self.deliver(RESYNC, {})


class Outbox:
    """Messages posted and not yet sent, sent in order by one background task through
    ``send`` (a batch at a time).

    With ``retry`` (seconds before the first new try), a batch that could not be sent
    is kept, ahead of what is posted later, and tried again, the wait doubling up to
    ``RETRY_LONGEST``, until it goes out: the change it tells of is made already and
    must reach the others. Meanwhile ``failing`` holds and ``flush`` does not wait.
    Without ``retry`` a failed batch is given up (the others resync later)."""

    def __init__(
        self,
        send: Callable[[list[tuple[str, dict[str, Any]]]], Awaitable[None]],
        retry: float | None = None,
    ):
        self._send = send
        self._retry = retry
        self._queue: list[tuple[str, dict[str, Any]]] = []
        self._task: asyncio.Task[None] | None = None
        self.failing = False
        # Set while nothing posted waits to be tried (or sending fails: nothing to wait for).
        self._settled = asyncio.Event()
        self._settled.set()

    def post(self, topic: str, data: dict[str, Any]) -> None:
        self._queue.append((topic, data))
        if not self.failing:
            self._settled.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())

    async def flush(self) -> None:
        await self._settled.wait()

    async def close(self) -> None:
        """Stop trying; what is still kept is given up (logged)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._queue:
            log.warning("%d changes were never told to other processes", len(self._queue))

    async def _drain(self) -> None:
        wait = self._retry
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                await self._send(batch)
            except Exception as exc:
                if wait is None:  # the change stands here; the others resync later
                    log.warning("telling other processes failed: %s", error_text(exc))
                    continue
                self._queue[:0] = batch
                self._failed(exc)
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_LONGEST)
        if self.failing:
            log.warning("changes are told to other processes again")
        self.failing = False
        self._settled.set()

    def _failed(self, exc: Exception) -> None:
        if not self.failing:
            log.warning("telling other processes failed, kept to try again: %s", error_text(exc))
        self.failing = True
        self._settled.set()


class MemoryBus:
    """One process: messages go nowhere; only a local ``RESYNC`` reaches handlers."""

    def __init__(self) -> None:
        self.handlers = Handlers()

    @property
    def live(self) -> bool:
        return True

    async def publish(self, topic: str, data: dict[str, Any]) -> None:
        return None

    def post(self, topic: str, data: dict[str, Any]) -> None:
        return None

    def subscribe(self, topic: str, handler: Handler) -> None:
        self.handlers.subscribe(topic, handler)

    async def sync(self) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None
