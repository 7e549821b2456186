"""The task table: every task's state, shared by every instance on the database.

An unfinished task is held by at most one instance: ``claim`` is one conditional
update (no owner, or a lease run out), and every write an owner makes while it runs
the task names the owner, so an instance that lost a task (taken over after its
lease ran out, or deleted) writes nothing more into its row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, fields
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import ColumnElement, Row, and_, delete, insert, or_, select, update

from manifold.db import tables as t
from manifold.db.repos import Repo
from manifold.models import DONE_STATES, Task, TaskState

UNDONE = tuple(int(state) for state in TaskState if state not in DONE_STATES)
RUNNING = (int(TaskState.RUNNING), int(TaskState.CANCELING))
QUEUED = (int(TaskState.PENDING), int(TaskState.WAITING_RETRY))
TASK_FIELDS = frozenset(f.name for f in fields(Task))
_c = t.tasks.c


class TaskRepo(Repo):
    # -- reading ----------------------------------------------------------------------

    async def all(self) -> list[Task]:
        return await self._tasks()

    async def get(self, task_id: str) -> Task | None:
        found = await self._tasks(_c.id == task_id)
        return found[0] if found else None

    async def of_kinds(self, kinds: Iterable[str], done: bool | None = None) -> list[Task]:
        """Tasks of ``kinds``, oldest first; only finished ones or only unfinished ones
        when ``done`` says which."""
        where = [_c.kind.in_(list(kinds))]
        if done is not None:
            where.append(_c.state.in_(list(DONE_STATES)) if done else _c.state.in_(UNDONE))
        return await self._tasks(*where)

    async def claimable(
        self, kinds: Iterable[str], now: datetime, limit: int
    ) -> list[tuple[str, str]]:
        """Id and kind of unfinished tasks of ``kinds`` that nobody holds now, oldest first."""
        stmt = (
            select(_c.id, _c.kind)
            .where(_c.kind.in_(list(kinds)), _c.state.in_(UNDONE), _free(now))
            .order_by(_c.created, _c.id)
            .limit(limit)
        )
        return [(str(row.id), str(row.kind)) for row in await self._rows(stmt)]

    async def _tasks(self, *where: ColumnElement[bool]) -> list[Task]:
        stmt = select(t.tasks).where(*where).order_by(_c.created, _c.id)
        return [_task(row) for row in await self._rows(stmt)]

    # -- writing new and unheld tasks ---------------------------------------------------

    async def insert(self, task: Task) -> None:
        await self._write(insert(t.tasks).values(**_values(task)))

    async def insert_many(self, tasks: list[Task]) -> None:
        """Several new tasks in one statement."""
        if tasks:
            await self._write(insert(t.tasks).values([_values(task) for task in tasks]))

    async def delete(self, task_ids: Iterable[str]) -> None:
        ids = list(task_ids)
        if ids:
            await self._write(delete(t.tasks).where(_c.id.in_(ids)))

    async def disown(self, user_id: int, deleted: int) -> None:
        stmt = update(t.tasks).where(_c.creator_id == user_id)
        await self._write(stmt.values(creator_id=deleted))

    async def cancel_unheld(self, task_id: str, error: str, now: datetime) -> bool:
        """End an unfinished task nobody holds as cancelled; whether it was one."""
        stmt = update(t.tasks).where(_c.id == task_id, _c.state.in_(UNDONE), _free(now))
        values = _released(state=int(TaskState.CANCELED), error=error, end_time=now)
        return await self._changed(stmt.values(**values))

    async def flag_cancel(self, task_id: str) -> bool:
        """Ask the instance running the task to cancel it; whether one runs it."""
        stmt = update(t.tasks).where(_c.id == task_id, _c.state.in_(RUNNING), _c.owner.is_not(None))
        return await self._changed(stmt.values(cancel=True, state=int(TaskState.CANCELING)))

    async def requeue(self, task: Task, only_from: Iterable[int]) -> bool:
        """Queue ``task`` again as it is now (a retry), if its row is in one of the
        states ``only_from``; whether it was."""
        stmt = update(t.tasks).where(_c.id == task.id, _c.state.in_(list(only_from)))
        return await self._changed(stmt.values(**_values(task), **_released()))

    # -- an instance's own tasks --------------------------------------------------------

    async def claim(
        self, task_id: str, owner: str, now: datetime, lease_until: datetime
    ) -> tuple[Task, bool] | None:
        """Take the task for ``owner`` if nobody holds it: the task as stored and
        whether a cancel was asked, or None when it is held, finished or gone."""
        stmt = update(t.tasks).where(_c.id == task_id, _c.state.in_(UNDONE), _free(now))
        taken = stmt.values(owner=owner, lease_until=lease_until, heartbeat=now)
        if not await self._changed(taken):
            return None
        rows = await self._rows(select(t.tasks).where(_c.id == task_id, _c.owner == owner))
        return (_task(rows[0]), bool(rows[0].cancel)) if rows else None

    async def save(self, task: Task, owner: str | None = None) -> bool:
        """Write every column of the task; with ``owner``, only while it holds the
        task. A deleted task stays deleted (no row is made). Whether a row was written."""
        return await self._changed(_update(task.id, owner).values(**_values(task)))

    async def save_progress(self, task: Task, owner: str | None = None) -> bool:
        """Write only what a running task changes often, never its state."""
        values = {"status": task.status, "progress": task.progress, "total_bytes": task.total_bytes}
        return await self._changed(_update(task.id, owner).values(**values))

    async def finish(self, task: Task, owner: str) -> bool:
        """Write the task's outcome (an end, or a queue again) and let it go."""
        return await self._changed(_update(task.id, owner).values(**_values(task), **_released()))

    async def renew(
        self, task_ids: Iterable[str], owner: str, now: datetime, lease_until: datetime
    ) -> dict[str, bool]:
        """Extend the lease of the tasks ``owner`` still holds: for each of them,
        whether a cancel was asked. A task missing from the answer was lost."""
        ids = list(task_ids)
        if not ids:
            return {}
        held = and_(_c.id.in_(ids), _c.owner == owner)
        await self._write(
            update(t.tasks).where(held).values(lease_until=lease_until, heartbeat=now)
        )
        rows = await self._rows(select(_c.id, _c.cancel).where(held))
        return {str(row.id): bool(row.cancel) for row in rows}

    async def release(self, owner: str) -> None:
        """Let go of every unfinished task ``owner`` holds, for another to take at once."""
        stmt = update(t.tasks).where(_c.owner == owner, _c.state.in_(UNDONE))
        await self._write(stmt.values(owner=None, lease_until=None))

    async def _changed(self, stmt: Any) -> bool:
        return bool((await self._write(stmt)).rowcount)


def _free(now: datetime) -> ColumnElement[bool]:
    """Held by nobody: no owner, or an owner whose lease has run out."""
    return or_(_c.owner.is_(None), _c.lease_until.is_(None), _c.lease_until < now)


def _update(task_id: str, owner: str | None) -> Any:
    stmt = update(t.tasks).where(_c.id == task_id)
    return stmt.where(_c.owner == owner) if owner is not None else stmt


def _released(**values: Any) -> dict[str, Any]:
    return {**values, "owner": None, "lease_until": None, "cancel": False}


def _values(task: Task) -> dict[str, Any]:
    values = asdict(task)
    values["state"] = int(task.state)
    values["payload"] = orjson.dumps(task.payload).decode()
    return values


def _task(row: Row[Any]) -> Task:
    values = {key: value for key, value in row._mapping.items() if key in TASK_FIELDS}
    values["payload"] = orjson.loads(values["payload"] or "{}")
    for name in ("created", "start_time", "end_time"):
        values[name] = as_utc(values[name])
    return Task(**values)


def as_utc(when: datetime | None) -> datetime | None:
    # SQLite and MySQL hand back naive datetimes; every time we store is UTC.
    if when is None or when.tzinfo is not None:
        return when
    return when.replace(tzinfo=UTC)
