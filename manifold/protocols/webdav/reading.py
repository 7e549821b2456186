"""OPTIONS, PROPFIND, GET and HEAD."""

from __future__ import annotations

from email.utils import parsedate_to_datetime
from urllib.parse import quote

from starlette.responses import Response

from manifold.errors import ManifoldError
from manifold.models import Obj
from manifold.protocols.webdav import locking, render
from manifold.protocols.webdav.exchange import Exchange, Shared, StreamBody
from manifold.protocols.webdav.statuses import DavError
from manifold.protocols.webdav.xmlbody import DAV, PropfindBody, propfind

XML = "application/xml; charset=utf-8"
MISSING_ALLOW = "OPTIONS, LOCK, PUT, MKCOL"
DIR_ALLOW = "OPTIONS, LOCK, DELETE, PROPPATCH, COPY, MOVE, UNLOCK, PROPFIND"
FILE_ALLOW = DIR_ALLOW + ", GET, HEAD, POST, PUT"
_HREF_SAFE = "-._~"


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
    parts = [await _response(dav, ex, asked, dav.hrefs.href(ex.path, obj.is_dir), obj, ex.full)]
    body = render.HEAD + "".join(parts).encode()
    if depth == "1" and obj.is_dir:
        body += await _listing(dav, ex, asked)
    return Response(body + render.TAIL, 207, media_type=XML)


async def _listing(dav: Shared, ex: Exchange, asked: PropfindBody) -> bytes:
    entries = await dav.ops.list(ex.caller, ex.path)
    folder_href = dav.hrefs.folder_href(ex.path)
    folder = ex.full.rstrip("/") + "/"
    if asked.mode == "prop" and DAV + "lockdiscovery" in asked.names:
        parts = [
            await _response(dav, ex, asked, _entry_href(folder_href, o), o, folder + o.name)
            for o in entries
        ]
        return "".join(parts).encode()
    key = (asked.mode, asked.names, folder, folder_href, dav.props.generation)
    return dav.rendered.derive(
        key, entries, lambda: _render_all(dav, asked, folder_href, folder, entries), len
    )


def _render_all(
    dav: Shared, asked: PropfindBody, folder_href: str, folder: str, entries: list[Obj]
) -> bytes:
    props = dav.props.of
    if asked.mode == "allprop":
        parts = [
            render.allprop(_entry_href(folder_href, o), o, props(folder + o.name)) for o in entries
        ]
    elif asked.mode == "propname":
        parts = [
            render.propname(_entry_href(folder_href, o), o, props(folder + o.name)) for o in entries
        ]
    else:
        names = asked.names
        parts = [
            render.named(_entry_href(folder_href, o), o, names, props(folder + o.name))
            for o in entries
        ]
    return "".join(parts).encode()


def _entry_href(folder_href: str, obj: Obj) -> str:
    name = quote(obj.name, safe=_HREF_SAFE)
    return folder_href + name + "/" if obj.is_dir else folder_href + name


async def _response(
    dav: Shared, ex: Exchange, asked: PropfindBody, href: str, obj: Obj, full: str
) -> str:
    dead = dav.props.of(full)
    if asked.mode == "allprop":
        return render.allprop(href, obj, dead)
    if asked.mode == "propname":
        return render.propname(href, obj, dead)
    discovery = None
    if DAV + "lockdiscovery" in asked.names:
        discovery = await locking.discovery(dav, ex, full)
    return render.named(href, obj, asked.names, dead, discovery)


async def get(dav: Shared, ex: Exchange, head: bool = False) -> Response:
    obj = await dav.ops.stat(ex.caller, ex.path)
    if obj.is_dir:
        if head:
            return Response(status_code=200, headers={"Content-Type": "text/html"})
        raise DavError(405)
    tag = render.etag(obj)
    headers = {
        "ETag": tag,
        "Last-Modified": render.http_date(obj.modified),
        "Accept-Ranges": "bytes",
        "Content-Type": render.content_type(obj.name),
    }
    if _not_modified(ex, tag, obj):
        return Response(status_code=304, headers=headers)
    start, length, status = _range(ex, tag, obj)
    if status == 416:
        return Response(status_code=416, headers={"Content-Range": f"bytes */{obj.size}"})
    if status == 206:
        headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{obj.size}"
    headers["Content-Length"] = str(length)
    if head:
        return Response(status_code=status, headers=headers)
    _, stream = await dav.ops.open_read(ex.caller, ex.path, start, length)
    return StreamBody(stream, status, headers)


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
