"""The SMB driver: a folder of an SMB 2/3 share, through smbprotocol's ``smbclient``.

``Obj.path`` is the path inside the storage (``/a/b``); ``share.Share`` does the
blocking work, each call in the storage's own threads (``Driver.run_blocking``) and
inside ``translating``, which maps smbprotocol's exceptions (by NT status) onto
``manifold.errors``.

Downloads are range readers (SMB has no URLs): a file opened at the offset and read a
block at a time, closed as soon as the reader is. Uploads are written under a
temporary name in the target folder (``Temporaries``: removed when the upload fails,
once the server is back if it was away, and swept when stale by a listing of their
folder) and renamed into place when whole; the
rename that must not replace is the server's own no-replace rename; one that must
(an upload's, and a move or rename over a file: ``move_over``) is a rename with
ReplaceIfExists, one step on the server.

smbclient waits for its server without a limit: each call, and each block a transfer
reads or writes, has a deadline (``CALL_SECONDS``, ``BLOCK_SECONDS``: the storage's
call and idle limits), past which ``watchdog.Watchdog`` severs its connection, so a
hung server fails calls as temporary and frees the storage's threads.
"""

from __future__ import annotations

import asyncio
import builtins
import posixpath
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from manifold.drivers.base import (
    EXCLUSIVE_CREATE,
    FOLDER_MOVE,
    FOLDER_TIMES,
    Driver,
    LinkArgs,
    Temporaries,
    Upload,
    check_size,
    translating,
    validate_name,
)
from manifold.errors import (
    ManifoldError,
    NotAFile,
    ServerError,
)
from manifold.models import DiskUsage, Link, Obj, Storage

from .failures import ERRORS
from .meta import CONFIG, Addition
from .share import Handle, OpenUpload, Share

T = TypeVar("T")

