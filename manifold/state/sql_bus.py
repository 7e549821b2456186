"""The change bus on the database: a ``changes`` table every process polls.

A message is a row (origin, topic, data); each process reads the rows after the
last it has seen every ``POLL_SECONDS``, skips its own, and applies the rest in id
order. Rows are pruned ``KEEP_SECONDS`` after they were written, so a process that
could not poll for nearly that long may have missed some: it then resyncs.

Ids come from the database's counter, and on PostgreSQL or MySQL two writers may
commit out of order (id 8 visible before id 7). A missing id is therefore waited
for ``HOLE_SECONDS`` before the reader moves past it; rows after it are applied
meanwhile (handlers are idempotent, so order between unrelated changes is moot).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncEngine

from manifold.db.state_repo import ChangeRepo, ChangeRow
from manifold.logs import error_text
from manifold.state.bus import Handler, Handlers, Outbox, log

POLL_SECONDS = 0.2
KEEP_SECONDS = 60.0
HOLE_SECONDS = 2.0
PRUNE_EVERY = 10.0
# Rows read per query; a backlog is read in several.
_BATCH = 500


class DatabaseBus:
    def __init__(
        self,
        engine: AsyncEngine,
        origin: str,
        poll: float = POLL_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._repo = ChangeRepo(engine)
        self._clock = clock
        self._origin = origin
        self._poll = poll
        self.handlers = Handlers()
        self._outbox = Outbox(self._send)
        self._floor = 0  # every id up to here was applied (or given up on)
        self._seen: set[int] = set()  # ids above the floor already applied
        self._gap_since: float | None = None  # when the ids after the floor went missing
        self._polled = 0.0  # when a poll last succeeded
        self._pruned = 0.0
        self._reading = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._floor = await self._repo.newest()
        self._polled = self._clock()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await self._outbox.flush()
        await self._outbox.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def live(self) -> bool:
        """Always: a process that polled too late resyncs before it applies more."""
        return True

    async def publish(self, topic: str, data: dict[str, Any]) -> None:
        await self._outbox.flush()  # in order after what was posted
        await self._send([(topic, data)])

    def post(self, topic: str, data: dict[str, Any]) -> None:
        self._outbox.post(topic, data)

    def subscribe(self, topic: str, handler: Handler) -> None:
        self.handlers.subscribe(topic, handler)

    async def sync(self) -> None:
        await self._outbox.flush()
        await self.read()

    async def flush(self) -> None:
        await self._outbox.flush()

    async def _send(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
        now = self._clock()
        await self._repo.add(
            [(now, self._origin, topic, orjson.dumps(data).decode()) for topic, data in batch]
        )

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._poll)
            try:
                await self.read()
                await self._prune()
            except Exception as exc:  # the database may be away for a while
                log.warning("reading changes failed: %s", error_text(exc))

    async def read(self) -> None:
        """Apply the rows written since the last read."""
        async with self._reading:
            late = self._clock() - self._polled > KEEP_SECONDS - 2 * PRUNE_EVERY
            while True:
                rows = await self._repo.after(self._floor, _BATCH)
                fresh = [row for row in rows if row.id not in self._seen]
                for row in fresh:
                    await self._apply(row)
                self._advance(self._clock())
                if len(rows) < _BATCH or not fresh:
                    break
            self._polled = self._clock()
            if late:
                await self.handlers.resync()

    async def _apply(self, row: ChangeRow) -> None:
        self._seen.add(row.id)
        if row.origin == self._origin:
            return
        try:
            data = orjson.loads(row.data)
        except orjson.JSONDecodeError:
            return
        if isinstance(data, dict):
            await self.handlers.deliver(row.topic, data)

    def _advance(self, now: float) -> None:
        """Move the floor over the ids applied, and over a gap waited on long enough
        (a counter may also jump: a sequence's cache, a rolled-back insert)."""
        while self._seen:
            lowest = min(self._seen)
            if lowest == self._floor + 1:
                self._seen.discard(lowest)
                self._floor, self._gap_since = lowest, None
                continue
            if self._gap_since is None:
                self._gap_since = now
            if now - self._gap_since < HOLE_SECONDS:
                return
            self._floor, self._gap_since = lowest - 1, None

    async def _prune(self) -> None:
        now = self._clock()
        if now - self._pruned >= PRUNE_EVERY:
            self._pruned = now
            await self._repo.prune(now - KEEP_SECONDS)
