"""PUT, MKCOL, DELETE, COPY, MOVE and PROPPATCH.

Each checks what only WebDAV knows (a taken name under ``Overwrite: F`` is 412,
locks are 423) and then calls one ``GuardedOps`` operation with ``strict``, which
checks the caller and answers exactly: a missing parent is ``ParentNotFound``
(409), a missing object ``ObjectNotFound`` (404), a taken folder name
``ObjectExists`` (MKCOL's 405). Dead properties follow the object they were set on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

from starlette.responses import Response

from manifold.errors import ObjectExists, ObjectNotFound
from manifold.models import Obj
from manifold.protocols.webdav import locking, render
from manifold.protocols.webdav.exchange import Exchange, Shared
from manifold.protocols.webdav.hrefs import OutsideMount
from manifold.protocols.webdav.statuses import DavError
from manifold.protocols.webdav.xmlbody import proppatch as read_proppatch
from manifold.services.fs.ops import etag

XML = "application/xml; charset=utf-8"


async def stat_or_none(dav: Shared, ex: Exchange, path: str) -> Obj | None:
    try:
        return await dav.ops.stat(ex.caller, path)
    except ObjectNotFound:
        return None


async def put(dav: Shared, ex: Exchange) -> Response:
    if ex.path == "/":
        raise DavError(405)
    await locking.check_write(dav, ex, ex.path)
    existing = await stat_or_none(dav, ex, ex.path)
    if existing is not None and existing.is_dir:
        raise DavError(405)
    length = ex.header("content-length")
    size = int(length) if length.isdigit() and not ex.header("transfer-encoding") else None
    obj = await dav.ops.put(
        ex.caller, ex.path, _body(ex), size, _mtime(ex), overwrite=True, strict=True
    )
    headers = {"ETag": etag(obj)}
    if ex.header("x-oc-mtime"):
        headers["X-OC-Mtime"] = "accepted"
    return Response(status_code=201 if existing is None else 204, headers=headers)


async def _body(ex: Exchange) -> AsyncIterator[bytes]:
    async for chunk in ex.request.stream():
        if chunk:
            yield chunk


def _mtime(ex: Exchange) -> datetime | None:
    value = ex.header("x-oc-mtime").strip()
    try:
        return datetime.fromtimestamp(float(value), UTC) if value else None
    except (ValueError, OverflowError, OSError):
        return None


async def mkcol(dav: Shared, ex: Exchange) -> Response:
    if await ex.body():
        raise DavError(415)
    await locking.check_write(dav, ex, ex.path)
    try:
        await dav.ops.mkdir(ex.caller, ex.path, strict=True)
    except ObjectExists:
        raise DavError(405, message="already exists") from None
    return Response(status_code=201)


async def delete(dav: Shared, ex: Exchange) -> Response:
    await locking.check_write(dav, ex, ex.path, deep=True)
    await dav.ops.remove(ex.caller, ex.path, strict=True)
    await _forget(dav, ex.full)
    return Response(status_code=204)


async def _forget(dav: Shared, full: str) -> None:
    await dav.props.remove(full)
    await locking.forget_below(dav, full)


async def copy(dav: Shared, ex: Exchange) -> Response:
    return await _transfer(dav, ex, move=False)


async def move(dav: Shared, ex: Exchange) -> Response:
    return await _transfer(dav, ex, move=True)


async def _transfer(dav: Shared, ex: Exchange, move: bool) -> Response:
    """COPY or MOVE as the rule book decides (``services.fs.rules``): ``Overwrite: T``
    asks to replace what stands at the destination, file or folder, as RFC 4918 has
    it; a destination inside the source or holding it is refused (409) before
    anything is touched, and replacing needs the remove permission."""
    dst = _destination(dav, ex)
    depth = ex.header("depth", "infinity").strip().lower()
    if depth not in ("0", "infinity") or (move and depth != "infinity"):
        raise DavError(400, message="Depth must be infinity (or 0 for COPY)")
    overwrite = ex.header("overwrite", "T").strip().upper() != "F"
    src_full, dst_full = ex.full, ex.full_of(dst)
    if src_full == dst_full:
        raise DavError(403, message="source and destination are the same")
    source = await dav.ops.stat(ex.caller, ex.path)
    existing = await stat_or_none(dav, ex, dst)
    if move:
        await locking.check_write(dav, ex, ex.path, deep=True)
    await locking.check_write(dav, ex, dst, deep=True)
    shallow = not move and depth == "0" and source.is_dir
    if move:
        # Into another storage this waits for the move task that does it.
        await dav.ops.rename(
            ex.caller, ex.path, dst, overwrite=overwrite, strict=True, folders=True
        )
    else:
        await dav.ops.copy(
            ex.caller, ex.path, dst, overwrite, strict=True, folders=True, shallow=shallow
        )
    if existing is not None:
        await _forget(dav, dst_full)
    if move:
        await dav.props.move(src_full, dst_full)
        await locking.forget_below(dav, src_full)
    else:
        await dav.props.copy(src_full, dst_full, deep=not shallow)
    return Response(status_code=204 if existing is not None else 201)


def _destination(dav: Shared, ex: Exchange) -> str:
    header = ex.header("destination")
    if not header:
        raise DavError(400, message="Destination header missing")
    try:
        return dav.hrefs.destination(header, ex.header("host"))
    except OutsideMount:
        raise DavError(502, message="Destination is not on this server's /dav") from None


async def proppatch(dav: Shared, ex: Exchange) -> Response:
    update = read_proppatch(await ex.body())
    obj = await dav.ops.stat(ex.caller, ex.path)
    await dav.ops.check_change(ex.caller, ex.path)
    await locking.check_write(dav, ex, ex.path)
    refused = {name for name, _ in update.changes if name in render.PROTECTED}
    if refused:
        results = [(name, 403 if name in refused else 424) for name, _ in update.changes]
    else:
        await dav.props.change(ex.caller, ex.full, update.changes)
        results = [(name, 200) for name, _ in update.changes]
    href = dav.hrefs.href(ex.path, obj.is_dir)
    body = render.multistatus([render.propstat_response(href, results)])
    return Response(body, 207, media_type=XML)
