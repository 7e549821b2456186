"""Share links' rows. The access count is taken with one conditional UPDATE, so
concurrent visitors never take more accesses than a share allows."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import orjson
from sqlalchemy import Row, delete, insert, or_, select, update

from manifold.db import tables as t
from manifold.db.repos import Repo, _page
from manifold.models import Share

_DUPLICATE = "the share id is already taken"


def _share(row: Row[Any]) -> Share:
    values = dict(row._mapping)
    values["files"] = orjson.loads(values["files"])
    return Share(**values)


def _values(share: Share) -> dict[str, Any]:
    values = asdict(share)
    values["files"] = orjson.dumps(share.files).decode()
    return values


class ShareRepo(Repo):
    async def get(self, share_id: str) -> Share | None:
        rows = await self._rows(select(t.shares).where(t.shares.c.id == share_id))
        return _share(rows[0]) if rows else None

    async def page(
        self, creator_id: int | None, page: int, per_page: int
    ) -> tuple[list[Share], int]:
        """A page of the shares, all of them or one creator's (``creator_id``)."""
        where = [] if creator_id is None else [t.shares.c.creator_id == creator_id]
        stmt = _page(select(t.shares).where(*where).order_by(t.shares.c.id), page, per_page)
        shares = [_share(r) for r in await self._rows(stmt)]
        return shares, await self._count(t.shares, *where)

    async def create(self, share: Share) -> None:
        await self._write(insert(t.shares).values(**_values(share)), _DUPLICATE)

    async def save(self, share: Share, old_id: str) -> None:
        """Write ``share`` over the row ``old_id`` (its id changes when they differ)."""
        stmt = update(t.shares).where(t.shares.c.id == old_id).values(**_values(share))
        await self._write(stmt, _DUPLICATE)

    async def set_disabled(self, share_id: str, disabled: bool) -> None:
        stmt = update(t.shares).where(t.shares.c.id == share_id).values(disabled=disabled)
        await self._write(stmt)

    async def delete(self, share_id: str) -> None:
        await self._write(delete(t.shares).where(t.shares.c.id == share_id))

    async def take_access(self, share_id: str) -> bool:
        """Count one access, unless the share is gone, disabled or has none left."""
        c = t.shares.c
        stmt = (
            update(t.shares)
            .where(c.id == share_id, c.disabled.is_(False))
            .where(or_(c.max_accessed <= 0, c.accessed < c.max_accessed))
            .values(accessed=c.accessed + 1)
        )
        result = await self._write(stmt)
        return bool(result.rowcount == 1)
