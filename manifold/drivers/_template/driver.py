"""The template's driver: the four mandatory methods, written against a stand-in for the
back end's library (``client``, typed ``Any``) that a real driver replaces with its own.
Import the library at the top of this module: where it is missing, the registry lists
the driver as unavailable, with the import error as the reason.

Optional methods are declared by overriding them; their contracts are the docstrings in
``manifold.drivers.base.Driver``: ``get``, ``make_dir``, ``move``, ``rename``, ``copy``,
``remove``, ``put`` (one ``Upload``; nothing visible at the destination until every
byte has arrived), ``other``, ``fingerprint``, ``details``. The conformance suite
(``manifold.testing.conformance``) checks each one the driver declares.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

from manifold.drivers.base import Driver, ErrorTable, LinkArgs, translating
from manifold.errors import (
    NotAFile,
    NotSupported,
    ObjectNotFound,
    PermissionDenied,
    TemporaryFailure,
)
from manifold.models import Link, Obj

from .meta import Addition  # relative: a copy of the folder works unchanged

# The library's exceptions onto ``manifold.errors``: the most specific class wins, and
# one the table leaves out passes through as a server error.
ERRORS: ErrorTable = {
    FileNotFoundError: ObjectNotFound,
    PermissionError: PermissionDenied,
    ConnectionError: TemporaryFailure,
    TimeoutError: TemporaryFailure,
}

CHUNK = 1 << 20


class TemplateDriver(Driver[Addition]):
    _client: Any = None

    async def init(self) -> None:
        # Blocking library calls go through ``self.run_blocking`` (this storage's own
        # threads) inside ``translating``; what ``init`` raises becomes the status.
        with translating(ERRORS):
            self._client = await self.run_blocking(_connect, self.options)

    async def drop(self) -> None:
        # Never raises, and a second call finds nothing to close.
        client, self._client = self._client, None
        if client is not None:
            with suppress(Exception):
                await self.run_blocking(client.close)

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        # ``Obj.path`` is this driver's own handle on an object (here the back end's
        # path): callers pass back the objects it returned and never build one.
        with translating(ERRORS):
            entries = await self.run_blocking(self._client.listdir, dir.path)
        return [
            Obj(e.name, e.size, e.is_dir, e.modified, path=posixpath.join(dir.path, e.name))
            for e in entries
        ]

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        # A back end with URLs returns ``Link(url=..., headers=...)``; this one has none,
        # so the server reads the file through a range reader (see ``Driver.link``).
        if file.is_dir:
            raise NotAFile()
        return Link(reader=lambda offset, length: self._read(file.path, offset, length))

    async def _read(self, path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
        with translating(ERRORS):
            handle = await self.run_blocking(self._client.open, path, offset)
        try:
            while length is None or length > 0:
                want = CHUNK if length is None else min(CHUNK, length)
                with translating(ERRORS):
                    data = await self.run_blocking(handle.read, want)
                if not data:
                    return
                length = None if length is None else length - len(data)
                yield data
        finally:  # also when the reader is closed early: the connection is released
            await self.run_blocking(handle.close)


def _connect(options: Addition) -> Any:
    """Connect and log in with the back end's library; replace with the real call."""
    raise NotSupported(f"no library to connect to {options.address} with")


DRIVER = TemplateDriver
