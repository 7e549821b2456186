"""Where the chunks of a multipart upload wait: the ``PartStore`` interface and its
first implementation, a staging folder.

A store keeps each session's parts under the session's ``staging`` key and gives
them back at completion. ``StagingStore`` keeps them as ONE file per session, in a
private folder per session: each chunk is written at its offset in that file, so at
``complete`` the file is the upload itself and is handed to the writer whole (a
Local storage on the same file system links it into place: the bytes are written
once). A chunk counts as received only once whole and of its length (the session's
record says so, not the file); one sent again, or by two instances one after the
other, rewrites the same range with the same bytes, and the session's chunk
reservation keeps two writers off one chunk at a time. A store with a native
multipart upload of its own (S3, Azure) is a second implementation of the same
interface; the routes and the session service do not change.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

from manifold.concurrency import DISK_POOL, run_in
from manifold.config import make_private
from manifold.errors import BadRequest, NotFound, ServerError

_KEY = re.compile(r"[0-9a-f]{32}")
GONE = "multipart upload session not found"
# A folder this young may be a session another instance is opening (its record made,
# its folder not yet seen by the sweep's list of records): the sweep leaves it.
YOUNG_SECONDS = 60.0
_FILE = "upload"
# Pieces of a chunk are written this many bytes at a time (fewer thread hops).
_BATCH = 1 << 20
_PIECES = 256  # and at most this many pieces (a vector write takes up to 1024)


class ChunkLengthError(BadRequest):
    """A chunk's body is not the length its index calls for."""


class PartStore(Protocol):
    async def open(self, key: str) -> None:
        """Make room for a new session's parts."""

    async def put(
        self, key: str, index: int, offset: int, length: int, body: AsyncIterator[bytes]
    ) -> None:
        """Store chunk ``index`` (at ``offset`` of the file), exactly ``length`` bytes."""

    async def present(self, key: str, indexes: set[int]) -> set[int]:
        """Which of ``indexes`` the store really holds (a lost disk, another host)."""

    async def whole(self, key: str, size: int) -> str:
        """The path of the session's whole file, ``size`` bytes, on this machine."""

    async def discard(self, key: str) -> None:
        """Remove every part of the session; an unknown key is not an error."""

    async def sweep(self, live: set[str]) -> None:
        """Remove what belongs to no session in ``live``."""


class StagingStore:
    """Parts as one file, ``root``/<key>/upload (see the module's docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def open(self, key: str) -> None:
        await run_in(DISK_POOL, self._make, self._folder(key))

    def _make(self, folder: Path) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        make_private(self.root)
        folder.mkdir(mode=0o700, exist_ok=True)
        # The folder is private; the file gets the mode a put gives a new file, since a
        # Local storage links this very file into place.
        os.close(os.open(folder / _FILE, os.O_WRONLY | os.O_CREAT, 0o666))

    async def put(
        self, key: str, index: int, offset: int, length: int, body: AsyncIterator[bytes]
    ) -> None:
        path = self._folder(key) / _FILE
        try:
            fd = await run_in(DISK_POOL, os.open, path, os.O_WRONLY)
        except FileNotFoundError:
            raise NotFound(GONE) from None  # aborted or swept meanwhile
        try:
            await _write_exactly(fd, offset, body, length)
        finally:
            await run_in(DISK_POOL, os.close, fd)

    async def present(self, key: str, indexes: set[int]) -> set[int]:
        """All, while the session's file is here: a chunk is recorded as received only
        after its bytes were written to it."""
        path = self._folder(key) / _FILE
        return indexes if await run_in(DISK_POOL, path.is_file) else set()

    async def whole(self, key: str, size: int) -> str:
        path = self._folder(key) / _FILE
        try:
            found = (await run_in(DISK_POOL, path.stat)).st_size
        except FileNotFoundError:
            raise NotFound(GONE) from None
        if found != size:  # never, as each chunk is written within its range
            raise ServerError(f"the staged file has {found} bytes, {size} expected")
        return str(path)

    async def discard(self, key: str) -> None:
        await run_in(DISK_POOL, shutil.rmtree, self._folder(key), True)

    async def sweep(self, live: set[str]) -> None:
        await run_in(DISK_POOL, self._sweep, live)

    def _sweep(self, live: set[str]) -> None:
        if not self.root.is_dir():
            return
        young = time.time() - YOUNG_SECONDS
        for entry in self.root.iterdir():
            if entry.name not in live and _mtime(entry) < young:
                _remove(entry)

    def _folder(self, key: str) -> Path:
        if not _KEY.fullmatch(key):
            raise NotFound(GONE)
        return self.root / key


async def _write_exactly(fd: int, offset: int, body: AsyncIterator[bytes], length: int) -> None:
    """Write ``body`` at ``offset``, a batch at a time (the pieces as they came, in one
    vector write: no copy to join them), each batch written while the next arrives,
    and flush it to the disk: a chunk counted received survives a crash. A piece that
    would go past ``length`` is refused before it is written, so a chunk never
    touches the next one's range."""
    queued, pending, pieces = 0, 0, []
    writing: asyncio.Future[int] | None = None
    try:
        async for data in body:
            if queued + pending + len(data) > length:
                raise ChunkLengthError(f"chunk is longer than its expected {length} bytes")
            pieces.append(data)
            pending += len(data)
            if pending >= _BATCH or len(pieces) >= _PIECES:
                if writing is not None:
                    await writing
                writing = asyncio.ensure_future(
                    run_in(DISK_POOL, _pwrite_all, fd, pieces, offset + queued)
                )
                queued, pending, pieces = queued + pending, 0, []
        if writing is not None:
            await writing
            writing = None
        if pieces:
            await run_in(DISK_POOL, _pwrite_all, fd, pieces, offset + queued)
            queued += pending
    finally:
        if writing is not None:  # the descriptor is closed next: the write ends first
            await asyncio.wait([writing])
    if queued != length:
        raise ChunkLengthError(f"chunk has {queued} bytes, {length} expected")
    await run_in(DISK_POOL, os.fdatasync, fd)


def _pwrite_all(fd: int, pieces: list[bytes], offset: int) -> int:
    total = sum(len(piece) for piece in pieces)
    done = os.pwritev(fd, pieces, offset)
    if done < total:  # a short write (a full disk says so on the next): the rest as one
        rest = memoryview(b"".join(pieces))[done:]
        while rest:
            wrote = os.pwrite(fd, rest, offset + done)
            rest, done = rest[wrote:], done + wrote
    return total


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return time.time()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
