"""UrlTree (AList): a read-only tree of folders and URLs written out in its options
(``nodes``). ``/d`` of a file redirects to its URL; ``/p`` (or a storage set to proxy)
has this server fetch it through its link pool, which follows a redirect only where
the server's rule allows (the URL's own host, or a public one with the admin's
``link_redirect_public``), as for every storage's links.

With ``head_size`` a file given without a size is asked for it (``HEAD``) when the
storage starts, a few at once, through the same pool; one that does not answer with
a length keeps size 0 and is logged, as in AList.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import posixpath
from datetime import UTC, datetime

import httpx

from manifold.drivers.base import Driver, LinkArgs
from manifold.drivers.url_tree.meta import Addition
from manifold.drivers.url_tree.nodes import Node, build
from manifold.errors import NotAFile, NotAFolder, ObjectNotFound
from manifold.models import Link, Obj

log = logging.getLogger("manifold.drivers")

# URLs asked for their size at once, and seconds each may take.
HEADS_AT_ONCE = 8
HEAD_SECONDS = 10.0


class UrlTreeDriver(Driver[Addition]):
    _root: Node

    async def init(self) -> None:
        root = build(self.options.url_structure)
        if self.options.head_size:
            await self._sized([f for f in root.files() if not f.known_size])
        root.total()
        self._root = root

    async def drop(self) -> None:
        return None

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        node = self._node(dir.path)
        if node.is_file:
            raise NotAFolder()
        return [
            self._obj(child, posixpath.join(dir.path, child.name))
            for child in node.children.values()
        ]

    async def get(self, path: str) -> Obj:
        if path == "/":
            return await self.root_obj()
        return self._obj(self._node(path), path)

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        node = self._node(file.path)
        if not node.is_file:
            raise NotAFile()
        return Link(url=node.url)

    def _node(self, path: str) -> Node:
        node = self._root.find(path or "/")
        if node is None:
            raise ObjectNotFound()
        return node

    def _obj(self, node: Node, path: str) -> Obj:
        if node.modified:
            modified = datetime.fromtimestamp(node.modified, UTC)
        else:
            modified = self.storage.modified or datetime(1970, 1, 1, tzinfo=UTC)
        return Obj(node.name, node.size, not node.is_file, modified, path=path)

    async def _sized(self, files: builtins.list[Node]) -> None:
        """Each file's size from a ``HEAD`` of its URL, a few at once."""
        # Outside a server (a driver's own tests) a client of its own, closed after.
        own = None if self.resources.links else httpx.AsyncClient(trust_env=False)
        client = self.resources.links or own
        assert client is not None
        slots = asyncio.Semaphore(HEADS_AT_ONCE)

        async def ask(node: Node) -> None:
            async with slots:
                node.size = await _head_size(client, node.url)

        try:
            await asyncio.gather(*(ask(node) for node in files))
        finally:
            if own is not None:
                await own.aclose()


async def _head_size(client: httpx.AsyncClient, url: str) -> int:
    """The length a ``HEAD`` of ``url`` answers; 0 (and a line in the log) without one."""
    try:
        response = await client.head(url, follow_redirects=True, timeout=HEAD_SECONDS)
    except Exception as exc:  # any failure leaves the size unknown, as AList's does
        log.warning("url tree: no size for %s: %s", url, type(exc).__name__)
        return 0
    length = response.headers.get("content-length", "")
    if response.status_code >= 300 or not length.isdigit():
        log.warning("url tree: no size for %s: HTTP %s", url, response.status_code)
        return 0
    return int(length)


DRIVER = UrlTreeDriver