# Bytes read per request by a download, and written per request by an upload.
BLOCK = 1 << 20
# Seconds a drop waits for the storage to log off, and for removals of temporaries.
DROP_SECONDS = 10
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SMBDriver(Driver[Addition]):
    # EXCLUSIVE_CREATE: a put or copy that must not replace ends in an SMB rename
    # without ReplaceIfExists, which the server refuses when the name is taken: NTFS
    # decides it under the folder's lock; Samba checks and renames within the one
    # smbd process that serves a connection, and all of a storage's calls share one
    # (two storages or clients on one Samba share race only within that check).
    # FOLDER_TIMES: folders carry their own last-write time.
    PROMISES: ClassVar[frozenset[str]] = frozenset({EXCLUSIVE_CREATE, FOLDER_MOVE, FOLDER_TIMES})
    # Seconds a call, and a read or write of one block, may wait on the server before
    # its connection is severed and it fails as temporary: the layers' own limits, so
    # that a storage thread is free again when they give up on a hung server.
    CALL_SECONDS: ClassVar[float] = CONFIG.call_timeout
    BLOCK_SECONDS: ClassVar[float] = CONFIG.idle_timeout

    def __init__(self, storage: Storage, options: Addition) -> None:
        super().__init__(storage, options)
        self._share: Share | None = None
        where = f"smb://{options.address}/{options.share_name}/{options.root_folder_path}"
        self._temps = Temporaries(where, self._remove_temp, casefold=True)

    async def init(self) -> None:
        """Log in and check that the root folder is a folder of the share."""
        share = Share(self.options, self._temps, self.CALL_SECONDS, self.BLOCK_SECONDS)
        self._share = share
        try:
            await self._run(share.check_root, again=True)
        except ManifoldError as exc:
            where = f"{share.username}@{share.host}:{share.port}/{self.options.share_name}"
            raise exc.with_context(where) from exc

    async def drop(self) -> None:
        with suppress(Exception):
            await self._temps.drain(DROP_SECONDS)
        share, self._share = self._share, None
        if share is None:
            return
        # A server that stopped answering must not hold the drop: logging off is
        # waited for a while, and its thread ends when the connection does.
        closing = asyncio.ensure_future(self.run_blocking(share.close))
        with suppress(Exception):  # dropping never raises
            async with asyncio.timeout(DROP_SECONDS):
                await asyncio.shield(closing)

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        limit = self.resources.max_listing_entries
        return await self._run(self.share.scan, dir.path, limit, again=True)

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        return Link(reader=lambda offset, length: self._read(file.path, offset, length))

    async def root_obj(self) -> Obj:
        modified = self.storage.modified or _EPOCH
        return Obj(name="", size=0, is_dir=True, modified=modified, path="/")

    async def get(self, path: str) -> Obj:
        if path == "/":
            return await self.root_obj()
        return await self._run(self.share.stat, path, again=True)

    async def fingerprint(self, dir: Obj) -> str | None:
        return await self._run(self.share.token, dir.path, again=True)

    async def details(self) -> DiskUsage:
        return await self._run(self.share.usage, again=True)

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        path = posixpath.join(parent.path, validate_name(name))
        return await self._run(self.share.make_dir, path, again=True)

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        if posixpath.dirname(src.path) == dst_dir.path:
            return src
        _refuse_into_itself(src, dst_dir)
        return await self._run(self.share.rename, src.path, posixpath.join(dst_dir.path, src.name))

    async def rename(self, src: Obj, new_name: str) -> Obj:
        new_path = posixpath.join(posixpath.dirname(src.path), validate_name(new_name))
        return await self._run(self.share.rename, src.path, new_path)

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        _refuse_into_itself(src, dst_dir)
        return await self._run(self.share.copy, src.path, dst_dir.path, bounded=False)

    async def remove(self, obj: Obj) -> None:
        await self._run(self.share.remove, obj.path, obj.is_dir)

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        name = validate_name(upload.name)
        share = self.share
        temp = self._temps.new(dst_dir.path)
        temp.made = True
        held = OpenUpload(temp.path, threading.Lock())
        # Given up in the storage's threads, after any write under way on it.
        async with self._temps.writing(temp, lambda *_: self.run_blocking(share.discard, held)):
            await self._run(share.create, held)
            written = await self._send(held, upload)
            check_size(written, upload.size)
            target = posixpath.join(dst_dir.path, name)
            return await self._run(
                share.put_in_place, held, target, upload.modified, upload.overwrite
            )

    async def move_over(self, src: Obj, dst_dir: Obj, name: str, replaced: Obj) -> Obj:
        """An SMB rename with ReplaceIfExists: the server gives the name over in one step
        (but for a file a download holds open: see ``Share.move_over``)."""
        target = posixpath.join(dst_dir.path, validate_name(name))
        return await self._run(self.share.move_over, src.path, target)

    # --- helpers --------------------------------------------------------------------

    @property
    def share(self) -> Share:
        if self._share is None:
            raise ServerError("storage not init")
        return self._share

    async def _run(
        self, func: Callable[..., T], *args: Any, again: bool = False, bounded: bool = True
    ) -> T:
        """``func(*args)`` in the storage's threads on a live connection, its errors
        translated; ``again``: safe to make once more if the connection broke;
        ``bounded``: failed once it has waited ``CALL_SECONDS`` on the server."""
        share = self.share
        with translating(ERRORS):
            return await self.run_blocking(share.call, func, args, again, bounded)

    async def _io(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` on an open file (its connection's own), errors translated."""
        with translating(ERRORS):
            return await self.run_blocking(func, *args)

    async def _send(self, temp: OpenUpload, upload: Upload) -> int:
        """Write the upload's bytes to the temporary, a block per request, each block
        going to the server while the next one arrives; how many bytes there were."""
        written = 0
        batch = bytearray()
        writing: asyncio.Future[None] | None = None
        try:
            async for chunk in upload.stream:
                written += len(chunk)
                if upload.size is not None and written > upload.size:
                    check_size(written, upload.size)
                batch += chunk
                if len(batch) >= BLOCK:
                    if writing is not None:
                        await writing
                    writing = asyncio.ensure_future(self._io(self.share.write, temp, bytes(batch)))
                    batch.clear()
            if writing is not None:
                await writing
            if batch:
                await self._io(self.share.write, temp, bytes(batch))
        finally:
            _abandon(writing)  # the temporary's removal waits for it
        return written

    async def _read(self, path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
        """Bytes of ``path`` from ``offset``, a block per request, the next block on its
        way from the server while this one goes to the reader."""
        share = self.share
        handle = await self._run(share.open, path, offset, again=True)
        reading = self._read_ahead(handle, length)
        try:
            while reading is not None:
                data = await reading
                if not data:
                    return
                if length is not None:
                    length -= len(data)
                reading = self._read_ahead(handle, length)
                yield data
        finally:  # also when the reader is closed early or cancelled
            _abandon(reading)  # the file's closing waits for it
            await asyncio.shield(self._quietly(self._io(handle.close)))

    def _read_ahead(self, handle: Handle, length: int | None) -> asyncio.Future[bytes] | None:
        if length is not None and length <= 0:
            return None
        want = BLOCK if length is None else min(BLOCK, length)
        return asyncio.ensure_future(self._io(handle.read, want))

    async def _remove_temp(self, path: str, is_dir: bool) -> bool:
        """Remove a temporary of this storage's (one it remembered)."""
        return await self.run_blocking(self.share.remove_temporary, path, is_dir)

    @staticmethod
    async def _quietly(call: Awaitable[object]) -> None:
        # Cleaning up after a failure that is being raised already.
        with suppress(ManifoldError):
            await call


def _refuse_into_itself(src: Obj, dst_dir: Obj) -> None:
    inside = dst_dir.path.rstrip("/") + "/"
    if src.is_dir and inside.startswith(src.path.rstrip("/") + "/"):
        raise ServerError("the destination folder is a subfolder of the source folder")


def _abandon(call: asyncio.Future[Any] | None) -> None:
    """Stop waiting for ``call``, and let its outcome go unreported: the failure that
    ended the transfer is being raised already."""
    if call is not None and not call.done():
        call.cancel()
    if call is not None:
        call.add_done_callback(_retrieved)


def _retrieved(call: asyncio.Future[Any]) -> None:
    if not call.cancelled():
        call.exception()


DRIVER = SMBDriver
