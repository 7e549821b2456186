"""Bucket requests: ListBuckets, ListObjects (v1 and v2), DeleteObjects and the small rest."""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime

from starlette.responses import Response

from manifold.errors import ManifoldError
from manifold.models import Obj
from manifold.protocols.s3 import kept, listing
from manifold.protocols.s3.context import Context, xml_response
from manifold.protocols.s3.errors import S3Error, from_manifold
from manifold.protocols.s3.objects import remove_key
from manifold.protocols.s3.xml import (
    children,
    document,
    encoded,
    etag,
    iso_time,
    parse,
    tag,
    text_of,
)

OWNER = tag("ID", "manifold") + tag("DisplayName", "manifold")
MAX_DELETE = 1000
# Buckets are names for folders that exist before and after them: no creation time.
CREATED = datetime(2000, 1, 1, tzinfo=UTC)


async def list_buckets(ctx: Context) -> Response:
    entries = "".join(
        f"<Bucket>{tag('Name', name)}{tag('CreationDate', iso_time(CREATED))}</Bucket>"
        for name in sorted(ctx.buckets)
    )
    body = document(
        "ListAllMyBucketsResult", f"<Owner>{OWNER}</Owner>", f"<Buckets>{entries}</Buckets>"
    )
    return xml_response(body)


async def head_bucket(ctx: Context) -> Response:
    _ = ctx.bucket
    return Response(status_code=200)


async def create_bucket(ctx: Context) -> Response:
    """A bucket is configured, not created: making one that exists is a no-op."""
    _ = ctx.bucket
    return Response(status_code=200, headers={"Location": f"/{ctx.bucket_name}"})


async def location(ctx: Context) -> Response:
    _ = ctx.bucket
    return xml_response(document("LocationConstraint"))


async def versioning(ctx: Context) -> Response:
    _ = ctx.bucket
    return xml_response(document("VersioningConfiguration"))


async def list_objects_v2(ctx: Context) -> Response:
    token = ctx.param("continuation-token")
    start_after = ctx.param("start-after")
    after = _decode_token(token) if token else start_after
    found, head = await _page(ctx, after)
    url = _url_encoding(ctx)
    parts = [head, tag("KeyCount", len(found.entries))]
    if token:
        parts.append(tag("ContinuationToken", token))
    if found.truncated:
        parts.append(tag("NextContinuationToken", _encode_token(found.last)))
    if start_after:
        parts.append(tag("StartAfter", encoded(start_after, url)))
    entries = _entries(found, await _tags(ctx, found), url, ctx.has("fetch-owner"))
    return xml_response(document("ListBucketResult", *parts, entries))


async def list_objects_v1(ctx: Context) -> Response:
    marker = ctx.param("marker")
    found, head = await _page(ctx, marker)
    url = _url_encoding(ctx)
    parts = [head, tag("Marker", encoded(marker, url))]
    if found.truncated:
        parts.append(tag("NextMarker", encoded(found.last, url)))
    entries = _entries(found, await _tags(ctx, found), url, True)
    return xml_response(document("ListBucketResult", *parts, entries))


async def delete_objects(ctx: Context) -> Response:
    root = parse(await ctx.small_body())
    objects = children(root, "Object")
    if len(objects) > MAX_DELETE:
        raise S3Error("MalformedXML", f"At most {MAX_DELETE} keys can be deleted at once")
    quiet = text_of(root, "Quiet").strip().lower() == "true"
    parts = []
    for element in objects:
        key = text_of(element, "Key")
        try:
            await remove_key(ctx, key)
        except (S3Error, ManifoldError) as exc:
            error = exc if isinstance(exc, S3Error) else from_manifold(exc)
            parts.append(
                f"<Error>{tag('Key', key)}{tag('Code', error.code)}"
                f"{tag('Message', error.message)}</Error>"
            )
            continue
        if not quiet:
            parts.append(f"<Deleted>{tag('Key', key)}</Deleted>")
    return xml_response(document("DeleteResult", *parts))


async def _page(ctx: Context, after: str) -> tuple[listing.Page, str]:
    bucket = ctx.bucket
    prefix = ctx.param("prefix")
    delimiter = ctx.param("delimiter")
    max_keys = _max_keys(ctx.param("max-keys"))

    async def list_folder(path: str) -> list[Obj]:
        return await ctx.ops.list(ctx.caller, path)

    found = await listing.page(bucket, list_folder, prefix, delimiter, after, max_keys)
    url = _url_encoding(ctx)
    head = [tag("Name", bucket.name), tag("Prefix", encoded(prefix, url)), tag("MaxKeys", max_keys)]
    if delimiter:
        head.append(tag("Delimiter", encoded(delimiter, url)))
    if url:
        head.append(tag("EncodingType", "url"))
    head.append(tag("IsTruncated", found.truncated))
    return found, "".join(head)


async def _tags(ctx: Context, found: listing.Page) -> dict[str, str]:
    """The ETags of the page's files, a multipart upload's where one made the file."""
    files = [(e.key, e.obj) for e in found.entries if e.obj is not None and not e.obj.is_dir]
    if not files:
        return {}
    bucket = ctx.bucket
    notes = await ctx.notes.listed(ctx.caller, [(bucket.path_of(k), obj) for k, obj in files])
    return {key: kept.tag_of(obj, note) for (key, obj), note in zip(files, notes, strict=True)}


def _entries(found: listing.Page, tags: dict[str, str], url: bool, owner: bool) -> str:
    contents, prefixes = [], []
    for entry in found.entries:
        if entry.obj is None:
            prefixes.append(
                f"<CommonPrefixes>{tag('Prefix', encoded(entry.key, url))}</CommonPrefixes>"
            )
            continue
        obj = entry.obj
        contents.append(
            "<Contents>"
            + tag("Key", encoded(entry.key, url))
            + tag("LastModified", iso_time(obj.modified))
            + tag("ETag", tags.get(entry.key) or etag(obj))
            + tag("Size", 0 if obj.is_dir else obj.size)
            + (f"<Owner>{OWNER}</Owner>" if owner else "")
            + tag("StorageClass", "STANDARD")
            + "</Contents>"
        )
    return "".join(contents) + "".join(prefixes)


def _max_keys(text: str) -> int:
    if not text:
        return listing.MAX_KEYS
    if not text.isdigit():
        raise S3Error("InvalidArgument", "max-keys must be a whole number from 0")
    return min(int(text), listing.MAX_KEYS)


def _url_encoding(ctx: Context) -> bool:
    kind = ctx.param("encoding-type")
    if kind and kind != "url":
        raise S3Error("InvalidArgument", "Invalid Encoding Method specified in Request")
    return kind == "url"


def _encode_token(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode()


def _decode_token(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, ValueError) as exc:
        raise S3Error("InvalidArgument", "The continuation token provided is incorrect") from exc
