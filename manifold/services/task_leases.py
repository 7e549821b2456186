"""The background of a task service: progress flushed, leases renewed by heartbeat,
and tasks nobody holds claimed (``LeaseLoop``, mixed into ``TaskService``)."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from manifold.db.task_repo import TaskRepo
from manifold.models import TaskState
from manifold.services.task_context import Live
from manifold.services.task_kinds import POLL_BATCH, Kind, utc_now

log = logging.getLogger("manifold.tasks")


class LeaseLoop:
    """``_tend`` runs while the service does: every ``flush_interval`` it writes the
    progress of what runs here, every ``heartbeat_seconds`` renews its leases, and
    every ``poll_seconds`` queues unheld tasks."""

    _repo: TaskRepo
    _kinds: dict[str, Kind]
    _tasks: dict[str, Live]
    _closing: bool
    owner: str
    flush_interval: float
    lease_seconds: float
    heartbeat_seconds: float
    poll_seconds: float

    async def _cancel_here(self, live: Live) -> None:
        raise NotImplementedError

    def _enqueue(self, spec: Kind, task_id: str) -> None:
        raise NotImplementedError

    def _pump(self, spec: Kind) -> None:
        raise NotImplementedError

    def _limit(self, spec: Kind) -> int:
        raise NotImplementedError

    async def _tend(self) -> None:
        loop = asyncio.get_running_loop()
        beat = poll = loop.time()
        while True:
            await asyncio.sleep(min(self.flush_interval, self.poll_seconds, self.heartbeat_seconds))
            now = loop.time()
            try:
                await self._flush()
                if now >= beat:
                    beat = now + self.heartbeat_seconds
                    await self._beat()
                if now >= poll:
                    poll = now + self.poll_seconds
                    await self._poll()
            except Exception as exc:
                log.warning("could not keep the task table: %s", type(exc).__name__)
            # A larger worker setting takes effect without waiting for a task to end.
            for spec in self._kinds.values():
                self._pump(spec)

    async def _flush(self) -> None:
        for live in [live for live in self._tasks.values() if live.dirty and live.active]:
            async with live.lock:
                live.dirty = False
                await self._repo.save_progress(live.task, self.owner)

    async def _beat(self) -> None:
        """Renew the leases of what runs here; cancel what was cancelled or deleted
        elsewhere, and what another instance took over."""
        running = {
            live.task.id: live
            for live in self._tasks.values()
            if live.active and live.job is not None
        }
        now = utc_now()
        held = await self._repo.renew(running, self.owner, now, self._lease_end(now))
        for task_id, live in running.items():
            if task_id not in held:
                log.warning("task %s was taken from this instance; its run stops", task_id)
                live.lost = True
                assert live.job is not None
                live.job.cancel()
            elif held[task_id] and live.task.state == TaskState.RUNNING:
                await self._cancel_here(live)

    async def _poll(self) -> None:
        """Queue the unheld tasks of kinds that have free workers and nothing queued."""
        if self._closing:
            return
        idle = {kind: spec for kind, spec in self._kinds.items() if not spec.queue}
        free = sum(max(0, self._limit(spec) - spec.running) for spec in idle.values())
        if not free:
            return
        for task_id, kind in await self._repo.claimable(idle, utc_now(), min(free, POLL_BATCH)):
            live = self._tasks.get(task_id)
            if live is None or not live.active:
                self._enqueue(idle[kind], task_id)

    def _lease_end(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.lease_seconds)
