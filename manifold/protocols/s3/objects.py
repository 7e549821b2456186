"""Object requests: HEAD, GET (ranges, conditions), PUT (conditions, metadata) and DELETE.

A key names a file; a key ending in ``/`` names a folder, the zero-byte object an S3
console makes for one (PUT makes the folder, HEAD and GET find it, DELETE removes it
only when it is empty: the keys below it are other objects). A folder's key without
the ``/`` is no object, as in S3.
"""

from __future__ import annotations

from starlette.responses import Response, StreamingResponse

from manifold.errors import ObjectNotFound
from manifold.models import Obj
from manifold.protocols.s3 import conditions, kept
from manifold.protocols.s3.context import Context
from manifold.protocols.s3.errors import S3Error
from manifold.protocols.s3.xml import EMPTY_MD5, etag
from manifold.services.fs.notes import Note


async def head_object(ctx: Context) -> Response:
    obj, note = await found(ctx)
    refused = conditions.read_answer(ctx, kept.tag_of(obj, note), obj.modified)
    if refused is not None:
        return refused
    return Response(status_code=200, headers=kept.object_headers(obj, note, obj.size))


async def get_object(ctx: Context) -> Response:
    obj, note = await found(ctx)
    refused = conditions.read_answer(ctx, kept.tag_of(obj, note), obj.modified)
    if refused is not None:
        return refused
    span = _range(ctx.header("range"), obj.size)
    if obj.is_dir:
        return Response(b"", headers=kept.object_headers(obj, note, 0))
    if span is None:
        _, stream = await ctx.ops.open_read(ctx.caller, ctx.path())
        return StreamingResponse(stream, headers=kept.object_headers(obj, note, obj.size))
    start, length = span
    _, stream = await ctx.ops.open_read(ctx.caller, ctx.path(), start, length)
    headers = kept.object_headers(obj, note, length)
    headers["content-range"] = f"bytes {start}-{start + length - 1}/{obj.size}"
    return StreamingResponse(stream, status_code=206, headers=headers)


async def put_object(ctx: Context) -> Response:
    path = ctx.path()
    size = ctx.declared_size()
    if ctx.key.endswith("/"):
        if size:
            raise S3Error("InvalidRequest", "A folder's key ending in / takes no bytes")
        await conditions.check_write(ctx)
        await ctx.ops.mkdir(ctx.caller, path)
        return Response(headers={"ETag": f'"{EMPTY_MD5}"'})
    headers = kept.from_request(ctx.request.headers)
    only_new = await conditions.check_write(ctx)
    await ctx.make_parent(path)
    modified = kept.modified_of(headers)
    written = ctx.ops.put(ctx.caller, path, ctx.body(), size, modified, overwrite=not only_new)
    obj = await conditions.only_new(only_new, written)
    await ctx.notes.keep(ctx.caller, path, Note(meta=headers))
    return Response(headers={"ETag": etag(obj)})


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
    if obj.is_dir != key.endswith("/") or path == "/":
        return  # "d" is no object when d is a folder, nor "f/" when f is a file
    if obj.is_dir and not await ctx.ops.is_empty(ctx.caller, path):
        return  # the folder's marker goes, the keys below it stay
    await ctx.ops.remove(ctx.caller, path)
    if not obj.is_dir:
        await ctx.notes.forget(ctx.caller, path)


async def found(ctx: Context) -> tuple[Obj, Note]:
    """The object the request's key names, with its note; ``NoSuchKey`` without one."""
    try:
        obj, note = await ctx.notes.stat(ctx.caller, ctx.path())
    except ObjectNotFound as exc:
        raise no_such_key(ctx.resource) from exc
    if obj.is_dir != ctx.key.endswith("/"):
        raise no_such_key(ctx.resource)
    return obj, note


def no_such_key(resource: str) -> S3Error:
    return S3Error("NoSuchKey", "The specified key does not exist.", resource)


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
