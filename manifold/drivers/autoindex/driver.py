"""AutoIndex (OpenList): a web server's directory listing pages (nginx's ``autoindex``,
Apache's ``mod_autoindex``), mounted read-only from ``url``.

A folder's page is fetched and read (``index``) on each listing; a file is its URL, which
``/d`` redirects to and ``/p`` (and copies) fetch through the server's link pool, ranges
and all. Paths map to URLs by percent-encoding each name below ``url``, which is how
such servers name them. A size the page shows only roughly (``1.5K``) is listed as
shown, and asked for exactly (``HEAD``) when the file is looked up, so downloads and
copies go by the real size, as OpenList asks at each link.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from urllib.parse import quote

import httpx

from manifold.drivers.autoindex.index import Entry, entries
from manifold.drivers.autoindex.meta import Addition
from manifold.drivers.base import Driver, LinkArgs, run_blocking, too_many_entries
from manifold.errors import (
    InvalidRequest,
    NotAFile,
    NotAFolder,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.models import Link, Obj, Storage

# The most a listing page may weigh: nginx spends about 150 bytes an entry.
PAGE_BYTES = 256 * 1024 * 1024
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class AutoIndexDriver(Driver[Addition]):
    def __init__(self, storage: Storage, options: Addition) -> None:
        super().__init__(storage, options)
        self._own_resources = self.resources
        self._ignored: frozenset[str] = frozenset()

    async def init(self) -> None:
        url = self.options.url.strip()
        if "://" not in url:
            url = "https://" + url  # as OpenList completes a bare host
        if not url.startswith(("http://", "https://")):
            raise InvalidRequest("url must be an http:// or https:// address")
        self.options.url = url.rstrip("/") + "/"
        lines = self.options.ignore_file_names.splitlines()
        self._ignored = frozenset(line.strip() for line in lines if line.strip())
        await self.list(await self.root_obj())  # a wrong address fails here, clearly

    async def drop(self) -> None:
        if self.resources is self._own_resources:
            with suppress(Exception):
                await self._own_resources.aclose()

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        if not dir.is_dir:
            raise NotAFolder()
        folder = dir.path or "/"
        return [self._obj(folder, entry) for entry in await self._entries(folder)]

    async def get(self, path: str) -> Obj:
        if path == "/":
            return await self.root_obj()
        folder, name = posixpath.split(path)
        entry = next((e for e in await self._entries(folder) if e.name == name), None)
        if entry is None:
            raise ObjectNotFound()
        obj = self._obj(folder, entry)
        if entry.is_dir or entry.exact:
            return obj
        size = await self._exact_size(self._url(path, False))
        return Obj(obj.name, size, False, obj.modified, path=obj.path)

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        return Link(url=self._url(file.path, False))

    async def _entries(self, folder: str) -> builtins.list[Entry]:
        url = self._url(folder, True)
        page = await self._page(url)
        found = await run_blocking(entries, page, url, self._ignored)
        if len(found) > self.resources.max_listing_entries:
            raise too_many_entries(folder, self.resources.max_listing_entries)
        return found

    async def _page(self, url: str) -> str:
        """The listing page at ``url``, within ``PAGE_BYTES``."""
        with _http_errors():
            async with self.resources.http().stream("GET", url) as response:
                _check(response)
                body = bytearray()
                async for data in response.aiter_bytes():
                    body += data
                    if len(body) > PAGE_BYTES:
                        raise TemporaryFailure(f"the listing page {url} is too big to read")
                encoding = response.encoding or "utf-8"
        return body.decode(encoding, errors="replace")

    async def _exact_size(self, url: str) -> int:
        with _http_errors():
            response = await self.resources.http().head(url)
        _check(response)
        length = response.headers.get("content-length", "")
        if not length.isdigit():
            raise TemporaryFailure(f"the server tells no size of {url}")
        return int(length)

    def _url(self, path: str, folder: bool) -> str:
        inner = quote(path.strip("/"))
        if folder and inner:
            inner += "/"
        return self.options.url + inner

    def _obj(self, folder: str, entry: Entry) -> Obj:
        modified = entry.modified or self.storage.modified or _EPOCH
        path = posixpath.join(folder, entry.name)
        return Obj(entry.name, entry.size, entry.is_dir, modified, path=path)


@contextmanager
def _http_errors() -> Iterator[None]:
    """httpx's failures as the server's errors (a server that does not answer: temporary)."""
    try:
        yield
    except httpx.HTTPError as exc:
        raise TemporaryFailure(f"the index server failed: {type(exc).__name__}") from exc


def _check(response: httpx.Response) -> None:
    status = response.status_code
    if status in (404, 410):
        raise ObjectNotFound()
    if status in (401, 403):
        raise PermissionDenied()
    if status >= 500:
        raise TemporaryFailure(f"the index server answered HTTP {status}")
    if status >= 300:
        raise ServerError(f"the index server answered HTTP {status}")


DRIVER = AutoIndexDriver
