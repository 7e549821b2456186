"""Object requests: HEAD, GET (ranges, conditions), PUT, copy and DELETE.

A key names a file; a key ending in ``/`` names a folder, the zero-byte object an S3
console makes for one (PUT makes the folder, HEAD and GET find it, DELETE removes it
only when it is empty: the keys below it are other objects). A folder's key without
the ``/`` is no object, as in S3.
"""

from __future__ import annotations

import mimetypes
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import unquote

from starlette.responses import Response, StreamingResponse

from manifold.errors import ObjectNotFound
from manifold.models import Obj
from manifold.protocols.s3.buckets import Bucket
from manifold.protocols.s3.context import Context, xml_response
from manifold.protocols.s3.errors import S3Error
from manifold.protocols.s3.xml import EMPTY_MD5, document, etag, http_time, iso_time, tag


async def head_object(ctx: Context) -> Response:
    obj = await _object(ctx)
    refused = _precondition(ctx, obj)
    if refused is not None:
        return refused
    return Response(status_code=200, headers=_headers(obj, obj.size))


async def get_object(ctx: Context) -> Response:
    obj = await _object(ctx)
    refused = _precondition(ctx, obj)
    if refused is not None:
        return refused
    span = _range(ctx.header("range"), obj.size)
    if obj.is_dir:
        return Response(b"", headers=_headers(obj, 0))
    if span is None:
        _, stream = await ctx.ops.open_read(ctx.caller, ctx.path())
        return StreamingResponse(stream, headers=_headers(obj, obj.size))
    start, length = span
    _, stream = await ctx.ops.open_read(ctx.caller, ctx.path(), start, length)
    headers = _headers(obj, length)
    headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{obj.size}"
    return StreamingResponse(stream, status_code=206, headers=headers)


async def put_object(ctx: Context) -> Response:
    path = ctx.path()
    size = ctx.declared_size()
    if ctx.key.endswith("/"):
        if size:
            raise S3Error("InvalidRequest", "A folder's key ending in / takes no bytes")
        await ctx.ops.mkdir(ctx.caller, path)
        return Response(headers={"ETag": f'"{EMPTY_MD5}"'})
    await ctx.make_parent(path)
    obj = await ctx.ops.put(ctx.caller, path, ctx.body(), size, ctx.modified())
    return Response(headers={"ETag": etag(obj)})


async def copy_object(ctx: Context) -> Response:
    source, source_key = copy_source(ctx)
    src = source.path_of(source_key)
    obj = await ctx.ops.stat(ctx.caller, src)
    if obj.is_dir:
        raise S3Error(
            "NoSuchKey", "The specified key does not exist.", f"/{source.name}/{source_key}"
        )
    dst = ctx.path()
    if src != dst:
        await ctx.make_parent(dst)
        obj = await ctx.ops.copy(ctx.caller, src, dst, overwrite=True)
    body = document(
        "CopyObjectResult", tag("LastModified", iso_time(obj.modified)), tag("ETag", etag(obj))
    )
    return xml_response(body)


async def delete_object(ctx: Context) -> Response:
    await remove_key(ctx, ctx.key)
    return Response(status_code=204)


async def remove_key(ctx: Context, key: str) -> None:
    """Remove the object ``key``; a key that names nothing is removed already."""
    path = ctx.bucket.path_of(key)
    try:
        obj = await ctx.ops.stat(ctx.caller, path)
    except ObjectNotFound:
        return
    if obj.is_dir != key.endswith("/") or path == ctx.bucket.path:
        return  # "d" is no object when d is a folder, nor "f/" when f is a file
    if obj.is_dir and not await ctx.ops.is_empty(ctx.caller, path):
        return  # the folder's marker goes, the keys below it stay
    await ctx.ops.remove(ctx.caller, path)


def copy_source(ctx: Context) -> tuple[Bucket, str]:
    text = unquote(ctx.header("x-amz-copy-source").partition("?")[0]).lstrip("/")
    name, _, key = text.partition("/")
    bucket = ctx.buckets.get(name)
    if bucket is None:
        raise S3Error("NoSuchBucket", "The specified bucket does not exist", f"/{name}")
    if not key:
        raise S3Error("InvalidArgument", "Copy Source must mention the source bucket and key")
    return bucket, key


async def _object(ctx: Context) -> Obj:
    path = ctx.path()
    try:
        obj = await ctx.ops.stat(ctx.caller, path)
    except ObjectNotFound as exc:
        raise _no_such_key(ctx) from exc
    if obj.is_dir != ctx.key.endswith("/"):
        raise _no_such_key(ctx)
    return obj


def _no_such_key(ctx: Context) -> S3Error:
    return S3Error("NoSuchKey", "The specified key does not exist.", ctx.resource)


def _headers(obj: Obj, length: int) -> dict[str, str]:
    kind = "application/x-directory" if obj.is_dir else None
    kind = kind or mimetypes.guess_type(obj.name)[0] or "application/octet-stream"
    return {
        "Content-Length": str(length),
        "Content-Type": kind,
        "ETag": etag(obj),
        "Last-Modified": http_time(obj.modified),
        "Accept-Ranges": "bytes",
    }


def _range(header: str, size: int) -> tuple[int, int] | None:
    """``(start, length)`` of a single ``bytes=`` range; None for the whole object.

    A malformed or multiple range is ignored, as S3 ignores it; one that starts past
    the end cannot be satisfied.
    """
    if not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[len("bytes=") :].strip().partition("-")
    if not (first.isdigit() or (not first and last.isdigit())) or (last and not last.isdigit()):
        return None
    if not first:
        start = max(size - int(last), 0)
        end = size - 1 if int(last) else -1
    else:
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
        if last and int(last) < start:
            return None
    if start >= size or end < start:
        raise S3Error("InvalidRange", "The requested range is not satisfiable")
    return start, end - start + 1


def _precondition(ctx: Context, obj: Obj) -> Response | None:
    tag_now = etag(obj)
    match = ctx.header("if-match")
    if match and not _tag_listed(match, tag_now):
        raise S3Error(
            "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"
        )
    none_match = ctx.header("if-none-match")
    if none_match and _tag_listed(none_match, tag_now):
        return Response(status_code=304, headers={"ETag": tag_now})
    since = _http_date(ctx.header("if-unmodified-since"))
    if not match and since is not None and _seconds(obj.modified) > since:
        raise S3Error(
            "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"
        )
    since = _http_date(ctx.header("if-modified-since"))
    if not none_match and since is not None and _seconds(obj.modified) <= since:
        return Response(status_code=304, headers={"ETag": tag_now})
    return None


def _tag_listed(header: str, tag_now: str) -> bool:
    listed = {part.strip().removeprefix("W/") for part in header.split(",")}
    return "*" in listed or tag_now in listed or tag_now.strip('"') in listed


def _http_date(text: str) -> datetime | None:
    try:
        return parsedate_to_datetime(text).astimezone(UTC) if text else None
    except (TypeError, ValueError):
        return None


def _seconds(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(microsecond=0)
