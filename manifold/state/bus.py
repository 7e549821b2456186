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

``MemoryBus`` is the bus of a single process: nothing to tell, nobody to hear.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from manifold.logs import error_text

log = logging.getLogger("manifold.state")

Handler = Callable[[dict[str, Any]], Awaitable[None]]
RESYNC = "resync"


class Bus(Protocol):
    handlers: Handlers

    async def publish(self, topic: str, data: dict[str, Any]) -> None:
        """Tell every other process; returns once the message is sent."""

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
    ``send`` (a batch at a time)."""

    def __init__(self, send: Callable[[list[tuple[str, dict[str, Any]]]], Awaitable[None]]):
        self._send = send
        self._queue: list[tuple[str, dict[str, Any]]] = []
        self._task: asyncio.Task[None] | None = None

    def post(self, topic: str, data: dict[str, Any]) -> None:
        self._queue.append((topic, data))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())

    async def flush(self) -> None:
        while self._task is not None and not self._task.done():
            await asyncio.gather(self._task, return_exceptions=True)

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                await self._send(batch)
            except Exception as exc:  # the change stands here; the others resync later
                log.warning("telling other processes failed: %s", error_text(exc))


class MemoryBus:
    """One process: messages go nowhere; only a local ``RESYNC`` reaches handlers."""

    def __init__(self) -> None:
        self.handlers = Handlers()

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
