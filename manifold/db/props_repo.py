"""WebDAV dead properties as rows of (path, name, value)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import and_, delete, insert, or_, select

from manifold.db import tables as t
from manifold.db.engine import writing
from manifold.db.repos import Repo

Row3 = tuple[str, str, str]
_SLICE = 200


class DavPropRepo(Repo):
    async def all(self) -> list[Row3]:
        stmt = select(t.dav_props.c.path, t.dav_props.c.name, t.dav_props.c.value)
        return [(r.path, r.name, r.value) for r in await self._rows(stmt)]

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
