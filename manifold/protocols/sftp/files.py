"""Open SFTP files: one read handle per file read, one upload per file written.

A file opened for reading is linked once (``GuardedOps.open_reader``) and read at
whatever offsets the client asks, without a reopen per block. A file opened for
writing feeds one upload (``GuardedOps.open_writer``) with blocks in order; a block
that does not start where the last one ended is refused and spoils the upload, so
that ``close`` puts nothing broken in place. Nothing is in place before ``close``;
a session that ends with the file still open (a client gone mid-upload) aborts it.

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

import asyncssh

from manifold.errors import ManifoldError, ObjectNotFound
from manifold.models import Obj
from manifold.services.auth.service import Caller
from manifold.services.fs.handles import ReadHandle, WriteHandle
from manifold.services.fs.ops import GuardedOps

from .statuses import failure


class ReadFile:
    def __init__(self, handle: ReadHandle) -> None:
        self.handle = handle

    @property
    def obj(self) -> Obj:
        return self.handle.obj

    async def read(self, offset: int, length: int) -> bytes:
        return await self.handle.read(offset, length)

    async def close(self) -> None:
        await self.handle.aclose()


class WriteFile:
    def __init__(self, ops: GuardedOps, caller: Caller, path: str, pflags: int) -> None:
        self._ops = ops
        self._caller = caller
        self.path = path
        self._append = bool(pflags & asyncssh.FXF_APPEND)
        self._exclusive = bool(pflags & asyncssh.FXF_EXCL)
        self._handle: WriteHandle | None = None
        self._spoiled = ""

    @classmethod
    async def open(cls, ops: GuardedOps, caller: Caller, path: str, pflags: int) -> WriteFile:
        file = cls(ops, caller, path, pflags)
        fresh = pflags & (asyncssh.FXF_TRUNC | asyncssh.FXF_EXCL | asyncssh.FXF_APPEND)
        if fresh or not await file._exists():
            await file._start(0)
        return file

    @property
    def size(self) -> int:
        return 0 if self._handle is None else self._handle.offset

    async def write(self, offset: int, data: bytes) -> None:
        if self._spoiled:
            raise failure(self._spoiled)
        handle = self._handle or await self._start(offset)
        if self._append:
            offset = handle.offset
        if offset != handle.offset:
            self._spoiled = (
                f"writes go in order: the next one starts at byte {handle.offset}, "
                f"not {offset}; the upload is given up"
            )
            await handle.abort()
            raise failure(self._spoiled)
        await handle.write(offset, data)

    async def close(self) -> None:
        """Put the file in place (a file opened and closed unwritten: an empty one,
        unless it kept an existing file as it was)."""
        if self._spoiled:
            raise failure(self._spoiled)
        if self._handle is None:
            return  # opened over an existing file and never written: left as it was
        await self._handle.close()

    async def abort(self) -> None:
        if self._handle is not None:
            await self._handle.abort()

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
