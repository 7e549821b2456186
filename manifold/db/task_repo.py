"""The task table: every task's last known state, so a restart can show and retry it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Row, delete, insert, select, update

from manifold.db import tables as t
from manifold.db.repos import Repo
from manifold.models import DONE_STATES, Task, TaskState


class TaskRepo(Repo):
    async def all(self) -> list[Task]:
        stmt = select(t.tasks).order_by(t.tasks.c.created, t.tasks.c.id)
        return [_task(row) for row in await self._rows(stmt)]

    async def insert(self, task: Task) -> None:
        await self._write(insert(t.tasks).values(**_values(task)))

    async def insert_many(self, tasks: list[Task]) -> None:
        """Several new tasks in one statement."""
        if tasks:
            await self._write(insert(t.tasks).values([_values(task) for task in tasks]))

    async def save(self, task: Task) -> None:
        """Write every column. A deleted task stays deleted (no row is made)."""
        await self._write(_update(task.id).values(**_values(task)))

    async def save_progress(self, task: Task) -> None:
        """Write only what a running task changes often, never its state."""
        values = {"status": task.status, "progress": task.progress, "total_bytes": task.total_bytes}
        await self._write(_update(task.id).values(**values))

    async def delete(self, task_ids: Iterable[str]) -> None:
        ids = list(task_ids)
        if ids:
            await self._write(delete(t.tasks).where(t.tasks.c.id.in_(ids)))

    async def fail_undone(self, error: str) -> None:
        """Mark every task that was not finished as failed with ``error``."""
        undone = [state for state in TaskState if state not in DONE_STATES]
        stmt = update(t.tasks).where(t.tasks.c.state.in_(undone))
        await self._write(stmt.values(state=TaskState.FAILED, error=error))


def _update(task_id: str) -> Any:
    return update(t.tasks).where(t.tasks.c.id == task_id)


def _values(task: Task) -> dict[str, Any]:
    values = asdict(task)
    values["state"] = int(task.state)
    values["payload"] = orjson.dumps(task.payload).decode()
    return values


def _task(row: Row[Any]) -> Task:
    values = dict(row._mapping)
    values["payload"] = orjson.loads(values["payload"] or "{}")
    for name in ("created", "start_time", "end_time"):
        values[name] = _as_utc(values[name])
    return Task(**values)


def _as_utc(when: datetime | None) -> datetime | None:
    # SQLite and MySQL hand back naive datetimes; every time we store is UTC.
    if when is None or when.tzinfo is not None:
        return when
    return when.replace(tzinfo=UTC)
