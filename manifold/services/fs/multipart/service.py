"""Resumable multipart uploads: sessions in the database, chunks in a ``PartStore``.

``init`` checks the destination as an upload to it is checked (``upload_target``: the
permission, password, hide, base path and reserved-name rules of ``/api/fs/put``)
and opens a session, or resumes the open one of the same user, path, size and
hashes. Chunks arrive in any order, on any instance; each is checked against the
length its index calls for and recorded once. ``complete`` hands the staged file
(the chunks written at their offsets) as ONE upload to the same writer path as
``/api/fs/put`` (so every check is made again, for the user as they are then), with
the hashes the page sent verified before anything appears under the name; only the
byte transport differs: a Local storage on the staging folder's file system links
the file into place instead of copying it. Whatever the outcome, the session
and its parts go, except when the destination failed in a way worth retrying.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from manifold.db.multipart_repo import MultipartRepo, UploadSession
from manifold.drivers.base import FileSource, NativeParts
from manifold.errors import (
    BadRequest,
    ChunkInFlight,
    Forbidden,
    ManifoldError,
    NotFound,
    ServerError,
    UploadBusy,
)
from manifold.paths import clean_path
from manifold.services.auth.service import Caller
from manifold.services.fs.multipart.limits import Limits
from manifold.services.fs.multipart.native import NATIVE, STAGING, NativeStore
from manifold.services.fs.multipart.snapshot import (
    COMPLETED,
    COMPLETING,
    RECEIVING,
    Snapshot,
    chunk_length,
    failed,
    snapshot,
    total_chunks,
)
from manifold.services.fs.multipart.store import PartStore
from manifold.services.fs.tree import Place
from manifold.services.fs.uploads import check_file
from manifold.services.fs.write import GuardedWriter

NOT_FOUND = "multipart upload session not found"
log = logging.getLogger("manifold.multipart")
# A chunk being received for this long without arriving is taken for one whose request
# (or instance) died: the same chunk sent again is received instead of answered 409.
STALE_CHUNK = timedelta(minutes=2)
# Sessions receiving chunks kept in memory by each process (the oldest forgotten first).
_KNOWN = 256
# At most this much of a chunk is held in memory while its reservation is being made.
_EARLY_BYTES = 2 << 20
_NOT_YOURS = "multipart upload session belongs to another user"


@dataclass(frozen=True, slots=True)
class InitRequest:
    """What the page declares at ``init``."""

    path: str
    size: int
    chunk_size: int = 0
    password: str = ""
    overwrite: bool = True
    modified: datetime | None = None
    hashes: Mapping[str, str] | None = None


class MultipartUploads:
    def __init__(
        self,
        repo: MultipartRepo,
        store: PartStore,
        writer: GuardedWriter,
        limits: Limits,
        native: NativeStore | None = None,
    ) -> None:
        self._repo = repo
        self._store = store
        self._native = native
        self._writer = writer
        self.limits = limits
        self._known_sessions: dict[str, UploadSession] = {}  # see _known

    # --- init ---------------------------------------------------------------------

    async def init(self, caller: Caller, request: InitRequest) -> tuple[Snapshot, bool]:
        """The session's snapshot, and whether an open one was resumed."""
        self.limits.require_enabled()
        if request.size <= 0:
            raise BadRequest(
                "multipart upload requires a positive X-File-Size; upload empty files via /fs/put"
            )
        hashes = _hashes(request.hashes)
        place, _ = await self._writer.upload_target(
            caller, request.path, request.password, request.overwrite
        )
        path = clean_path(request.path)
        resumed = await self._resumable(caller, path, request.size, hashes)
        if resumed is not None:
            return await self._snapshot(resumed), True
        return await self._open(caller, place, path, request, hashes), False

    async def _resumable(
        self, caller: Caller, path: str, size: int, hashes: dict[str, str]
    ) -> UploadSession | None:
        """The open session of the same file, if any; another of the same path and
        size whose hashes do not prove the same file is superseded (removed)."""
        for session in await self._repo.of_user(caller.user.id):
            if session.path != path or session.size != size or session.state != RECEIVING:
                continue
            if hashes and session.hashes == hashes:
                await self._repo.touch(session.id, _now())
                return session
            await self._drop(session)
        return None

    async def _open(
        self,
        caller: Caller,
        place: Place,
        path: str,
        request: InitRequest,
        hashes: dict[str, str],
    ) -> Snapshot:
        if len(await self._repo.of_user(caller.user.id)) >= self.limits.max_sessions():
            raise Forbidden(
                f"too many open multipart uploads ({self.limits.max_sessions()}); "
                "complete or abort one first"
            )
        chunk_size = self.limits.chunk_size(request.chunk_size)
        upload_id = secrets.token_hex(16)
        native = await self._begin(place, request.size, chunk_size, bool(hashes))
        if native is None and request.size > self.limits.staging_budget():
            raise Forbidden("the file is larger than the multipart staging budget")
        now = _now()
        session = UploadSession(
            id=upload_id,
            user_id=caller.user.id,
            path=path,
            size=request.size,
            chunk_size=chunk_size,
            hashes=hashes,
            password=request.password,
            overwrite=request.overwrite,
            modified=request.modified,
            staging=native or upload_id,
            created=now,
            last_active=now,
            store=STAGING if native is None else NATIVE,
        )
        try:
            await self._repo.add(session)
        except BaseException:
            if native is not None:
                await self._parts(session).discard(native)
            raise
        await self._parts(session).open(session.staging)
        return snapshot(session, {})

    async def _begin(self, place: Place, size: int, chunk_size: int, hidden: bool) -> str | None:
        """The key of a native upload to ``place``, when its storage takes the chunks
        itself; None to stage them (also when the storage fails to begin one now)."""
        if self._native is None or not self._native.offers(place, size, chunk_size):
            return None
        try:
            return await self._native.begin(place, hidden)
        except ServerError as exc:
            log.warning("staging a multipart upload: its storage did not begin one: %s", exc)
            return None

    # --- chunks ---------------------------------------------------------------------

    async def chunk(
        self, caller: Caller, upload_id: str, index: int, body: AsyncIterator[bytes]
    ) -> Snapshot:
        """Store chunk ``index``; one already received is taken as received again.
        Two database transactions a chunk: its reservation (with the state and the
        staging budget) and its record (with the session's activity and the answer)."""
        session = await self._known(caller, upload_id)
        total = total_chunks(session.size, session.chunk_size)
        if not 0 <= index < total:
            raise BadRequest(f"chunk index {index} is outside 0..{total - 1}")
        length = chunk_length(session, index)
        budget = self.limits.staging_budget() if session.store == STAGING else None
        now = _now()
        reserving = asyncio.ensure_future(
            self._repo.reserve(upload_id, index, length, now, now - STALE_CHUNK, budget)
        )
        try:  # the chunk's first pieces are read while it is being reserved
            early = await _arrived_meanwhile(body, reserving, _EARLY_BYTES)
        except BaseException:
            if await _outcome(reserving) == "taken":
                await self._repo.release(upload_id, index)
            raise
        taken = await reserving
        if taken == "taken":
            rest = _prefixed(early, body)
            return snapshot(session, await self._receive(session, index, length, rest))
        if taken == "gone":
            session = await self._owned(caller, upload_id)  # not found, or its state
            self._known_sessions.pop(upload_id, None)
            raise BadRequest(f"session is {session.state}", (await self._snapshot(session)).json())
        if taken == "full":
            raise UploadBusy(data=(await self._snapshot(session)).json())
        if taken == "busy":
            raise ChunkInFlight(data=(await self._snapshot(session)).json())
        return await self._snapshot(session)

    async def _receive(
        self, session: UploadSession, index: int, length: int, body: AsyncIterator[bytes]
    ) -> dict[int, int]:
        """Receive a chunk reserved for this request (it counts against the budget,
        with every other one received or being received, from its reservation on);
        the chunks received then."""
        try:
            offset = index * session.chunk_size
            await self._parts(session).put(session.staging, index, offset, length, body)
        except BaseException:
            await self._repo.release(session.id, index)
            raise
        return await self._repo.finish(session.id, index, length, _now())

    async def _known(self, caller: Caller, upload_id: str) -> UploadSession:
        """The session as it was opened, kept by this process while it receives
        chunks: what a chunk needs of it never changes (its state is checked by
        the chunk's reservation)."""
        session = self._known_sessions.get(upload_id)
        if session is None:
            session = await self._owned(caller, upload_id)
            if session.state != RECEIVING:
                raise BadRequest(
                    f"session is {session.state}", (await self._snapshot(session)).json()
                )
            self._known_sessions[upload_id] = session
            while len(self._known_sessions) > _KNOWN:
                self._known_sessions.pop(next(iter(self._known_sessions)))
        elif session.user_id != caller.user.id:
            raise Forbidden(_NOT_YOURS)
        return session

    # --- status, abort --------------------------------------------------------------

    async def status(self, caller: Caller, upload_id: str) -> Snapshot:
        return await self._snapshot(await self._owned(caller, upload_id))

    async def find(self, caller: Caller, path: str, size: int) -> Snapshot:
        """The open session of ``path`` and ``size``, for a client that lost its id."""
        path = clean_path(path)
        for session in await self._repo.of_user(caller.user.id):
            if session.path == path and session.size == size:
                return await self._snapshot(session)
        raise NotFound(NOT_FOUND)

    async def abort(self, caller: Caller, upload_id: str) -> None:
        await self._drop(await self._owned(caller, upload_id))

    # --- complete -------------------------------------------------------------------

    async def complete(self, caller: Caller, upload_id: str) -> Snapshot:
        session = await self._owned(caller, upload_id)
        shot = await self._ready(session)
        if not await self._repo.move(upload_id, RECEIVING, COMPLETING, _now()):
            raise BadRequest("the upload is being completed already", shot.json())
        try:
            await self._put(caller, session)
        except ManifoldError as exc:
            await self._failed(session, exc)
            exc.data = failed(shot, exc.message).json()
            raise
        except BaseException:
            await self._repo.move(upload_id, COMPLETING, RECEIVING, _now())
            raise
        await self._drop(session)
        return snapshot(session, {}, COMPLETED)

    async def _ready(self, session: UploadSession) -> Snapshot:
        """The snapshot of a session whose every chunk is here, else the error."""
        if session.state != RECEIVING:
            raise BadRequest(f"session is {session.state}", (await self._snapshot(session)).json())
        chunks = await self._repo.chunks(session.id)
        shot = snapshot(session, chunks)
        if shot.received_bytes < session.size:
            raise BadRequest(
                f"cannot complete: {shot.received_bytes} of {session.size} bytes received",
                shot.json(),
            )
        kept = await self._parts(session).present(session.staging, set(chunks))
        lost = set(chunks) - kept
        if lost:  # a staging folder this instance cannot see, or lost: send them again
            await self._repo.drop_chunks(session.id, lost)
            raise BadRequest(
                f"chunks {sorted(lost)} are not in the staging folder; send them again",
                (await self._snapshot(session)).json(),
            )
        return shot

    async def _put(self, caller: Caller, session: UploadSession) -> None:
        count = total_chunks(session.size, session.chunk_size)
        if session.store == NATIVE:
            await self._finish(caller, session, count)
            return
        await self._place_staged(caller, session)

    async def _place_staged(self, caller: Caller, session: UploadSession) -> None:
        """Put the staged file in place as one upload, after every check of a put and
        its hashes: a Local storage on the staging folder's file system links the file
        itself (no byte copied), any other storage reads it as a put's stream."""
        path = await self._store.whole(session.staging, session.size)
        await check_file(path, session.hashes)
        await self._writer.put(
            caller,
            session.path,
            session.password,
            FileSource(path),
            session.size,
            session.modified,
            session.overwrite,
        )

    async def _finish(self, caller: Caller, session: UploadSession, count: int) -> None:
        """Have the storage join the parts into place, after every check of a put;
        the hashes are checked by the driver, before the file takes its name."""
        native = NativeParts(NativeStore.token(session.staging), count, session.hashes)
        await self._writer.put(
            caller,
            session.path,
            session.password,
            _nothing(),
            session.size,
            session.modified,
            session.overwrite,
            native=native,
        )

    async def _failed(self, session: UploadSession, exc: ManifoldError) -> None:
        """A refusal (a hash, a permission, a name taken) ends the session; a failing
        back end leaves it to be completed again."""
        if exc.code >= 500:
            await self._repo.move(session.id, COMPLETING, RECEIVING, _now())
        else:
            await self._drop(session)

    # --- expiry ---------------------------------------------------------------------

    async def sweep(self) -> int:
        """Remove the sessions idle past the setting, parts and all, and parts that
        belong to no session; how many sessions went."""
        idle_for = timedelta(seconds=self.limits.idle_seconds())
        idle = [s for s in await self._repo.idle_since(_now() - idle_for) if _stale(s, idle_for)]
        for session in idle:
            await self._drop(session)
        await self._repo.drop_orphans()
        await self._store.sweep(await self._repo.ids())
        return len(idle)

    # --- shared ---------------------------------------------------------------------

    async def _owned(self, caller: Caller, upload_id: str) -> UploadSession:
        session = await self._repo.get(upload_id) if upload_id else None
        if session is None:
            raise NotFound(NOT_FOUND)
        if session.user_id != caller.user.id:
            raise Forbidden(_NOT_YOURS)
        return session

    async def _snapshot(self, session: UploadSession) -> Snapshot:
        return snapshot(session, await self._repo.chunks(session.id))

    async def _drop(self, session: UploadSession) -> None:
        self._known_sessions.pop(session.id, None)
        await self._repo.remove(session.id)
        await self._parts(session).discard(session.staging)

    def _parts(self, session: UploadSession) -> PartStore:
        """Where the session's chunks are: its storage's own upload, or staged."""
        if session.store == NATIVE and self._native is not None:
            return self._native
        return self._store


