"""Listing pages (ListObjects v1 and v2) read straight from their XML.

botocore reads every answer through its general, shape-driven parser; for a page of
1,000 keys that is most of a listing's processor time here, and it sits on the
listing's critical path, between one page's arrival and the next page's request.
``read_page`` reads what the driver uses of a page (keys, sizes and times, common
prefixes, the continuation) with ElementTree alone; a handler on botocore's
``before-parse`` event hands botocore an empty page and the result beside it. Any
page this cannot read whole (not a listing, a key without its size or time) is left
to botocore as before.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import datetime
from typing import Any
from xml.etree import ElementTree

from botocore.utils import parse_timestamp

# The top-level fields kept as text (botocore's names); ``IsTruncated`` is a boolean.
_TEXT = frozenset(
    (
        "Name",
        "Prefix",
        "Delimiter",
        "Marker",
        "NextMarker",
        "StartAfter",
        "ContinuationToken",
        "NextContinuationToken",
        "EncodingType",
    )
)
# What botocore is given to parse instead: a page of nothing.
_EMPTY = b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></ListBucketResult>'
OPERATIONS = ("ListObjects", "ListObjectsV2")


def read_timestamp(value: Any) -> datetime:
    """botocore's timestamp parsing, with the ISO 8601 times of S3's XML read by the
    standard library (botocore's general one is many times slower)."""
    if isinstance(value, str) and value[:1].isdigit() and "T" in value:
        with suppress(ValueError):
            return datetime.fromisoformat(value)
    parsed: datetime = parse_timestamp(value)
    return parsed


def before_parse(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
) -> None:
    """botocore's ``before-parse`` hook for the listing operations (see the module)."""
    if response_dict.get("status_code") != 200:
        return
    page = read_page(response_dict.get("body") or b"")
    if page is not None:
        customized_response_dict.update(page)
        response_dict["body"] = _EMPTY


def read_page(body: bytes) -> dict[str, Any] | None:
    """A listing page as botocore would parse the fields the driver reads; None when
    ``body`` is not a listing this reads whole."""
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        return None  # no listing declares a document type: botocore's to refuse
    try:
        root = ElementTree.fromstring(body)  # noqa: S314 - no DTD reaches the parser
    except ElementTree.ParseError:
        return None
    if _local(root.tag) != "ListBucketResult":
        return None
    page: dict[str, Any] = {}
    contents: list[dict[str, Any]] = []
    prefixes: list[dict[str, str]] = []
    for child in root:
        name = _local(child.tag)
        if name == "Contents":
            item = _content(child)
            if item is None:
                return None
            contents.append(item)
        elif name == "CommonPrefixes":
            prefixes += [{"Prefix": f.text or ""} for f in child if _local(f.tag) == "Prefix"]
        elif name == "IsTruncated":
            page[name] = (child.text or "").strip().lower() == "true"
        elif name in _TEXT:
            page[name] = child.text or ""
    if contents:
        page["Contents"] = contents
    if prefixes:
        page["CommonPrefixes"] = prefixes
    return page


def _content(element: ElementTree.Element) -> dict[str, Any] | None:
    fields = {_local(f.tag): f.text for f in element}
    key, size, modified = fields.get("Key"), fields.get("Size"), fields.get("LastModified")
    if key is None or size is None or modified is None:
        return None
    try:
        return {"Key": key, "Size": int(size), "LastModified": read_timestamp(modified)}
    except (ValueError, TypeError):
        return None


def _local(tag: str) -> str:
    """An element's name without its namespace."""
    return tag.rpartition("}")[2]
