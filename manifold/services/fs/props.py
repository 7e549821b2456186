"""WebDAV dead properties: what clients store on a path with PROPPATCH.

They live in a ``PropStore`` (the database's table in every setup so far) and are
read from it on every request, never cached in this process: another instance on
the same database sees a change at once. A listing costs one read for the folder
and its entries, which is small beside the listing (measured with bench_dav's warm
PROPFIND of 10,000 entries). They follow their object: moved, copied and removed
with it, below folders too.

The same rows hold what the server itself keeps on an object (``notes.ObjectNotes``),
under names starting with ``INTERNAL``: no WebDAV client can give such a name (an XML
name with a prefix arrives as ``{namespace}local``), and they are never shown as
properties; they move, copy and go with their object as the properties do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from manifold.errors import PermissionDenied
from manifold.paths import split_path
from manifold.services.auth.service import Caller
from manifold.services.fs.ops import protocol_allows

Row = tuple[str, str, str]  # path, name, value (the property's XML, as sent)
INTERNAL = "manifold:"
Props = Mapping[str, str]
_NONE: Props = {}


class PropStore(Protocol):
    """What dead properties need of a table of (path, name, value) rows; paths are
    full virtual paths. ``DavPropRepo`` is the database's."""

    async def at(self, path: str) -> list[Row]:
        """The rows of ``path`` itself."""

    async def below(self, path: str) -> list[Row]:
        """The rows of ``path`` and of every path below it."""

    async def named(self, name: str, paths: Sequence[str]) -> list[Row]:
        """The rows called ``name`` of any of ``paths``."""

    async def replace(self, removed: Iterable[tuple[str, str]], added: Iterable[Row]) -> None:
        """Delete the (path, name) rows ``removed`` and insert ``added``, all at once."""


class DeadProps:
    def __init__(self, store: PropStore) -> None:
        self._store = store

    async def of(self, path: str) -> Props:
        return _grouped(await self._store.at(path)).get(path, _NONE)

    async def listing(self, folder: str) -> dict[str, Props]:
        """The properties of ``folder`` and of its entries, by path (paths without
        any left out)."""
        rows = await self._store.below(folder)
        return {
            path: props
            for path, props in _grouped(rows).items()
            if path == folder or split_path(path)[0] == folder
        }

    @staticmethod
    def require_manage(caller: Caller) -> None:
        """Setting properties is managing: WebDAV's manage bit (9), as for every other
        WebDAV write, checked as ``GuardedOps`` checks it (the WebDAV server asks
        ``GuardedOps.check_change`` first, which checks the write permission too)."""
        if not protocol_allows(caller, write=True):
            raise PermissionDenied()

    async def change(
        self, caller: Caller, path: str, changes: list[tuple[str, str | None]]
    ) -> None:
        """Set (value) or remove (None) each named property of ``path``, in order."""
        self.require_manage(caller)
        final = dict(changes)  # the last change of a name wins
        added = [(path, name, value) for name, value in final.items() if value is not None]
        await self._store.replace([(path, name) for name in final], added)

    async def move(self, src: str, dst: str) -> None:
        moved = await self._store.below(src)
        replaced = await self._store.below(dst)
        if not moved and not replaced:
            return
        rows = [(dst + p[len(src) :], n, v) for p, n, v in moved]
        await self._store.replace([(p, n) for p, n, _ in moved + replaced], rows)

    async def copy(self, src: str, dst: str, deep: bool = True) -> None:
        """Give ``dst`` (and with ``deep`` what is below it) the properties of ``src``,
        in place of those it had."""
        copied = await (self._store.below(src) if deep else self._store.at(src))
        replaced = await self._store.below(dst)
        if not copied and not replaced:
            return
        rows = [(dst + p[len(src) :], n, v) for p, n, v in copied]
        await self._store.replace([(p, n) for p, n, _ in replaced], rows)

    async def remove(self, path: str) -> None:
        """Forget the properties of ``path`` and of everything below it."""
        gone = await self._store.below(path)
        if gone:
            await self._store.replace([(p, n) for p, n, _ in gone], [])


def _grouped(rows: list[Row]) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for path, name, value in rows:
        if not name.startswith(INTERNAL):
            found.setdefault(path, {})[name] = value
    return found