def _hashes(given: Mapping[str, str] | None) -> dict[str, str]:
    """The hashes the page sent, lower-case, those it left empty dropped."""
    wanted = {algo: value.strip().lower() for algo, value in (given or {}).items()}
    return {algo: value for algo, value in wanted.items() if value}


def _stale(session: UploadSession, idle_for: timedelta) -> bool:
    """Idle past the setting; one being completed (a long copy to a slow back end) is
    given as long again before it is taken for one whose instance died mid-way."""
    if session.state != COMPLETING or session.last_active is None:
        return True
    return session.last_active < _now() - 2 * idle_for


def _now() -> datetime:
    return datetime.now(UTC)


async def _arrived_meanwhile(
    body: AsyncIterator[bytes], until: asyncio.Future[str], limit: int
) -> list[bytes]:
    """The pieces of ``body`` that arrive while ``until`` is pending, ``limit`` bytes at
    most: the wait for the database is spent receiving."""
    pieces: list[bytes] = []
    size = 0
    while not until.done() and size < limit:
        piece = await anext(body, None)
        if piece is None:
            break
        pieces.append(piece)
        size += len(piece)
    return pieces


async def _prefixed(first: list[bytes], rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    for piece in first:
        yield piece
    async for piece in rest:
        yield piece


async def _outcome(future: asyncio.Future[str]) -> str | None:
    """What ``future`` ends with; None when it fails or is cancelled."""
    await asyncio.wait([future])
    if future.cancelled() or future.exception() is not None:
        return None
    return future.result()


async def _nothing() -> AsyncIterator[bytes]:
    """The stream of an upload whose bytes are in the store already."""
    return
    yield b""  # pragma: no cover - makes this an async generator
