"""OPTIONS, PROPFIND, GET and HEAD."""

from __future__ import annotations

from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from urllib.parse import quote

from starlette.responses import Response

from manifold.errors import ManifoldError
from manifold.models import Obj
from manifold.protocols.webdav import locking, render
from manifold.protocols.webdav.exchange import Exchange, Shared, StreamBody
from manifold.protocols.webdav.statuses import DavError
from manifold.protocols.webdav.xmlbody import DAV, PropfindBody, propfind
from manifold.services.fs.ops import etag
from manifold.services.fs.props import Props

XML = "application/xml; charset=utf-8"
MISSING_ALLOW = "OPTIONS, LOCK, PUT, MKCOL"
DIR_ALLOW = "OPTIONS, LOCK, DELETE, PROPPATCH, COPY, MOVE, UNLOCK, PROPFIND"
FILE_ALLOW = DIR_ALLOW + ", GET, HEAD, POST, PUT"
_HREF_SAFE = "-._~"
_NONE: Props = {}
Dead = Mapping[str, Props]  # dead properties by full path
# A redirect's target is a link that expires (or a signed proxy URL): never kept.
NO_CACHE = "max-age=0, no-cache, no-store, must-revalidate"


async def options(dav: Shared, ex: Exchange) -> Response:
    try:
        obj: Obj | None = await dav.ops.stat(ex.caller, ex.path)
    except ManifoldError:
        obj = None
    allow = MISSING_ALLOW if obj is None else DIR_ALLOW if obj.is_dir else FILE_ALLOW
    headers = {"DAV": "1, 2", "MS-Author-Via": "DAV", "Allow": allow}
    return Response(status_code=200, headers=headers)


def bare_options() -> Response:
    """OPTIONS for a client that cannot look at the path: what the server speaks."""
    headers = {"DAV": "1, 2", "MS-Author-Via": "DAV", "Allow": FILE_ALLOW}
    return Response(status_code=200, headers=headers)


async def propfind_(dav: Shared, ex: Exchange) -> Response:
    depth = ex.header("depth", "1").strip().lower()
    if depth not in ("0", "1"):
        raise DavError(403, "propfind-finite-depth")
    asked = propfind(await ex.body())
    obj = await dav.ops.stat(ex.caller, ex.path)
    listed = depth == "1" and obj.is_dir
    dead = await dav.props.listing(ex.full) if listed else {ex.full: await dav.props.of(ex.full)}
    href = dav.hrefs.href(ex.path, obj.is_dir)
    body = render.HEAD + (await _response(dav, ex, asked, href, obj, ex.full, dead)).encode()
    if listed:
        body += await _listing(dav, ex, asked, dead)
    return Response(body + render.TAIL, 207, media_type=XML)


async def _listing(dav: Shared, ex: Exchange, asked: PropfindBody, dead: Dead) -> bytes:
    entries = await dav.ops.list(ex.caller, ex.path)
    folder_href = dav.hrefs.folder_href(ex.path)
    folder = ex.full.rstrip("/") + "/"
    if asked.mode == "prop" and DAV + "lockdiscovery" in asked.names:
        parts = [
            await _response(dav, ex, asked, _entry_href(folder_href, o), o, folder + o.name, dead)
            for o in entries
        ]
        return "".join(parts).encode()
    # The properties read are part of the key: a change (from any instance) renders anew.
    key = (asked.mode, asked.names, folder, folder_href, _frozen(dead))
    return dav.rendered.derive(
        key, entries, lambda: _render_all(asked, folder_href, folder, entries, dead), len
    )


def _frozen(dead: Dead) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    return tuple(sorted((path, tuple(sorted(props.items()))) for path, props in dead.items()))


def _render_all(
    asked: PropfindBody, folder_href: str, folder: str, entries: list[Obj], dead: Dead
) -> bytes:
    def props(obj: Obj) -> Props:
        return dead.get(folder + obj.name, _NONE)

    if asked.mode == "allprop":
        parts = [render.allprop(_entry_href(folder_href, o), o, props(o)) for o in entries]
    elif asked.mode == "propname":
        parts = [render.propname(_entry_href(folder_href, o), o, props(o)) for o in entries]
    else:
        names = asked.names
        parts = [render.named(_entry_href(folder_href, o), o, names, props(o)) for o in entries]
    return "".join(parts).encode()


