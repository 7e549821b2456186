"""What a task's runner sees of its task (``TaskContext``), and what the service keeps
of a task it runs (``Live``)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from manifold.models import Task, User


def clean_percent(percent: float) -> float:
    """A progress value for the API: NaN (an unknown total) shows as done, as in AList."""
    if math.isnan(percent):
        return 100.0
    return min(100.0, max(0.0, percent))


class RunHost(Protocol):
    """What a ``TaskContext`` asks of the service running its task."""

    @property
    def stopping(self) -> bool: ...

    def max_retry(self, kind: str) -> int: ...

    async def persist(self, live: Live) -> None: ...

    async def submit(
        self,
        kind: str,
        name: str,
        creator: User | None,
        payload: dict[str, Any],
        total_bytes: int = 0,
    ) -> Task: ...


@dataclass(slots=True, eq=False)
class Live:
    """A task with what only this process knows: its creator, its run, its lock.

    ``active``: this process holds the row and runs (or is about to run) the task;
    ``lost``: the row was taken from it (deleted, or claimed after its lease ran out).
    """

    task: Task
    creator: User | None = None
    job: asyncio.Task[Any] | None = None
    active: bool = False
    lost: bool = False
    done_bytes: int = 0
    dirty: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TaskContext:
    """What a runner sees of its task."""

    def __init__(self, service: RunHost, live: Live) -> None:
        self._service = service
        self._live = live
        self.task_id = live.task.id
        self.creator = live.creator

    def set_status(self, status: str) -> None:
        self._live.task.status = status
        self._live.dirty = True

    def set_progress(self, percent: float) -> None:
        self._live.task.progress = clean_percent(percent)
        self._live.dirty = True

    def set_total(self, total_bytes: int) -> None:
        self._live.task.total_bytes = max(0, total_bytes)
        if self._live.done_bytes:
            self._progress_from_bytes()
        self._live.dirty = True

    def add_done(self, nbytes: int) -> None:
        """Count ``nbytes`` more done (fewer, when negative: bytes taken back)."""
        self._live.done_bytes = max(0, self._live.done_bytes + nbytes)
        self._progress_from_bytes()

    @property
    def done_bytes(self) -> int:
        """The bytes counted done in this run so far."""
        return self._live.done_bytes

    def _progress_from_bytes(self) -> None:
        total = self._live.task.total_bytes
        if total > 0:
            self.set_progress(self._live.done_bytes * 100 / total)

    @property
    def last_attempt(self) -> bool:
        """Whether a failure now ends the task (no retry is left)."""
        task = self._live.task
        return task.retry >= self._service.max_retry(task.kind)

    @property
    def shutting_down(self) -> bool:
        """Whether a cancel now stops this run only, the task going on: the server
        stopping (it resumes after a restart) or another instance having taken it over
        (its lease ran out here), not someone cancelling the task. What the run leaves
        for its task (a tool's download, its folder) must then stay."""
        return self._service.stopping or self._live.lost

    async def save_payload(self, **values: Any) -> None:
        """Remember ``values`` in the task's payload, stored at once: what a retry,
        after a restart too, needs to pick up where this run was (a tool's id)."""
        self._live.task.payload.update(values)
        await self._service.persist(self._live)

    async def spawn(
        self, kind: str, name: str, payload: dict[str, Any], total_bytes: int = 0
    ) -> Task:
        """A new task with this task's creator."""
        return await self._service.submit(kind, name, self.creator, payload, total_bytes)


TaskRunner = Callable[[TaskContext, dict[str, Any]], Awaitable[None]]
# Whether the user may still do what the payload does: the checks a direct request
# passes, raising the same ``ManifoldError`` it would answer.
Recheck = Callable[[User, dict[str, Any]], Awaitable[None]]
