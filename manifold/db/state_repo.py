"""The SQL of the shared state on a database (``manifold.state``): the change bus's
rows, run-once leases and login failure counters. Times are seconds since the epoch,
given by the caller, so that every process compares the same clock's readings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from manifold.db import tables as t
from manifold.db.engine import writing
from manifold.db.repos import DuplicateError, Repo


@dataclass(frozen=True, slots=True)
class ChangeRow:
    id: int
    origin: str
    topic: str
    data: str


class ChangeRepo(Repo):
    async def add(self, rows: Sequence[tuple[float, str, str, str]]) -> None:
        """Insert (created, origin, topic, data) rows in one statement."""
        values = [{"created": c, "origin": o, "topic": tp, "data": d} for c, o, tp, d in rows]
        async with writing(self.engine) as conn:
            await conn.execute(insert(t.changes), values)

    async def after(self, floor: int, limit: int) -> list[ChangeRow]:
        stmt = select(t.changes.c.id, t.changes.c.origin, t.changes.c.topic, t.changes.c.data)
        stmt = stmt.where(t.changes.c.id > floor).order_by(t.changes.c.id).limit(limit)
        return [
            ChangeRow(int(r.id), str(r.origin), str(r.topic), str(r.data))
            for r in await self._rows(stmt)
        ]

    async def newest(self) -> int:
        async with self.engine.connect() as conn:
            found = (await conn.execute(select(func.max(t.changes.c.id)))).scalar_one()
            return int(found or 0)

    async def prune(self, before: float) -> None:
        """Drop the rows written before ``before``, except the newest row: SQLite (and
        MySQL after a restart) would hand out the ids of an emptied table again, below
        the last id every reader has seen, and readers would skip those rows."""
        newest = await self.newest()
        c = t.changes.c
        await self._write(delete(t.changes).where(c.created < before, c.id < newest))


class LeaseRepo(Repo):
    async def take(self, name: str, owner: str, now: float, ttl: float) -> bool:
        """Hold ``name`` until ``now + ttl`` unless someone else holds it past ``now``."""
        lease = t.leases.c
        stmt = (
            update(t.leases)
            .where(lease.name == name, lease.expires <= now)
            .values(owner=owner, expires=now + ttl)
        )
        async with writing(self.engine) as conn:
            if (await conn.execute(stmt)).rowcount == 1:
                return True
        try:
            async with writing(self.engine) as conn:
                await conn.execute(
                    insert(t.leases).values(name=name, owner=owner, expires=now + ttl)
                )
        except IntegrityError:
            return False  # held by another
        return True

    async def extend(self, name: str, owner: str, until: float) -> bool:
        lease = t.leases.c
        stmt = update(t.leases).where(lease.name == name, lease.owner == owner)
        async with writing(self.engine) as conn:
            return bool((await conn.execute(stmt.values(expires=until))).rowcount == 1)

    async def release(self, name: str, owner: str) -> None:
        lease = t.leases.c
        await self._write(delete(t.leases).where(lease.name == name, lease.owner == owner))


class FailureRepo(Repo):
    """Counters grouped in buckets (an address's failures, split by name), one row a
    pair; and, with the same rows, times (the addresses a name logged in from)."""

    async def bucket(self, bucket: str) -> list[tuple[str, int, float]]:
        """(other, count, last) of every row in ``bucket``."""
        c = t.login_failures.c
        stmt = select(c.other, c.count, c.last).where(c.bucket == bucket)
        found = []
        for row in await self._rows(stmt):
            other, count, last = tuple(row)
            found.append((str(other), int(count), float(last)))
        return found

    async def last_of(self, pair: str) -> float | None:
        c = t.login_failures.c
        rows = await self._rows(select(c.last).where(c.pair == pair))
        return float(rows[0][0]) if rows else None

    async def add(self, bucket: str, pair: str, other: str, now: float, reset: bool) -> None:
        """Count one more for ``pair``; ``reset`` first empties its bucket (expired)."""
        c = t.login_failures.c
        if reset:
            await self._write(delete(t.login_failures).where(c.bucket == bucket))
        bump = update(t.login_failures).where(c.pair == pair)
        for _ in range(3):  # another process may insert the row between the two
            async with writing(self.engine) as conn:
                if (await conn.execute(bump.values(count=c.count + 1, last=now))).rowcount:
                    return
            try:
                row = {"pair": pair, "bucket": bucket, "other": other, "count": 1, "last": now}
                await self._write(insert(t.login_failures).values(**row))
                return
            except DuplicateError:
                continue

    async def stamp(self, bucket: str, pair: str, other: str, now: float, keep: int) -> None:
        """Set ``pair``'s time to ``now``, keeping the ``keep`` newest of its bucket."""
        c = t.login_failures.c
        await self._write(delete(t.login_failures).where(c.pair == pair))
        row = {"pair": pair, "bucket": bucket, "other": other, "count": 0, "last": now}
        try:
            await self._write(insert(t.login_failures).values(**row))
        except DuplicateError:
            return  # stamped by another process at the same moment
        stale = select(c.pair).where(c.bucket == bucket).order_by(c.last.desc()).offset(keep)
        old = [str(p) for (p,) in await self._rows(stale)]
        if old:
            await self._write(delete(t.login_failures).where(c.pair.in_(old)))

    async def remove(self, pair: str) -> None:
        c = t.login_failures.c
        await self._write(delete(t.login_failures).where(c.pair == pair))

    async def purge(self, counted_before: float, stamped_before: float) -> None:
        """Drop counters older than ``counted_before`` and times older than the other."""
        c = t.login_failures.c
        old_count = (c.count > 0) & (c.last < counted_before)
        old_stamp = (c.count == 0) & (c.last < stamped_before)
        await self._write(delete(t.login_failures).where(old_count | old_stamp))
