"""The rows the protocol servers share between instances: WebDAV locks and S3
multipart uploads. Times are seconds since the epoch, given by the caller."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import delete, insert, select, update

from manifold.db import tables as t
from manifold.db.engine import writing
from manifold.db.repos import Repo


@dataclass(frozen=True, slots=True)
class LockRow:
    token: str
    path: str
    infinite: bool
    exclusive: bool
    owner: str
    timeout: int
    expires: float
    holder: int


class DavLockRepo(Repo):
    async def live(self, now: float) -> list[LockRow]:
        """Every lock that has not expired by ``now``."""
        c = t.dav_locks.c
        stmt = select(t.dav_locks).where(c.expires > now)
        return [LockRow(**r._mapping) for r in await self._rows(stmt)]

    async def add(self, row: LockRow, now: float) -> None:
        """Insert ``row``, dropping the locks expired by ``now`` on the way."""
        async with writing(self.engine) as conn:
            await conn.execute(delete(t.dav_locks).where(t.dav_locks.c.expires <= now))
            await conn.execute(insert(t.dav_locks).values(**asdict(row)))

    async def renew(self, token: str, seconds: int, now: float) -> bool:
        """Give a live lock ``seconds`` more from ``now`` (its new timeout); False if
        it is gone."""
        c = t.dav_locks.c
        stmt = update(t.dav_locks).where(c.token == token, c.expires > now)
        async with writing(self.engine) as conn:
            done = await conn.execute(stmt.values(timeout=seconds, expires=now + seconds))
            return bool(done.rowcount == 1)

    async def remove(self, token: str) -> bool:
        done = await self._write(delete(t.dav_locks).where(t.dav_locks.c.token == token))
        return bool(done.rowcount == 1)


@dataclass(frozen=True, slots=True)
class UploadRow:
    upload_id: str
    bucket: str
    key: str
    initiated: float
    holder: str


class S3UploadRepo(Repo):
    async def add(self, row: UploadRow) -> None:
        await self._write(insert(t.s3_uploads).values(**asdict(row)))

    async def get(self, upload_id: str) -> UploadRow | None:
        c = t.s3_uploads.c
        rows = await self._rows(select(t.s3_uploads).where(c.upload_id == upload_id))
        return _upload(rows[0]) if rows else None

    async def of_bucket(self, bucket: str) -> list[UploadRow]:
        c = t.s3_uploads.c
        stmt = select(t.s3_uploads).where(c.bucket == bucket).order_by(c.initiated)
        return [_upload(r) for r in await self._rows(stmt) if r.bucket == bucket]

    async def remove(self, upload_id: str) -> None:
        await self._write(delete(t.s3_uploads).where(t.s3_uploads.c.upload_id == upload_id))

    async def of_holder(self, holder: str) -> list[UploadRow]:
        """The uploads whose parts ``holder`` keeps."""
        c = t.s3_uploads.c
        stmt = select(t.s3_uploads).where(c.holder == holder)
        return [_upload(r) for r in await self._rows(stmt) if r.holder == holder]


def _upload(row: Any) -> UploadRow:
    return UploadRow(**row._mapping)
