"""Open files for the protocol servers: one link read at any offset, one upload fed
as its bytes arrive.

SFTP reads blocks of 32-256 KiB at offsets of its client's choosing and writes
them in order; FTP and WebDAV stream. A ``ReadHandle`` resolves and links its file
once: a local file is read from its open descriptor (``os.pread``, no seek, no
reopen), a reader or a URL through one open stream for as long as reads follow each
other, reopened at the new offset on a seek. A ``WriteHandle`` feeds the storage's
``put`` through a short queue, so memory holds a few blocks, never the file; nothing
is in place until ``close``, and ``abort`` leaves nothing. The ``put`` starts at the
first write (or at ``close``, for an empty file): clients open files long before they
write (editors, sshfs), and a put started at the open would hold one of the storage's
upload slots meanwhile and fail as idle.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any

from manifold.concurrency import DISK_POOL, run_in
from manifold.errors import InvalidRequest
from manifold.models import Link, Obj
from manifold.services.fs.redirects import LinkClient
from manifold.services.fs.streams import CHUNK, open_range
from manifold.vfs.layers import close_stream

# Blocks a writer may be ahead of its storage: a few SFTP blocks, never the file.
QUEUED_BLOCKS = 8

Store = Callable[[AsyncIterator[bytes]], Awaitable[Obj]]


class ReadHandle:
    """One file, linked once, read at any offset until ``aclose``."""

    def __init__(self, obj: Obj, link: Link, client: LinkClient | None = None) -> None:
        self.obj = obj
        self._link = link
        self._client = client
        self._fd: int | None = None
        # The open stream of a reader or URL link, where it stands, and what it gave
        # beyond the last read (``_buffer[_used:]``).
        self._source: AsyncIterator[bytes] | None = None
        self._at = 0
        self._buffer = b""
        self._used = 0

    @classmethod
    async def open(cls, obj: Obj, link: Link, client: LinkClient | None = None) -> ReadHandle:
        handle = cls(obj, link, client)
        if link.file_path and link.reader is None:
            handle._fd = await _open_descriptor(link.file_path)
        return handle

    async def read(self, offset: int, length: int) -> bytes:
        """Bytes ``[offset, offset + length)``; fewer only where the file ends."""
        if offset < 0 or length < 0:
            raise InvalidRequest("a read starts and lasts at least 0 bytes")
        if length == 0:
            return b""
        if self._fd is not None:
            return await run_in(DISK_POOL, _pread, self._fd, offset, length)
        return await self._read_stream(offset, length)

    async def stream(self, offset: int = 0, length: int | None = None) -> AsyncIterator[bytes]:
        """Bytes ``[offset, offset + length)`` in chunks (``length`` None: to the end)."""
        if self._fd is None:
            async for data in open_range(self._link, offset, length, client=self._client):
                yield data
            return
        end = None if length is None else offset + length
        while end is None or offset < end:
            want = CHUNK if end is None else min(CHUNK, end - offset)
            data = await self.read(offset, want)
            if not data:
                return
            offset += len(data)
            yield data

    async def aclose(self) -> None:
        await self._drop_source()
        fd, self._fd = self._fd, None
        if fd is not None:
            await run_in(DISK_POOL, os.close, fd)

    async def __aenter__(self) -> ReadHandle:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _read_stream(self, offset: int, length: int) -> bytes:
        if self._source is None or offset != self._at:
            await self._drop_source()
            self._source = open_range(self._link, offset, None, client=self._client)
            self._at = offset
        parts: list[bytes] = []
        want = length
        while want > 0:
            if self._used >= len(self._buffer):
                try:
                    self._buffer, self._used = await anext(self._source), 0
                except StopAsyncIteration:
                    break
            part = self._buffer[self._used : self._used + want]
            self._used += len(part)
            want -= len(part)
            parts.append(part)
        self._at += length - want
        return b"".join(parts)

    async def _drop_source(self) -> None:
        source, self._source = self._source, None
        self._buffer, self._used = b"", 0
        if source is not None:
            await close_stream(source)


class WriteHandle:
    """An upload fed block by block, in order; in place only once ``close`` returns.

    ``offset`` is where the next write must start: 0 for a new file, or the bytes
    kept of the file it replaces (an append, a resumed upload), which the storage
    receives first.
    """

    def __init__(self, store: Store, start: int = 0, prefix: AsyncIterator[bytes] | None = None):
        self.offset = start
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUED_BLOCKS)
        self._finished = False
        self._store = store
        self._prefix = prefix
        self._task: asyncio.Future[Obj] | None = None  # the put, once started

    async def write(self, offset: int, data: bytes) -> None:
        """Add ``data`` at ``offset``, which must be where the last write ended."""
        if self._finished:
            raise InvalidRequest("the file is already closed")
        if offset != self.offset:
            raise InvalidRequest(
                f"writes go in order: the next one starts at byte {self.offset}, not {offset}"
            )
        if data:
            await self._send(bytes(data))
            self.offset += len(data)

    async def close(self) -> Obj:
        """Put the file in place and return it; its storage's error if that fails."""
        if self._finished:
            raise InvalidRequest("the file is already closed")
        self._finished = True
        try:
            await self._send(None)
            return await self._started()
        except asyncio.CancelledError:
            await self.abort()
            raise

    async def abort(self) -> None:
        """Give the upload up: nothing of it stays (the put is cancelled, and a put
        cancelled leaves nothing behind)."""
        self._finished = True
        task = self._task
        if task is None:
            await self._close_prefix()  # never started: nothing was sent anywhere
            return
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: an aborted upload's error is no news

    async def __aenter__(self) -> WriteHandle:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is None or not self._task.done():
            await self.abort()  # never closed: nothing is put in place

    def _started(self) -> asyncio.Future[Obj]:
        """The storage's put, started now if it was not yet."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._store(self._blocks(self._prefix)))
        return self._task

    async def _close_prefix(self) -> None:
        prefix, self._prefix = self._prefix, None
        if prefix is not None:
            await close_stream(prefix)

    async def _blocks(self, prefix: AsyncIterator[bytes] | None) -> AsyncIterator[bytes]:
        if prefix is not None:
            async for data in prefix:
                yield data
        while (block := await self._queue.get()) is not None:
            yield block

    async def _send(self, item: bytes | None) -> None:
        """Queue ``item`` for the storage; the storage's error when it stopped taking."""
        task = self._started()
        if not task.done():
            queued = asyncio.ensure_future(self._queue.put(item))
            try:
                either: set[asyncio.Future[Any]] = {queued, task}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not queued.done():
                    queued.cancel()
            if queued.done() and not queued.cancelled():
                return
        self._finished = True
        if task.cancelled():
            raise InvalidRequest("the upload was given up")
        error = task.exception()
        raise error if error is not None else InvalidRequest("the upload already ended")


async def _open_descriptor(path: str) -> int:
    """``os.open`` in a worker; an open that ends after its caller was cancelled closes
    the descriptor it made."""
    opening = asyncio.ensure_future(run_in(DISK_POOL, os.open, path, os.O_RDONLY))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        opening.add_done_callback(_close_opened)
        raise


def _close_opened(opening: asyncio.Future[int]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        os.close(opening.result())


def _pread(fd: int, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset``, or fewer where the file ends."""
    data = os.pread(fd, length, offset)
    if len(data) in (0, length):
        return data
    parts = [data]
    got = len(data)
    while got < length and (more := os.pread(fd, length - got, offset + got)):
        parts.append(more)
        got += len(more)
    return b"".join(parts)
