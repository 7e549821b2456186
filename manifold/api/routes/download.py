"""Downloads: ``/d/<path>`` and ``/p/<path>``, authorised by a sign, not a login.

``/d`` redirects to a driver's URL, or streams the file when the storage must be
proxied; ``/p`` always streams and is refused when proxying is not allowed
(``services.fs.downloads`` holds the rules). A local file is served with ranges and
preconditions (``api.file_response``), a URL is relayed (``api.upstream``).

Errors answer a real HTTP status (so download tools never save an error as the
file) with AList's envelope as the body (so clients that read it find AList's
message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from urllib.parse import quote

from fastapi import Request
from starlette.responses import RedirectResponse, Response

from manifold.api.deps import ServicesDep, client_address
from manifold.api.envelope import error
from manifold.api.file_response import LocalFileResponse
from manifold.api.reader_response import ReaderResponse
from manifold.api.upstream import open_upstream
from manifold.container import Services
from manifold.errors import (
    BadRequest,
    Forbidden,
    ManifoldError,
    NotFound,
    ObjectNotFound,
    ShareInvalid,
    ShareNotFound,
    StorageNotFound,
    TooManyAttempts,
    Unauthorized,
    UpstreamStatus,
)
from manifold.models import Link, LinkArgs, Obj
from manifold.paths import clean_path
from manifold.services.fs.downloads import DownloadService, Target, query_pairs
from manifold.services.fs.streams import open_range

# HTTP statuses of /d and /p errors, looked up along the error's class hierarchy.
_STATUS: dict[type[ManifoldError], int] = {
    BadRequest: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    ObjectNotFound: 404,
    StorageNotFound: 404,
    ShareNotFound: 404,
    ShareInvalid: 410,
    TooManyAttempts: 429,
}
_NO_CACHE = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "max-age=0, no-cache, no-store, must-revalidate",
}


def _status(exc: ManifoldError) -> int:
    if isinstance(exc, UpstreamStatus):
        return exc.status  # the relayed URL's own answer
    for cls in type(exc).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return 500


def _plain(char: str) -> bool:
    return char.isascii() and char.isprintable() and char not in '"\\'


def content_disposition(name: str) -> str:
    fallback = "".join(c if _plain(c) else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _downloads(request: Request, services: Services) -> DownloadService:
    """The app's one download service, made on its first download."""
    state = request.app.state
    downloads: DownloadService | None = getattr(state, "downloads", None)
    if downloads is None:
        downloads = services.ops.downloads or DownloadService(
            services.reader, services.metas, services.settings, services.signer
        )
        state.downloads = downloads
    return downloads


async def _serve(request: Request, services: Services, path: str, redirect: bool) -> Response:
    downloads = _downloads(request, services)
    target = downloads.resolve(clean_path(path), request.query_params.get("sign", ""))
    way = downloads.way(target, "d" if redirect else "p", "d" not in request.query_params)
    if way == "link":
        return await _redirect(request, services, downloads, target)
    if way == "proxy_url":
        external = downloads.down_proxy_url(target)
        return RedirectResponse(external, status_code=302, headers=_NO_CACHE)
    return await _proxy(request, services, downloads, target)


async def _redirect(
    request: Request, services: Services, downloads: DownloadService, target: Target
) -> Response:
    args = LinkArgs(
        ip=client_address(request, services.config.trusted_proxies),
        headers=dict(request.headers),
        type=request.query_params.get("type", ""),
        redirect=True,
    )
    obj, link = await downloads.link(target, args)
    if link.url:
        url = downloads.direct_link_url(link.url, query_pairs(request.scope["query_string"]))
        return RedirectResponse(url, status_code=302, headers=_NO_CACHE)
    if link.reader is not None:
        return await _read(request, obj, link)
    return await _local_file(obj.name, link)


async def _proxy(
    request: Request, services: Services, downloads: DownloadService, target: Target
) -> Response:
    args = LinkArgs(headers=dict(request.headers), type=request.query_params.get("type", ""))
    obj, link = await downloads.link(target, args)
    if link.file_path:
        return await _local_file(obj.name, link)
    if link.reader is not None:
        return await _read(request, obj, link)
    if not link.url:
        raise ObjectNotFound("link has neither a file, a URL nor a reader")
    url = downloads.direct_link_url(link.url, query_pairs(request.scope["query_string"]))
    if target.config.proxy_range_option and target.storage.proxy_range:
        # ``proxy_range``: this server answers ranges itself, reading the upstream a
        # range at a time, for an upstream that ignores or mishandles them.
        return await _read(request, obj, _ranged(replace(link, url=url), services))
    headers = downloads.upstream_headers(request.headers.items(), link.headers)
    client = services.tree.pool_for(link) or services.http
    own = [("Content-Disposition", content_disposition(obj.name))]
    return await open_upstream(client, request.method, url, headers, link.idle_timeout, own)


def _ranged(link: Link, services: Services) -> Link:
    """A reader over ``link``'s URL (sent with its headers): the response's own headers
    are this server's, never the upstream's."""
    client = services.tree.pool_for(link)

    def reader(offset: int, length: int | None) -> AsyncIterator[bytes]:
        return open_range(link, offset, length, client=client)

    return Link(reader=reader)


async def _read(request: Request, obj: Obj, link: Link) -> Response:
    headers = {"Content-Disposition": content_disposition(obj.name), **link.headers}
    return await ReaderResponse.open(
        link, obj, headers, request.headers, request.method, request.scope
    )


async def _local_file(name: str, link: Link) -> LocalFileResponse:
    headers = {"Content-Disposition": content_disposition(name), **link.headers}
    return await LocalFileResponse.open(link.file_path, name, headers)


def _guarded(redirect: bool) -> Callable[[str, Request, Services], Awaitable[Response]]:
    async def handler(path: str, request: Request, services: ServicesDep) -> Response:
        try:
            return await _serve(request, services, path, redirect)
        except ManifoldError as exc:
            # A download error never repeats the requested path (AList's "rawPath: ..."):
            # download tools save or show these bodies as they come.
            message = services.settings.mask_private(exc.message).split("; rawPath: ")[0]
            return error(exc.code, message, status=_status(exc))

    return handler


download = _guarded(redirect=True)
proxy = _guarded(redirect=False)


async def shared(
    share_id: str, request: Request, services: ServicesDep, path: str = ""
) -> Response:
    """``/sd/<id>/<path>``: a shared file, always streamed by this server (a storage's
    own URL would outlive the share). A GET that starts at the file's first byte takes
    one of the share's accesses; a HEAD or a later range takes none."""
    try:
        query = request.query_params
        client = client_address(request, services.config.trusted_proxies)
        counts = request.method == "GET" and _from_start(request.headers.get("range", ""))
        _, full = await services.shares.download(
            share_id, "/" + path, query.get("pwd", ""), client, counts
        )
        downloads = _downloads(request, services)
        target = downloads.target_at(await services.reader.storage_place(full))
        return await _proxy(request, services, downloads, target)
    except ManifoldError as exc:
        return error(exc.code, exc.message, status=_status(exc))


def _from_start(range_header: str) -> bool:
    """Whether a request with this Range header reads from the first byte."""
    spec = range_header.strip().lower()
    return not spec or spec.startswith("bytes=0-")
