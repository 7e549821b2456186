"""Copies: CopyObject, and UploadPartCopy (a part of a multipart upload taken from an
object, which clients use for objects over 5 GiB, CopyObject's limit).

The source may be in another bucket: it is named by the key pair's caller held in that
bucket, so each end is confined to its own bucket. The source's conditions
(``x-amz-copy-source-if-*``) are checked against it first; the headers it carries go
with it (``x-amz-metadata-directive: COPY``, the default) or those of the request take
their place (``REPLACE``).
"""

from __future__ import annotations

from urllib.parse import unquote

from starlette.responses import Response

from manifold.errors import ObjectNotFound
from manifold.models import Obj
from manifold.protocols.s3 import conditions, kept
from manifold.protocols.s3.buckets import Bucket
from manifold.protocols.s3.context import Context, xml_response
from manifold.protocols.s3.errors import S3Error
from manifold.protocols.s3.objects import no_such_key
from manifold.protocols.s3.uploads import checked_upload, part_number
from manifold.protocols.s3.xml import document, etag, iso_time, tag
from manifold.services.auth.service import Caller
from manifold.services.fs.notes import Note

SELF_COPY = (
    "This copy request is illegal because it is trying to copy an object to itself "
    "without changing the object's metadata, storage class, website redirect location "
    "or encryption attributes."
)


class Source:
    """The object a copy reads: its bucket, key, path there and the caller held there."""

    def __init__(self, ctx: Context) -> None:
        text = unquote(ctx.header("x-amz-copy-source").partition("?")[0]).lstrip("/")
        name, _, key = text.partition("/")
        bucket = ctx.buckets.get(name)
        if bucket is None:
            raise S3Error("NoSuchBucket", "The specified bucket does not exist", f"/{name}")
        if not key:
            raise S3Error("InvalidArgument", "Copy Source must mention the source bucket and key")
        self.bucket: Bucket = bucket
        self.key = key
        self.path = bucket.path_of(key)
        self.caller: Caller = ctx.caller_in(bucket)

    @property
    def resource(self) -> str:
        return f"/{self.bucket.name}/{self.key}"

    async def checked(self, ctx: Context) -> tuple[Obj, Note]:
        """The source object with its note, once its conditions hold."""
        try:
            obj, note = await ctx.notes.stat(self.caller, self.path)
        except ObjectNotFound as exc:
            raise no_such_key(self.resource) from exc
        if obj.is_dir or self.key.endswith("/"):
            raise no_such_key(self.resource)
        conditions.check_source(ctx, kept.tag_of(obj, note), obj.modified)
        return obj, note


async def copy_object(ctx: Context) -> Response:
    source = Source(ctx)
    obj, note = await source.checked(ctx)
    directive = ctx.header("x-amz-metadata-directive").upper() or "COPY"
    if directive not in ("COPY", "REPLACE"):
        raise S3Error("InvalidArgument", "Unknown metadata directive.")
    headers = dict(note.meta) if directive == "COPY" else kept.from_request(ctx.request.headers)
    dst = ctx.path()
    if (source.bucket.name, source.path) == (ctx.bucket.name, dst):
        if directive != "REPLACE":
            raise S3Error("InvalidRequest", SELF_COPY, ctx.resource)
        # Only what the object carries changes: its bytes, and so its tag, stay.
        await ctx.notes.keep(ctx.caller, dst, Note(note.etag, headers))
        return _copied(iso_time(obj.modified), kept.tag_of(obj, note))
    only_new = await conditions.check_write(ctx)
    await ctx.make_parent(dst)
    written = ctx.ops.copy(
        ctx.caller, source.path, dst, overwrite=not only_new, source=source.caller
    )
    obj = await conditions.only_new(only_new, written)
    await ctx.notes.keep(ctx.caller, dst, Note(meta=headers))
    return _copied(iso_time(obj.modified), etag(obj))


async def upload_part_copy(ctx: Context) -> Response:
    upload = await checked_upload(ctx)
    number = part_number(ctx.param("partNumber"))
    source = Source(ctx)
    obj, _ = await source.checked(ctx)
    start, length = _copy_range(ctx.header("x-amz-copy-source-range"), obj.size)
    _, stream = await ctx.ops.open_read(source.caller, source.path, start, length)
    part = await ctx.store.put_part(upload.upload_id, number, stream)
    body = document(
        "CopyPartResult",
        tag("LastModified", iso_time(part.modified)),
        tag("ETag", f'"{part.etag}"'),
    )
    return xml_response(body)


def _copied(modified: str, tag_value: str) -> Response:
    return xml_response(
        document("CopyObjectResult", tag("LastModified", modified), tag("ETag", tag_value))
    )


def _copy_range(header: str, size: int) -> tuple[int, int | None]:
    """``(start, length)`` of ``x-amz-copy-source-range: bytes=first-last`` (both
    within the source), or the whole source without one."""
    if not header:
        return 0, None
    first, dash, last = header.removeprefix("bytes=").partition("-")
    if not header.startswith("bytes=") or not dash or not first.isdigit() or not last.isdigit():
        raise S3Error(
            "InvalidArgument",
            "The x-amz-copy-source-range value must be of the form bytes=first-last where "
            "first and last are the zero-based offsets of the first and last bytes to copy",
        )
    start, end = int(first), int(last)
    if start > end or end >= size:
        raise S3Error(
            "InvalidArgument", f"Range specified is not valid for source object of size: {size}"
        )
    return start, end - start + 1
