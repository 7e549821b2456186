"""Multipart uploads: parts wait in the ``MultipartStore``; completing streams them, in
order, into one put, so the object appears whole or not at all. The object keeps the
upload's ETag (``"<md5 of the parts' md5s>-N"``) and the headers its start carried
(``ObjectNotes``), and the same completion sent again is answered again."""

from __future__ import annotations

import hashlib
from xml.etree.ElementTree import Element

from starlette.responses import Response

from manifold.protocols.s3 import conditions, kept
from manifold.protocols.s3.context import Context, xml_response
from manifold.protocols.s3.errors import S3Error
from manifold.protocols.s3.multipart import MAX_PART_NUMBER, Completed, Part, Upload, parts_named
from manifold.protocols.s3.xml import children, document, iso_time, parse, tag, text_of
from manifold.services.fs.notes import Note

MIN_PART_SIZE = 5 << 20  # every part but the last, as S3 asks
MAX_PARTS_LISTED = 1000


async def create_upload(ctx: Context) -> Response:
    # A key the upload could not complete at (outside the bucket, behind a folder
    # password) is refused before anything is kept.
    headers = kept.from_request(ctx.request.headers)
    await ctx.ops.check_put(ctx.caller, ctx.path())
    upload = await ctx.store.create(ctx.bucket.name, ctx.key, headers)
    body = document(
        "InitiateMultipartUploadResult",
        tag("Bucket", upload.bucket),
        tag("Key", upload.key),
        tag("UploadId", upload.upload_id),
    )
    return xml_response(body)


async def upload_part(ctx: Context) -> Response:
    upload = await checked_upload(ctx)
    number = part_number(ctx.param("partNumber"))
    part = await ctx.store.put_part(upload.upload_id, number, ctx.body())
    return Response(headers={"ETag": f'"{part.etag}"'})


async def checked_upload(ctx: Context) -> Upload:
    """The upload named, once the caller may still write where it completes."""
    upload = await _upload(ctx)
    await ctx.ops.check_put(ctx.caller, ctx.path())
    return upload


async def list_parts(ctx: Context) -> Response:
    upload = await checked_upload(ctx)
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
    named = parse(await ctx.small_body())
    try:
        upload = await _upload(ctx)
    except S3Error as exc:
        return await _completed_again(ctx, named, exc)
    chosen = _chosen(named, await ctx.store.parts(upload.upload_id))
    tag_value = await _joined(ctx, upload, chosen)
    answer = Completed(upload.bucket, upload.key, tag_value, parts_named(_named(named)))
    await ctx.store.complete(upload.upload_id, answer)
    return _completion(answer)


async def _joined(ctx: Context, upload: Upload, chosen: list[Part]) -> str:
    """Put ``chosen`` together as the object, which keeps the upload's tag (returned)
    and the headers its start carried."""
    headers = await ctx.store.headers(upload.upload_id)
    only_new = await conditions.check_write(ctx)
    path = ctx.path()
    await ctx.make_parent(path)
    stream = ctx.store.read_parts(upload.upload_id, chosen)
    size, modified = sum(p.size for p in chosen), kept.modified_of(headers)
    written = ctx.ops.put(ctx.caller, path, stream, size, modified, overwrite=not only_new)
    await conditions.only_new(only_new, written)
    joined = b"".join(bytes.fromhex(p.etag) for p in chosen)
    tag_value = f'"{hashlib.md5(joined, usedforsecurity=False).hexdigest()}-{len(chosen)}"'
    await ctx.notes.keep(ctx.caller, path, Note(tag_value, headers))
    return tag_value


async def _completed_again(ctx: Context, named: Element, missing: S3Error) -> Response:
    """The answer of a completion already made, to the same completion sent again."""
    done = await ctx.store.completed(ctx.param("uploadId"))
    same = done is not None and (done.bucket, done.key) == (ctx.bucket.name, ctx.key)
    if done is None or not same or done.parts != parts_named(_named(named)):
        raise missing
    return _completion(done)


def _completion(answer: Completed) -> Response:
    body = document(
        "CompleteMultipartUploadResult",
        tag("Location", f"/{answer.bucket}/{answer.key}"),
        tag("Bucket", answer.bucket),
        tag("Key", answer.key),
        tag("ETag", answer.etag),
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


def part_number(text: str) -> int:
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


def _named(root: Element) -> list[tuple[int, str]]:
    """The (number, ETag) pairs a completion names; a number that is none is 0."""
    found = []
    for element in children(root, "Part"):
        number_text = text_of(element, "PartNumber").strip()
        given = text_of(element, "ETag").strip().strip('"').lower()
        found.append((int(number_text) if number_text.isdigit() else 0, given))
    return found


def _chosen(root: Element, stored: list[Part]) -> list[Part]:
    """The parts the completion names, each checked against what is stored."""
    by_number = {p.number: p for p in stored}
    chosen: list[Part] = []
    for number, given in _named(root):
        part = by_number.get(number)
        if part is None or given != part.etag:
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
