"""The resumable multipart uploads of the API and their chunks, shared by every
instance on the database (see ``services.fs.multipart``).

A chunk is a row of its own, inserted when it starts to arrive and marked done once
whole: two instances receiving chunks of one session at once each add theirs, and a
chunk sent twice is recorded once (the second insert finds the key taken: the chunk
is there already, or is being received elsewhere). A session changes state by one conditional
update, so only one request completes it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import ColumnElement, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from manifold.db import tables as t
from manifold.db.engine import transact
from manifold.db.repos import DuplicateError, Repo
from manifold.db.task_repo import as_utc

_u = t.multipart_uploads.c
_k = t.multipart_chunks.c


@dataclass(frozen=True, slots=True)
class UploadSession:
    """One multipart upload: who sends what to where, in chunks of ``chunk_size``."""

    id: str
    user_id: int
    path: str
    size: int
    chunk_size: int
    hashes: dict[str, str] = field(default_factory=dict)
    password: str = ""
    overwrite: bool = True
    modified: datetime | None = None
    state: str = "receiving"
    staging: str = ""
    created: datetime | None = None
    last_active: datetime | None = None
    store: str = "staging"


class MultipartRepo(Repo):
    async def add(self, session: UploadSession) -> None:
        await self._write(insert(t.multipart_uploads).values(**_values(session)))

    async def get(self, upload_id: str) -> UploadSession | None:
        found = await self._sessions(_u.id == upload_id)
        return found[0] if found else None

    async def of_user(self, user_id: int) -> list[UploadSession]:
        return await self._sessions(_u.user_id == user_id)

    async def idle_since(self, cutoff: datetime) -> list[UploadSession]:
        return await self._sessions(_u.last_active < cutoff)

    async def ids(self) -> set[str]:
        return {str(row[0]) for row in await self._rows(select(_u.id))}

    async def touch(self, upload_id: str, now: datetime) -> None:
        stmt = update(t.multipart_uploads).where(_u.id == upload_id)
        await self._write(stmt.values(last_active=now))

    async def move(self, upload_id: str, before: str, after: str, now: datetime) -> bool:
        """Set the state from ``before`` to ``after``; whether this call did it."""
        stmt = update(t.multipart_uploads).where(_u.id == upload_id, _u.state == before)
        result = await self._write(stmt.values(state=after, last_active=now))
        return bool(result.rowcount)

    async def remove(self, upload_id: str) -> None:
        await self._write(delete(t.multipart_chunks).where(_k.upload_id == upload_id))
        await self._write(delete(t.multipart_uploads).where(_u.id == upload_id))

    async def reserve(
        self,
        upload_id: str,
        index: int,
        size: int,
        now: datetime,
        stale: datetime,
        budget: int | None = None,
    ) -> str:
        """Take chunk ``index`` to receive it, in one transaction: ``"taken"``;
        ``"done"`` when it was received already; ``"busy"`` while another request
        receives it (one that started before ``stale`` is taken over: its instance
        stopped mid-way); ``"gone"`` when the session is not receiving chunks (removed,
        being completed); ``"full"``, with nothing taken, when the staged bytes would
        then pass ``budget``."""

        def work(conn: Connection) -> str:
            taken = _take(conn, upload_id, index, size, now, stale)
            if taken == "taken" and budget is not None and _staged(conn) > budget:
                raise _Full()  # rolls the reservation back
            return taken

        for attempt in (1, 2):
            try:
                return await transact(self.engine, work)
            except _Full:
                return "full"
            except IntegrityError as exc:  # another request took the chunk at the same time
                if attempt == 2:
                    raise DuplicateError("chunk taken") from exc
        raise AssertionError("unreachable")

    async def finish(self, upload_id: str, index: int, size: int, now: datetime) -> dict[int, int]:
        """Chunk ``index`` is all there (recorded again if a request that had given it
        up released it meanwhile), the session active now; the chunks received."""

        def work(conn: Connection) -> dict[int, int] | None:
            this = (_k.upload_id == upload_id, _k.idx == index)
            marked = conn.execute(update(t.multipart_chunks).where(*this).values(done=True))
            active = update(t.multipart_uploads).where(_u.id == upload_id)
            conn.execute(active.values(last_active=now))
            return _received(conn, upload_id) if marked.rowcount else None

        received = await transact(self.engine, work)
        if received is not None:
            return received
        row = {"upload_id": upload_id, "idx": index, "size": size, "started": now}
        with contextlib.suppress(DuplicateError):
            await self._write(insert(t.multipart_chunks).values(**row, done=True))
        return await self.chunks(upload_id)

    async def release(self, upload_id: str, index: int) -> None:
        """Chunk ``index`` did not arrive whole: it may be sent again at once."""
        this = (_k.upload_id == upload_id, _k.idx == index, _k.done.is_(False))
        await self._write(delete(t.multipart_chunks).where(*this))

    async def drop_chunks(self, upload_id: str, indexes: Iterable[int]) -> None:
        wanted = list(indexes)
        if wanted:
            stmt = delete(t.multipart_chunks).where(_k.upload_id == upload_id, _k.idx.in_(wanted))
            await self._write(stmt)

    async def chunks(self, upload_id: str) -> dict[int, int]:
        """The chunks received: their sizes by index."""
        async with self.engine.connect() as conn:
            return await conn.run_sync(_received, upload_id)

    async def drop_orphans(self) -> None:
        """Chunks recorded for a session removed meanwhile (an abort racing a chunk)."""
        await self._write(delete(t.multipart_chunks).where(_k.upload_id.not_in(select(_u.id))))

    async def _sessions(self, *where: ColumnElement[bool]) -> list[UploadSession]:
        stmt = select(t.multipart_uploads).where(*where).order_by(_u.created, _u.id)
        return [_session(row._mapping) for row in await self._rows(stmt)]


class _Full(Exception):
    """The staging budget would be passed: the reservation is rolled back."""


def _take(
    conn: Connection, upload_id: str, index: int, size: int, now: datetime, stale: datetime
) -> str:
    """``reserve``'s decision, in its transaction."""
    state = conn.execute(select(_u.state).where(_u.id == upload_id)).scalar()
    if state != "receiving":
        return "gone"
    this = (_k.upload_id == upload_id, _k.idx == index)
    found = conn.execute(select(_k.done, _k.started).where(*this)).first()
    if found is None:
        row = {"upload_id": upload_id, "idx": index, "size": size, "started": now}
        conn.execute(insert(t.multipart_chunks).values(**row, done=False))
        return "taken"
    if found.done:
        return "done"
    stmt = update(t.multipart_chunks).where(*this, _k.done.is_(False), _k.started < stale)
    return "taken" if conn.execute(stmt.values(started=now)).rowcount else "busy"


