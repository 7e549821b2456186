"""WebDAV dead properties as rows of (path, name, value)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import and_, delete, func, insert, or_, select

from manifold.db import tables as t
from manifold.db.engine import writing
from manifold.db.repos import Repo

Row3 = tuple[str, str, str]
_SLICE = 200


class DavPropRepo(Repo):
    async def at(self, path: str) -> list[Row3]:
        """The rows of ``path`` itself."""
        stmt = select(t.dav_props.c.path, t.dav_props.c.name, t.dav_props.c.value).where(
            t.dav_props.c.path == path
        )
        return [(r.path, r.name, r.value) for r in await self._rows(stmt) if r.path == path]

    async def below(self, path: str) -> list[Row3]:
        """The rows of ``path`` and of every path below it."""
        c = t.dav_props.c
        stmt = select(c.path, c.name, c.value)
        prefix = path.rstrip("/") + "/"
        if prefix != "/":
            # A prefix test every database answers alike (no LIKE wildcards to escape).
            stmt = stmt.where(or_(c.path == path, func.substr(c.path, 1, len(prefix)) == prefix))
        # Checked again here: a database may compare text without regard to case.
        rows = await self._rows(stmt)
        return [
            (r.path, r.name, r.value) for r in rows if r.path == path or r.path.startswith(prefix)
        ]

    async def named(self, name: str, paths: Sequence[str]) -> list[Row3]:
        """The rows called ``name`` of any of ``paths``."""
        c = t.dav_props.c
        found: list[Row3] = []
        for start in range(0, len(paths), _SLICE):
            wanted = set(paths[start : start + _SLICE])
            stmt = select(c.path, c.name, c.value).where(c.name == name, c.path.in_(wanted))
            rows = await self._rows(stmt)
            found += [
                (r.path, r.name, r.value) for r in rows if r.path in wanted and r.name == name
            ]
        return found

    async def replace(self, removed: Iterable[tuple[str, str]], added: Iterable[Row3]) -> None:
        """Delete the (path, name) rows ``removed`` and insert ``added``, in one transaction."""
        gone = [and_(t.dav_props.c.path == p, t.dav_props.c.name == n) for p, n in removed]
        rows = [{"path": p, "name": n, "value": v} for p, n, v in added]
        async with writing(self.engine) as conn:
            # In slices: SQLite caps the depth of one expression.
            for start in range(0, len(gone), _SLICE):
                await conn.execute(delete(t.dav_props).where(or_(*gone[start : start + _SLICE])))
            if rows:
                await conn.execute(insert(t.dav_props), rows)
