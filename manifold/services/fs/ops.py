"""The file tree one path at a time, for every front end (API, WebDAV, FTP, SFTP, S3).

Each operation takes a ``Caller`` that carries its protocol and checks, besides
what the API checks (base path, permission bits, metas, passwords, hide rules),
the protocol's own bits: WebDAV read and manage, FTP/SFTP read and write, as AList
numbers them. The AList batch endpoints keep their own request shapes in
``GuardedReader`` and ``GuardedWriter``; these single-path forms are what a protocol server
maps its verbs onto (``PROPFIND`` → ``list``, ``GET`` → ``redirect`` then
``open_reader``, ``PUT`` → ``open_writer`` or ``put``, ``MOVE`` → ``rename``, ``COPY`` →
``copy``, which finishes before it returns).

Protocols want exact answers where the JSON API is lenient, so the writes take
``strict``: removing a missing path is ``ObjectNotFound``, making an existing folder
``ObjectExists``, and writing under a missing folder ``ParentNotFound`` (instead of
making it, as AList's API does). ``stat`` looks up one object, never its folder;
``etag`` names an object's version.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Awaitable
from datetime import datetime

from manifold.errors import InvalidRequest, NotAFile, PermissionDenied
from manifold.models import DiskUsage, LinkArgs, Obj, Perm
from manifold.paths import split_path
from manifold.services.auth.service import Caller
from manifold.services.fs.downloads import DownloadService
from manifold.services.fs.handles import ReadHandle, WriteHandle
from manifold.services.fs.read import GuardedReader
from manifold.services.fs.rules import Replace
from manifold.services.fs.streams import open_range
from manifold.services.fs.tree import Place
from manifold.services.fs.write import GuardedWriter

# (read bit, write bit) of each protocol that has its own; the API has none.
_PROTOCOL_BITS: dict[str, tuple[Perm, Perm]] = {
    "webdav": (Perm.WEBDAV_READ, Perm.WEBDAV_MANAGE),
    "ftp": (Perm.FTP_READ, Perm.FTP_MANAGE),
    "sftp": (Perm.FTP_READ, Perm.FTP_MANAGE),
}


class GuardedOps:
    """One path at a time for a caller, with the protocol's own bits checked too."""

    def __init__(
        self,
        fs: GuardedReader,
        writer: GuardedWriter,
        downloads: DownloadService | None = None,
    ) -> None:
        self._fs = fs
        self._writer = writer
        # The download rules ``/d`` and ``/p`` follow too (``redirect``).
        self.downloads = downloads

    # --- reads --------------------------------------------------------------------

    async def stat(self, caller: Caller, path: str, password: str = "") -> Obj:
        """The object at ``path``: one lookup (the driver's ``get``), never a listing
        of its folder where the driver has ``get``."""
        self._protocol_allows(caller, write=False)
        return (await self._fs.stat(caller, path, password))[0]

    async def list(self, caller: Caller, path: str, password: str = "") -> builtins.list[Obj]:
        """Every entry of the folder the caller may see (hidden ones left out)."""
        self._protocol_allows(caller, write=False)
        return (await self._fs.list(caller, path, password, 1, 0)).entries

    async def is_empty(self, caller: Caller, path: str, password: str = "") -> bool:
        """Whether the folder holds nothing at all, hidden entries included: SFTP's
        ``rmdir`` removes a folder only when it is empty, and one that merely looks
        empty to the caller is not, nor one holding entries left out of listings for
        their names (``vfs.names``)."""
        self._protocol_allows(caller, write=False)
        listing = await self._fs.list(caller, path, password, 1, 0)
        if listing.entries:
            return False
        objs, _ = await self._fs.list_path(listing.path)
        return not objs and not self._fs.tree.left_out(listing.path)

    async def open_read(
        self,
        caller: Caller,
        path: str,
        offset: int = 0,
        length: int | None = None,
        password: str = "",
    ) -> tuple[Obj, AsyncIterator[bytes]]:
        """The file at ``path`` and its bytes ``[offset, offset + length)``."""
        self._protocol_allows(caller, write=False)
        found = await self._fs.get(caller, path, password)
        obj, link, _ = await self._fs.link(found.path, LinkArgs(ip=caller.client))
        return obj, open_range(link, offset, length, client=self._fs.tree.pool_for(link))

    async def open_reader(self, caller: Caller, path: str, password: str = "") -> ReadHandle:
        """The file at ``path``, resolved and linked once, to read at any offset until
        the handle is closed (``ReadHandle``)."""
        self._protocol_allows(caller, write=False)
        _, full = await self._fs.stat(caller, path, password)
        obj, link, _ = await self._fs.link(full, LinkArgs(ip=caller.client))
        return await ReadHandle.open(obj, link, self._fs.tree.pool_for(link))

    async def space(self, caller: Caller, path: str, password: str = "") -> DiskUsage:
        """The space of the storage holding ``path``, once the caller may see ``path``
        (SFTP's ``df``): what its back end reports for the storage as a whole
        (``Driver.details``), never anything of the host the server runs on.
        ``NotSupported`` where the back end does not know it, or no storage holds
        ``path`` (a folder of mount points)."""
        self._protocol_allows(caller, write=False)
        _, full = await self._fs.stat(caller, path, password)
        return await self._fs.tree.space(full)

    async def redirect(self, caller: Caller, path: str, password: str = "") -> str | None:
        """Where to send a client for the file's bytes, by the storage's
        ``webdav_policy`` (the rules ``/d`` follows, ``DownloadService.way``): the
        driver's URL, the download proxy's signed URL, or None to stream them here
        (``open_reader``)."""
        self._protocol_allows(caller, write=False)
        obj, full = await self._fs.stat(caller, path, password)
        if obj.is_dir:
            raise NotAFile()
        place = self._fs.tree.find(full)
        if self.downloads is None or place is None:
            return None
        target = self.downloads.target_at(place)
        way = self.downloads.way(target, "dav")
        if way == "proxy_url":
            return self.downloads.down_proxy_url(target)
        if way == "stream":
            return None
        _, link = await self._fs.link_at(place, LinkArgs(ip=caller.client, redirect=True))
        return link.url or None

    # --- writes -------------------------------------------------------------------

    async def mkdir(
        self, caller: Caller, path: str, password: str = "", *, strict: bool = False
    ) -> Obj:
        self._protocol_allows(caller, write=True)
        return await self._writer.mkdir(caller, path, password, strict=strict)

    async def rename(
        self,
        caller: Caller,
        src: str,
        dst: str,
        overwrite: bool = False,
        password: str = "",
        *,
        strict: bool = False,
        folders: bool = False,
    ) -> Obj:
        """Give ``src`` the exact path ``dst``: a rename, a move, or both, touching
        nothing else on the way. ``overwrite`` replaces a file by a file, and with
        ``folders`` (WebDAV's ``Overwrite: T``) anything by anything, as the rule
        book (``services.fs.rules``) allows.

        Into another storage, or a folder of a storage that moves folders key by key
        (S3), it runs as a move task, and returns once the task has ended (a protocol
        answers a MOVE when it is done).
        """
        self._protocol_allows(caller, write=True)
        return await self._writer.move_to(
            caller, src, dst, Replace.of(overwrite, folders), password, strict=strict
        )

    async def copy(
        self,
        caller: Caller,
        src: str,
        dst: str,
        overwrite: bool = False,
        password: str = "",
        *,
        strict: bool = False,
        folders: bool = False,
        shallow: bool = False,
        source: Caller | None = None,
    ) -> Obj:
        """Copy ``src`` to the exact path ``dst`` and return the copy once it is whole;
        ``overwrite`` and ``folders`` as for ``rename``. ``shallow`` (WebDAV's COPY of a
        folder with ``Depth: 0``) makes the folder without its contents. ``source``:
        the caller held in another root (``Caller.rooted``) that names ``src``, as S3
        copies from one bucket into another."""
        self._protocol_allows(caller, write=True)
        replace = Replace.of(overwrite, folders)
        return await self._writer.copy_to(
            caller, src, dst, replace, password, strict=strict, shallow=shallow, source=source
        )

    async def remove(
        self, caller: Caller, path: str, password: str = "", *, strict: bool = False
    ) -> None:
        self._protocol_allows(caller, write=True)
        folder, name = split_path(path)
        await self._writer.remove(caller, folder, [name], password, strict=strict)

    async def put(
        self,
        caller: Caller,
        path: str,
        stream: AsyncIterator[bytes],
        size: int | None,
        modified: datetime | None = None,
        overwrite: bool = True,
        password: str = "",
        *,
        strict: bool = False,
    ) -> Obj:
        self._protocol_allows(caller, write=True)
        return await self._writer.put(
            caller, path, password, stream, size, modified, overwrite, strict=strict
        )

    async def check_put(self, caller: Caller, path: str, password: str = "") -> None:
        """Refuse now what ``put`` (overwriting) would refuse at ``path``: a write that
        arrives in parts (S3 multipart) is checked as it starts, not only at the end."""
        self._protocol_allows(caller, write=True)
        await self._writer.upload_target(caller, path, password, overwrite=True)

    async def check_change(self, caller: Caller, path: str, password: str = "") -> None:
        """Refuse a change of ``path`` that writes no bytes (WebDAV's PROPPATCH and
        LOCK) unless the caller may write there: the protocol's manage bit and the
        write permission a write into its folder needs (``GuardedWriter.check_change``)."""
        self._protocol_allows(caller, write=True)
        await self._writer.check_change(caller, path, password)

    async def open_writer(
        self,
        caller: Caller,
        path: str,
        password: str = "",
        *,
        overwrite: bool = True,
        append: bool = False,
        offset: int = 0,
        strict: bool = False,
        modified: datetime | None = None,
    ) -> WriteHandle:
        """A file at ``path`` written block by block, in place once the handle closes.

        ``append`` (FTP's APPE) starts after the existing file's bytes, ``offset``
        (FTP's REST before STOR) after its first ``offset`` bytes; either way the
        storage receives those bytes first, read through the file's link, and the
        old file stays whole until the new one replaces it.
        """
        self._protocol_allows(caller, write=True)
        if offset < 0:
            raise InvalidRequest("an upload starts at byte 0 or later")
        place, _ = await self._writer.upload_target(
            caller, path, password, overwrite, strict=strict
        )
        start, prefix = await self._kept_bytes(caller, place, append, offset)

        def store(stream: AsyncIterator[bytes]) -> Awaitable[Obj]:
            return self._writer.store(place, stream, None, modified, overwrite)

        return WriteHandle(store, start, prefix)

    async def _kept_bytes(
        self, caller: Caller, place: Place, append: bool, offset: int
    ) -> tuple[int, AsyncIterator[bytes] | None]:
        """Where a write that keeps part of the existing file starts, and those bytes."""
        if not append and not offset:
            return 0, None
        existing = await self._writer.exists(place)
        if existing is None or existing.is_dir:
            if offset:
                raise InvalidRequest(f"cannot resume at byte {offset}: no file to resume")
            return 0, None
        start = existing.size if append else offset
        if start > existing.size:
            raise InvalidRequest(
                f"cannot resume at byte {offset}: the file holds {existing.size} bytes"
            )
        if not start:
            return 0, None
        _, link, _ = await self._fs.link(place.path, LinkArgs(ip=caller.client))
        return start, open_range(link, 0, start, client=self._fs.tree.pool_for(link))

    @staticmethod
    def _protocol_allows(caller: Caller, write: bool) -> None:
        """``PermissionDenied`` unless ``protocol_allows``."""
        if not protocol_allows(caller, write):
            raise PermissionDenied()


def protocol_allows(caller: Caller, write: bool) -> bool:
    """Whether the caller's protocol bits let it read, or with ``write`` change, the
    tree: the read bit (WebDAV 8, FTP/SFTP 10), and for a change the manage bit too
    (9, 11).

    Admins need the bits as everyone does, as in AList since v3.41: a fresh admin
    (0x30FF) has none of them, and one with WebDAV read but not manage reads over
    WebDAV and changes nothing. Only the admin token (WebDAV's ``Bearer``, the one
    protocol login that carries a token) passes without them, as AList lets it in
    without looking at any bit.
    """
    bits = _PROTOCOL_BITS.get(caller.protocol)
    if bits is None or caller.token:
        return True
    user = caller.user
    return user.can(bits[0]) and (not write or user.can(bits[1]))


def etag(obj: Obj) -> str:
    """An HTTP entity tag for ``obj``, quoted: the same while the object's size and
    time stay the same, another once either changes."""
    stamp = int(obj.modified.timestamp() * 1_000_000)
    return f'"{stamp:x}-{obj.size:x}"'
