"""Multipart uploads: parts wait in the ``MultipartStore``; completing streams them, in
order, into one put, so the object appears whole or not at all."""

from __future__ import annotations

import hashlib
from xml.etree.ElementTree import Element

from starlette.responses import Response

from manifold.protocols.s3.context import Context, xml_response
from manifold.protocols.s3.errors import S3Error
from manifold.protocols.s3.multipart import MAX_PART_NUMBER, Part, Upload
from manifold.protocols.s3.xml import children, document, iso_time, parse, tag, text_of

MIN_PART_SIZE = 5 << 20  # every part but the last, as S3 asks
MAX_PARTS_LISTED = 1000


async def create_upload(ctx: Context) -> Response:
    # A key the upload could not complete at (outside the bucket, behind a folder
    # password) is refused before anything is kept.
    await ctx.ops.check_put(ctx.caller, ctx.path())
    upload = await ctx.store.create(ctx.bucket.name, ctx.key)
    body = document(
        "InitiateMultipartUploadResult",
        tag("Bucket", upload.bucket),
        tag("Key", upload.key),
        tag("UploadId", upload.upload_id),
    )
    return xml_response(body)


async def upload_part(ctx: Context) -> Response:
    await _upload(ctx)
    await ctx.ops.check_put(ctx.caller, ctx.path())
    number = _part_number(ctx.param("partNumber"))
    part = await ctx.store.put_part(ctx.param("uploadId"), number, ctx.body())
    return Response(headers={"ETag": f'"{part.etag}"'})


async def list_parts(ctx: Context) -> Response:
    upload = await _upload(ctx)
    await ctx.ops.check_put(ctx.caller, ctx.path())
    marker = _whole(ctx.param("part-number-marker"), 0)
    limit = min(_whole(ctx.param("max-parts"), MAX_PARTS_LISTED), MAX_PARTS_LISTED)
    parts = [p for p in await ctx.store.parts(upload.upload_id) if p.number > marker]
    shown, truncated = parts[:limit], len(parts) > limit
    items = "".join(
        "<Part>"
        + tag("PartNumber", p.number)
        + tag("LastModified", iso_time(p.modified))
        + tag("ETag", f'"{p.etag}"')
        + tag("Size", p.size)
        + "</Part>"
        for p in shown
    )
    body = document(
        "ListPartsResult",
        tag("Bucket", upload.bucket),
        tag("Key", upload.key),
        tag("UploadId", upload.upload_id),
        tag("PartNumberMarker", marker),
        tag("NextPartNumberMarker", shown[-1].number if shown else marker),
        tag("MaxParts", limit),
        tag("IsTruncated", truncated),
        items,
    )
    return xml_response(body)


async def complete_upload(ctx: Context) -> Response:
    upload = await _upload(ctx)
    chosen = _chosen(parse(await ctx.small_body()), await ctx.store.parts(upload.upload_id))
    path = ctx.path()
    await ctx.make_parent(path)
    size = sum(p.size for p in chosen)
    stream = ctx.store.read_parts(upload.upload_id, chosen)
    await ctx.ops.put(ctx.caller, path, stream, size)
    await ctx.store.remove(upload.upload_id)
    joined = b"".join(bytes.fromhex(p.etag) for p in chosen)
    tag_value = f'"{hashlib.md5(joined, usedforsecurity=False).hexdigest()}-{len(chosen)}"'
    body = document(
        "CompleteMultipartUploadResult",
        tag("Location", f"/{upload.bucket}/{upload.key}"),
        tag("Bucket", upload.bucket),
        tag("Key", upload.key),
        tag("ETag", tag_value),
    )
    return xml_response(body)


async def abort_upload(ctx: Context) -> Response:
    upload = await _upload(ctx)
    await ctx.store.remove(upload.upload_id)
    return Response(status_code=204)


async def list_uploads(ctx: Context) -> Response:
    prefix = ctx.param("prefix")
    uploads = [u for u in await ctx.store.uploads(ctx.bucket.name) if u.key.startswith(prefix)]
    items = "".join(
        "<Upload>"
        + tag("Key", u.key)
        + tag("UploadId", u.upload_id)
        + tag("Initiated", iso_time(u.initiated))
        + tag("StorageClass", "STANDARD")
        + "</Upload>"
        for u in uploads
    )
    body = document(
        "ListMultipartUploadsResult",
        tag("Bucket", ctx.bucket.name),
        tag("KeyMarker", ""),
        tag("UploadIdMarker", ""),
        tag("Prefix", prefix),
        tag("MaxUploads", MAX_PARTS_LISTED),
        tag("IsTruncated", False),
        items,
    )
    return xml_response(body)


async def _upload(ctx: Context) -> Upload:
    """The upload named in the query, which must be this bucket's and key's."""
    upload = await ctx.store.get(ctx.param("uploadId"))
    if (upload.bucket, upload.key) != (ctx.bucket.name, ctx.key):
        raise S3Error(
            "NoSuchUpload", "The specified multipart upload does not exist.", ctx.resource
        )
    return upload


def _part_number(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_PART_NUMBER:
        raise S3Error(
            "InvalidArgument", f"Part number must be an integer between 1 and {MAX_PART_NUMBER}"
        )
    return int(text)


def _whole(text: str, default: int) -> int:
    if not text:
        return default
    if not text.isdigit():
        raise S3Error("InvalidArgument", f"{text!r} is not a whole number")
    return int(text)


def _chosen(root: Element, stored: list[Part]) -> list[Part]:
    """The parts the completion names, each checked against what is stored."""
    by_number = {p.number: p for p in stored}
    chosen: list[Part] = []
    for element in children(root, "Part"):
        number_text = text_of(element, "PartNumber").strip()
        part = by_number.get(int(number_text)) if number_text.isdigit() else None
        given = text_of(element, "ETag").strip().strip('"')
        if part is None or given.lower() != part.etag:
            raise S3Error("InvalidPart", "One or more of the specified parts could not be found.")
        if chosen and part.number <= chosen[-1].number:
            raise S3Error("InvalidPartOrder", "The list of parts was not in ascending order.")
        chosen.append(part)
    if not chosen:
        raise S3Error("MalformedXML", "The XML you provided was not well-formed.")
    if any(p.size < MIN_PART_SIZE for p in chosen[:-1]):
        raise S3Error(
            "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size"
        )
    return chosen
