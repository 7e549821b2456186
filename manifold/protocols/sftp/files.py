"""Open SFTP files: one read handle per file read, one upload per file written.

A file opened for reading is linked once (``GuardedOps.open_reader``) and read at
whatever offsets the client asks, without a reopen per block. A file opened for
writing feeds one upload (``GuardedOps.open_writer``) with blocks in order; a block
that does not start where the last one ended is refused and spoils the upload, so
that ``close`` puts nothing broken in place. Nothing is in place before ``close``;
a session that ends with the file still open (a client gone mid-upload) aborts it.

The requests on one open file are answered one after the other, in the order they
came (``dispatch``), so a client's many requests in flight (rclone's: 64 of 32 KiB)
are worth something only if each answer is quick. A file read in order is therefore
read a window of ``WINDOW`` bytes at a time, the next window already being read while
this one is answered (``ReadFile``); a read that does not follow the last one is
answered on its own, so random reads cost no more than they did. An upload's writes
are gathered and handed to the storage ``GATHER`` bytes at a time, all but the first
(which starts the upload), so that a storage is not called once per 32 KiB; a write
the storage then refuses fails that write and spoils the upload, and the close says
so.

How the open flags map onto an upload:

* ``TRUNC``, ``EXCL`` (the name must be free) or a name not taken yet: a new file
  from byte 0;
* ``APPEND``: after the existing bytes, whatever offsets the writes carry (as
  OpenSSH's server does);
* none of these on an existing file (``sftp reput``, resumed transfers): the first
  write's offset says how many of the existing bytes are kept; the bytes after the
  last write are not, as no storage here can write inside a file.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os

import asyncssh

from manifold.errors import ManifoldError, ObjectNotFound
from manifold.models import Obj
from manifold.services.auth.service import Caller
from manifold.services.fs.handles import ReadHandle, WriteHandle
from manifold.services.fs.ops import GuardedOps

from .statuses import failure

# Bytes read ahead per open file.
WINDOW = 1 << 20
# Bytes of an upload's writes gathered before they go to its storage as one block.
GATHER = 256 << 10


class ReadFile:
    """A read handle answering reads in order from a window read ahead.

    Only one read of the handle runs at a time (a stream-backed handle keeps its
    place between reads): the read ahead is awaited before any other is made.
    """

    def __init__(self, handle: ReadHandle) -> None:
        self.handle = handle
        self._start = 0  # the window: the file's bytes from ``_start``
        self._window = b""
        self._next = 0  # where the last read ended
        self._ahead: asyncio.Task[bytes] | None = None  # the window after this one

    @property
    def obj(self) -> Obj:
        return self.handle.obj

    async def read(self, offset: int, length: int) -> bytes:
        if length > WINDOW or (offset != self._next and not self._holds(offset)):
            await self._settle()
            data = await self.handle.read(offset, length)  # out of order: on its own
        else:
            data = await self._windowed(offset, length)
        self._next = offset + len(data)
        return data

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._settle()
        await self.handle.aclose()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Where data or a hole starts, which asyncssh's server asks a file for a
        client's ranges@asyncssh.com (asyncssh's own client sends it on every get): a
        file here is data from its first byte to its end."""
        size = self.obj.size
        if whence == os.SEEK_DATA and offset >= size:
            raise OSError(errno.ENXIO, "no data after the end of the file")
        return size if whence == os.SEEK_HOLE else offset

    async def _windowed(self, offset: int, length: int) -> bytes:
        parts: list[bytes] = []
        while length > 0:
            if not self._holds(offset) and not await self._move_to(offset):
                break  # the end of the file
            part = self._window[offset - self._start : offset - self._start + length]
            parts.append(part)
            offset += len(part)
            length -= len(part)
        self._read_ahead()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _holds(self, offset: int) -> bool:
        return self._start <= offset < self._start + len(self._window)

    async def _move_to(self, offset: int) -> bool:
        """Make the window the one holding ``offset``: the one read ahead if it
        starts there, else a new one; False where the file ends before it."""
        end = self._start + len(self._window)
        ahead = await self._settle()
        if ahead is not None and offset == end:
            self._start, self._window = end, ahead
        else:
            self._start, self._window = offset, await self.handle.read(offset, WINDOW)
        return self._holds(offset)

    def _read_ahead(self) -> None:
        """Start reading the next window, unless it is under way or the file ends."""
        if self._ahead is None and len(self._window) == WINDOW:
            end = self._start + WINDOW
            self._ahead = asyncio.ensure_future(self.handle.read(end, WINDOW))

    async def _settle(self) -> bytes | None:
        """The window read ahead, once its read is over (None if none was, or if it
        failed: the read that needs those bytes makes it again, and fails itself)."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        try:
            return await ahead
        except ManifoldError:
            return None


class WriteFile:
    def __init__(self, ops: GuardedOps, caller: Caller, path: str, pflags: int) -> None:
        self._ops = ops
        self._caller = caller
        self.path = path
        self._append = bool(pflags & asyncssh.FXF_APPEND)
        self._exclusive = bool(pflags & asyncssh.FXF_EXCL)
        self._handle: WriteHandle | None = None
        self._spoiled = ""
        self._gathered: list[bytes] = []  # written, not yet handed to the upload
        self._gathered_size = 0
        self._handed_over = False  # whether the upload has had a block (and started)

    @classmethod
    async def open(cls, ops: GuardedOps, caller: Caller, path: str, pflags: int) -> WriteFile:
        file = cls(ops, caller, path, pflags)
        fresh = pflags & (asyncssh.FXF_TRUNC | asyncssh.FXF_EXCL | asyncssh.FXF_APPEND)
        if fresh or not await file._exists():
            await file._start(0)
        return file

    @property
    def size(self) -> int:
        return 0 if self._handle is None else self._handle.offset + self._gathered_size

    async def write(self, offset: int, data: bytes) -> None:
        if self._spoiled:
            raise failure(self._spoiled)
        handle = self._handle or await self._start(offset)
        end = handle.offset + self._gathered_size
        if self._append:
            offset = end
        if offset != end:
            self._spoiled = (
                f"writes go in order: the next one starts at byte {end}, "
                f"not {offset}; the upload is given up"
            )
            await self.abort()
            raise failure(self._spoiled)
        self._gathered.append(data)
        self._gathered_size += len(data)
        if self._gathered_size >= GATHER or not self._handed_over:
            await self._hand_over(handle)  # the first at once: it starts the upload

    async def close(self) -> None:
        """Put the file in place (a file opened and closed unwritten: an empty one,
        unless it kept an existing file as it was)."""
        if self._spoiled:
            raise failure(self._spoiled)
        if self._handle is None:
            return  # opened over an existing file and never written: left as it was
        await self._hand_over(self._handle)
        await self._handle.close()

    async def abort(self) -> None:
        self._gathered, self._gathered_size = [], 0
        if self._handle is not None:
            await self._handle.abort()

    async def _hand_over(self, handle: WriteHandle) -> None:
        """Give the gathered writes to the upload as one block."""
        gathered, self._gathered, self._gathered_size = self._gathered, [], 0
        if not gathered:
            return
        self._handed_over = True
        try:
            await handle.write(handle.offset, b"".join(gathered))
        except ManifoldError as exc:
            self._spoiled = f"the upload failed: {exc.message}"
            raise

    async def _exists(self) -> bool:
        try:
            await self._ops.stat(self._caller, self.path)
        except ObjectNotFound:
            return False
        return True

    async def _start(self, offset: int) -> WriteHandle:
        try:
            self._handle = await self._ops.open_writer(
                self._caller,
                self.path,
                overwrite=not self._exclusive,
                append=self._append,
                offset=offset,
                strict=True,
            )
        except ManifoldError:
            self._spoiled = "the upload could not start"
            raise
        return self._handle


SftpFile = ReadFile | WriteFile