def _entry_href(folder_href: str, obj: Obj) -> str:
    name = quote(obj.name, safe=_HREF_SAFE)
    return folder_href + name + "/" if obj.is_dir else folder_href + name


async def _response(
    dav: Shared, ex: Exchange, asked: PropfindBody, href: str, obj: Obj, full: str, dead: Dead
) -> str:
    own = dead.get(full, _NONE)
    if asked.mode == "allprop":
        return render.allprop(href, obj, own)
    if asked.mode == "propname":
        return render.propname(href, obj, own)
    discovery = None
    if DAV + "lockdiscovery" in asked.names:
        discovery = await locking.discovery(dav, ex, full)
    return render.named(href, obj, asked.names, own, discovery)


async def get(dav: Shared, ex: Exchange) -> Response:
    """A file's bytes, or a redirect where the storage's ``webdav_policy`` sends
    clients elsewhere (``GuardedOps.redirect``)."""
    url = await dav.ops.redirect(ex.caller, ex.path)
    if url is not None:
        return Response(status_code=302, headers={"Location": url, "Cache-Control": NO_CACHE})
    handle = await dav.ops.open_reader(ex.caller, ex.path)
    status, headers, (start, length) = _answer(ex, handle.obj)
    if status not in (200, 206):
        await handle.aclose()
        return Response(status_code=status, headers=headers)
    return StreamBody(handle.stream(start, length), status, headers, handle.aclose)


async def head(dav: Shared, ex: Exchange) -> Response:
    """GET's headers, answered here whatever the policy, as AList answers HEAD: a
    driver's URL may be signed for GET alone (S3's presigned ones), so a HEAD sent
    after a redirect to it would be refused."""
    obj = await dav.ops.stat(ex.caller, ex.path)
    if obj.is_dir:
        return Response(status_code=200, headers={"Content-Type": "text/html"})
    status, headers, _ = _answer(ex, obj)
    return Response(status_code=status, headers=headers)


def _answer(ex: Exchange, obj: Obj) -> tuple[int, dict[str, str], tuple[int, int]]:
    """The status and headers of a GET or HEAD of ``obj``, and which bytes it sends
    (first, length)."""
    tag = etag(obj)
    headers = {
        "ETag": tag,
        "Last-Modified": render.http_date(obj.modified),
        "Accept-Ranges": "bytes",
        "Content-Type": render.content_type(obj.name),
    }
    if _not_modified(ex, tag, obj):
        return 304, headers, (0, 0)
    start, length, status = _range(ex, tag, obj)
    if status == 416:
        return 416, {"Content-Range": f"bytes */{obj.size}"}, (0, 0)
    if status == 206:
        headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{obj.size}"
    headers["Content-Length"] = str(length)
    return status, headers, (start, length)


def _not_modified(ex: Exchange, tag: str, obj: Obj) -> bool:
    none_match = ex.header("if-none-match")
    if none_match:
        tags = [t.strip().removeprefix("W/") for t in none_match.split(",")]
        return "*" in tags or tag in tags
    since = ex.header("if-modified-since")
    if since:
        try:
            when = parsedate_to_datetime(since)
        except (TypeError, ValueError):
            return False
        return int(obj.modified.timestamp()) <= int(when.timestamp())
    return False


def _range(ex: Exchange, tag: str, obj: Obj) -> tuple[int, int, int]:
    """(first byte, length, status) of what to send: the whole file (200), one range
    of it (206) or nothing (416). Several ranges get the whole file."""
    size = obj.size
    header = ex.header("range").strip()
    if_range = ex.header("if-range").strip()
    if not header.lower().startswith("bytes=") or "," in header or (if_range and if_range != tag):
        return 0, size, 200
    first, _, last = header[6:].strip().partition("-")
    try:
        if not first:
            length = min(int(last), size)
            if length <= 0:
                return 0, 0, 416
            return size - length, length, 206
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        return 0, size, 200
    if start >= size or start < 0:
        return 0, 0, 416
    if end < start:
        return 0, size, 200
    return start, end - start + 1, 206
