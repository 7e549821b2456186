"""Counts read straight from the database for ``/metrics`` (every instance sees the same)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from manifold.db import tables


async def task_counts(engine: AsyncEngine) -> list[tuple[str, int, int]]:
    """(kind, state, how many) for every kind and state that has tasks."""
    t = tables.tasks
    query = select(t.c.kind, t.c.state, func.count()).group_by(t.c.kind, t.c.state)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [(str(kind), int(state), int(count)) for kind, state, count in rows]