def _received(conn: Connection, upload_id: str) -> dict[int, int]:
    stmt = select(_k.idx, _k.size).where(_k.upload_id == upload_id, _k.done.is_(True))
    return {int(row.idx): int(row.size) for row in conn.execute(stmt)}


def _staged(conn: Connection) -> int:
    """The bytes of every chunk received or being received and not yet completed, of
    every staged session (one in its storage's own multipart upload stages nothing here)."""
    live = _k.upload_id.in_(select(_u.id).where(_u.store == "staging"))
    stmt = select(func.coalesce(func.sum(_k.size), 0)).where(live)
    return int(conn.execute(stmt).scalar_one())


def _values(session: UploadSession) -> dict[str, object]:
    return {
        "id": session.id,
        "user_id": session.user_id,
        "path": session.path,
        "size": session.size,
        "chunk_size": session.chunk_size,
        "hashes": json.dumps(session.hashes, sort_keys=True),
        "password": session.password,
        "overwrite": session.overwrite,
        "modified": session.modified,
        "state": session.state,
        "staging": session.staging,
        "created": session.created,
        "last_active": session.last_active,
        "store": session.store,
    }


def _session(row: object) -> UploadSession:
    values = dict(row)  # type: ignore[call-overload]
    values["hashes"] = {str(k): str(v) for k, v in json.loads(values["hashes"]).items()}
    values["overwrite"] = bool(values["overwrite"])
    for key in ("modified", "created", "last_active"):
        values[key] = as_utc(values[key])
    return UploadSession(**values)
