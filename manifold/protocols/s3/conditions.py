"""Conditional requests, as S3 answers them: a read (GET, HEAD: ``If-Match``,
``If-None-Match``, ``If-Modified-Since``, ``If-Unmodified-Since``), a write (PutObject,
the destination of a copy, a multipart completion: ``If-Match``, ``If-None-Match: *``)
and the source of a copy (``x-amz-copy-source-if-*``, the four conditions of a read)."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from starlette.responses import Response

from manifold.errors import FileExists, ObjectNotFound
from manifold.models import Obj
from manifold.protocols.s3.context import Context
from manifold.protocols.s3.errors import S3Error
from manifold.protocols.s3.kept import tag_of

SOURCE = "x-amz-copy-source-"


def read_answer(ctx: Context, tag: str, modified: datetime) -> Response | None:
    """The answer a read's conditions give instead of the object (304), if any;
    ``PreconditionFailed`` when one that must hold does not."""
    match = ctx.header("if-match")
    if match and not tag_listed(match, tag):
        raise failed()
    none_match = ctx.header("if-none-match")
    if none_match and tag_listed(none_match, tag):
        return Response(status_code=304, headers={"ETag": tag})
    since = _http_date(ctx.header("if-unmodified-since"))
    if not match and since is not None and _seconds(modified) > since:
        raise failed()
    since = _http_date(ctx.header("if-modified-since"))
    if not none_match and since is not None and _seconds(modified) <= since:
        return Response(status_code=304, headers={"ETag": tag})
    return None


def check_source(ctx: Context, tag: str, modified: datetime) -> None:
    """A copy's conditions on its source: any that fails answers ``PreconditionFailed``
    (where a read would answer 304). As in a read, a tag that matches overrules the
    time: ``if-match`` true passes ``if-unmodified-since``, ``if-none-match`` true
    passes ``if-modified-since``."""
    match = ctx.header(f"{SOURCE}if-match")
    none_match = ctx.header(f"{SOURCE}if-none-match")
    if match and not tag_listed(match, tag):
        raise failed()
    if none_match and tag_listed(none_match, tag):
        raise failed()
    since = _http_date(ctx.header(f"{SOURCE}if-unmodified-since"))
    if not match and since is not None and _seconds(modified) > since:
        raise failed()
    since = _http_date(ctx.header(f"{SOURCE}if-modified-since"))
    if not none_match and since is not None and _seconds(modified) <= since:
        raise failed()


async def check_write(ctx: Context) -> bool:
    """A write's conditions on the object it replaces: ``If-Match`` needs the object
    with that tag (``NoSuchKey`` without one), ``If-None-Match: *`` needs no object.
    True when the write must not replace one (the service then refuses it, should one
    appear meanwhile)."""
    match = ctx.header("if-match")
    none_match = ctx.header("if-none-match").strip()
    if not match and not none_match:
        return False
    if none_match and none_match != "*":
        raise S3Error("NotImplemented", "If-None-Match takes only *", ctx.resource)
    current = await _current_tag(ctx)
    if none_match and current is not None:
        raise failed()
    if match and current is None:
        raise S3Error("NoSuchKey", "The specified key does not exist.", ctx.resource)
    if match and current is not None and not tag_listed(match, current):
        raise failed()
    return bool(none_match)


async def only_new(only: bool, write: Awaitable[Obj]) -> Obj:
    """``write``'s object; told not to replace one (``check_write`` said so) but finding
    one there (made meanwhile, or a folder), it answers ``PreconditionFailed``."""
    try:
        return await write
    except FileExists as exc:
        if only:
            raise failed() from exc
        raise


def failed() -> S3Error:
    return S3Error(
        "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"
    )


def tag_listed(header: str, tag: str) -> bool:
    listed = {part.strip().removeprefix("W/") for part in header.split(",")}
    return "*" in listed or tag in listed or tag.strip('"') in listed


async def _current_tag(ctx: Context) -> str | None:
    """The tag of the object at the request's key, None when there is none."""
    try:
        obj, note = await ctx.notes.stat(ctx.caller, ctx.path())
    except ObjectNotFound:
        return None
    if obj.is_dir != ctx.key.endswith("/"):
        return None  # "d" is no object when d is a folder, nor "f/" when f is a file
    return tag_of(obj, note)


def _http_date(text: str) -> datetime | None:
    try:
        return parsedate_to_datetime(text).astimezone(UTC) if text else None
    except (TypeError, ValueError):
        return None


def _seconds(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(microsecond=0)
