"""S3's XML, both ways: the documents this server answers and the few it reads."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from email.utils import format_datetime
from urllib.parse import quote
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from manifold.models import Obj
from manifold.protocols.s3.errors import S3Error

NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'
MAX_XML_BODY = 2 << 20  # a DeleteObjects of 1,000 keys of 1,024 bytes fits
EMPTY_MD5 = hashlib.md5(b"", usedforsecurity=False).hexdigest()


def document(root: str, *parts: str) -> bytes:
    return f'{HEAD}<{root} xmlns="{NAMESPACE}">{"".join(parts)}</{root}>'.encode()


def tag(name: str, value: object) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    return f"<{name}>{escape(str(value))}</{name}>"


def iso_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def http_time(when: datetime) -> str:
    return format_datetime(when.astimezone(UTC).replace(microsecond=0), usegmt=True)


def etag(obj: Obj) -> str:
    """A stable tag of size and modification time, quoted.

    It ends in ``-1`` as a multipart upload's tag does: it is not the MD5 of the bytes,
    and clients (rclone) compare a tag of 32 hex digits with the MD5 they computed.
    """
    if obj.is_dir:
        return f'"{EMPTY_MD5}"'
    stamp = f"{obj.size}:{int(obj.modified.timestamp() * 1_000_000)}"
    return f'"{hashlib.md5(stamp.encode(), usedforsecurity=False).hexdigest()}-1"'


def encoded(value: str, url: bool) -> str:
    """A key as ``encoding-type=url`` asks for it, or as is."""
    return quote(value, safe="/") if url else value


def parse(body: bytes) -> ElementTree.Element:
    """A client's XML document; entity declarations are refused outright."""
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise S3Error("MalformedXML", "The XML you provided was not well-formed.")
    try:
        return ElementTree.fromstring(body)  # noqa: S314 - no DTD reaches the parser
    except ElementTree.ParseError as exc:
        raise S3Error("MalformedXML", "The XML you provided was not well-formed.") from exc


def local(element: ElementTree.Element) -> str:
    """An element's name without its namespace."""
    return element.tag.rpartition("}")[2]


def children(element: ElementTree.Element, name: str) -> list[ElementTree.Element]:
    return [child for child in element if local(child) == name]


def text_of(element: ElementTree.Element, name: str, default: str = "") -> str:
    for child in element:
        if local(child) == name:
            return child.text or ""
    return default
