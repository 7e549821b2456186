"""Where the chunks of a multipart upload wait: the ``PartStore`` interface and its
first implementation, a staging folder.

A store keeps each session's parts under the session's ``staging`` key and gives
them back in order at completion. ``StagingStore`` keeps them as one file per chunk
in a private folder per session: a chunk is written under a temporary name and
renamed into place once whole and of its expected length, so a chunk sent twice (or
by two instances at once) is stored once and never shows half. A store with a
native multipart upload of its own (S3, Azure) is a second implementation of the
same interface; the routes and the session service do not change.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Protocol

from manifold.concurrency import DISK_POOL, run_in
from manifold.config import make_private
from manifold.errors import BadRequest, NotFound
from manifold.services.fs.streams import file_stream

_KEY = re.compile(r"[0-9a-f]{32}")
GONE = "multipart upload session not found"
# A folder this young may be a session another instance is opening (its record made,
# its folder not yet seen by the sweep's list of records): the sweep leaves it.
YOUNG_SECONDS = 60.0


class ChunkLengthError(BadRequest):
    """A chunk's body is not the length its index calls for."""


class PartStore(Protocol):
    async def open(self, key: str) -> None:
        """Make room for a new session's parts."""

    async def put(self, key: str, index: int, length: int, body: AsyncIterator[bytes]) -> None:
        """Store chunk ``index``, which must be exactly ``length`` bytes."""

    async def present(self, key: str, indexes: set[int]) -> set[int]:
        """Which of ``indexes`` the store really holds (a lost disk, another host)."""

    def read(self, key: str, count: int) -> AsyncIterator[bytes]:
        """The bytes of chunks 0 to ``count - 1``, in order."""

    async def discard(self, key: str) -> None:
        """Remove every part of the session; an unknown key is not an error."""

    async def sweep(self, live: set[str]) -> None:
        """Remove what belongs to no session in ``live``."""


class StagingStore:
    """Parts as files in ``root``/<key>/ (see the module's docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def open(self, key: str) -> None:
        await run_in(DISK_POOL, self._make, self._folder(key))

    def _make(self, folder: Path) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        make_private(self.root)
        folder.mkdir(mode=0o700, exist_ok=True)

    async def put(self, key: str, index: int, length: int, body: AsyncIterator[bytes]) -> None:
        folder = self._folder(key)
        temp = folder / f".{secrets.token_hex(8)}.partial"
        try:
            file = await run_in(DISK_POOL, _open_private, temp)
        except FileNotFoundError:
            raise NotFound(GONE) from None  # aborted or swept meanwhile
        try:
            await _write_exactly(file, body, length)
            await run_in(DISK_POOL, _close_into, file, temp, folder / _part(index))
        except FileNotFoundError:
            await run_in(DISK_POOL, _discard, file, temp)
            raise NotFound(GONE) from None
        except BaseException:
            await run_in(DISK_POOL, _discard, file, temp)
            raise

    async def present(self, key: str, indexes: set[int]) -> set[int]:
        folder = self._folder(key)
        return await run_in(DISK_POOL, _present, folder, indexes)

    async def read(self, key: str, count: int) -> AsyncIterator[bytes]:
        folder = self._folder(key)
        for index in range(count):
            async for data in file_stream(str(folder / _part(index))):
                yield data

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


async def _write_exactly(file: IO[bytes], body: AsyncIterator[bytes], length: int) -> None:
    written = 0
    async for data in body:
        written += len(data)
        if written > length:
            raise ChunkLengthError(f"chunk is longer than its expected {length} bytes")
        await run_in(DISK_POOL, file.write, data)
    if written != length:
        raise ChunkLengthError(f"chunk has {written} bytes, {length} expected")


def _part(index: int) -> str:
    return f"{index:08d}.part"


def _open_private(path: Path) -> IO[bytes]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb")


def _close_into(file: IO[bytes], temp: Path, target: Path) -> None:
    file.close()
    os.replace(temp, target)  # a copy sent again replaces the same bytes


def _discard(file: IO[bytes], temp: Path) -> None:
    file.close()
    temp.unlink(missing_ok=True)


def _present(folder: Path, indexes: set[int]) -> set[int]:
    return {i for i in indexes if (folder / _part(i)).is_file()}


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
