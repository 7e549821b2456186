"""The file tree one path at a time, for every front end (API, WebDAV, FTP, SFTP, S3).

Each operation takes a ``Caller`` that carries its protocol and checks, besides
what the API checks (base path, permission bits, metas, passwords, hide rules),
the protocol's own bits: WebDAV read and manage, FTP/SFTP read and write, as AList
numbers them. The AList batch endpoints keep their own request shapes in
``GuardedReader`` and ``GuardedWriter``; these single-path forms are what a protocol server
maps its verbs onto (``PROPFIND`` → ``list``, ``GET`` → ``open_read``, ``MOVE`` →
``rename``, ``COPY`` → ``copy``, which finishes before it returns).
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from datetime import datetime

import httpx

from manifold.errors import PermissionDenied
from manifold.models import LinkArgs, Obj, Perm
from manifold.paths import split_path
from manifold.services.auth.service import Caller
from manifold.services.fs.read import GuardedReader
from manifold.services.fs.streams import open_range
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
        self, fs: GuardedReader, writer: GuardedWriter, http: httpx.AsyncClient | None = None
    ) -> None:
        self._fs = fs
        self._writer = writer
        self._http = http

    # --- reads --------------------------------------------------------------------

    async def stat(self, caller: Caller, path: str, password: str = "") -> Obj:
        self._protocol_allows(caller, write=False)
        return (await self._fs.get(caller, path, password)).obj

    async def list(self, caller: Caller, path: str, password: str = "") -> builtins.list[Obj]:
        """Every entry of the folder the caller may see (hidden ones left out)."""
        self._protocol_allows(caller, write=False)
        return (await self._fs.list(caller, path, password, 1, 0)).entries

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
        return obj, open_range(link, offset, length, client=self._http)

    # --- writes -------------------------------------------------------------------

    async def mkdir(self, caller: Caller, path: str, password: str = "") -> Obj:
        self._protocol_allows(caller, write=True)
        return await self._writer.mkdir(caller, path, password)

    async def rename(
        self, caller: Caller, src: str, dst: str, overwrite: bool = False, password: str = ""
    ) -> Obj:
        """Give ``src`` the path ``dst``: a rename, a move, or both, touching nothing
        else on the way.

        Into another storage, or a folder of a storage that moves folders key by key
        (S3), it runs as a move task, and returns once the task has ended (a protocol
        answers a MOVE when it is done).
        """
        self._protocol_allows(caller, write=True)
        return await self._writer.move_to(caller, src, dst, overwrite, password)

    async def copy(
        self, caller: Caller, src: str, dst: str, overwrite: bool = False, password: str = ""
    ) -> Obj:
        """Copy ``src`` to the path ``dst`` and return the copy once it is whole."""
        self._protocol_allows(caller, write=True)
        return await self._writer.copy_to(caller, src, dst, overwrite, password)

    async def remove(self, caller: Caller, path: str, password: str = "") -> None:
        self._protocol_allows(caller, write=True)
        folder, name = split_path(path)
        await self._writer.remove(caller, folder, [name], password)

    async def put(
        self,
        caller: Caller,
        path: str,
        stream: AsyncIterator[bytes],
        size: int | None,
        modified: datetime | None = None,
        overwrite: bool = True,
        password: str = "",
    ) -> Obj:
        self._protocol_allows(caller, write=True)
        return await self._writer.put(caller, path, password, stream, size, modified, overwrite)

    @staticmethod
    def _protocol_allows(caller: Caller, write: bool) -> None:
        bits = _PROTOCOL_BITS.get(caller.protocol)
        if bits is None or caller.user.is_admin:
            return
        if not caller.user.can(bits[0]) or (write and not caller.user.can(bits[1])):
            raise PermissionDenied()
