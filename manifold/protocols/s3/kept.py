"""What an object carries besides its bytes, as S3 has it, kept in an ``ObjectNotes``
note: the headers a client gave the object (its metadata, ``x-amz-meta-*``, and the
few HTTP headers S3 keeps) and a multipart upload's ETag, answered again on HEAD and GET.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from datetime import UTC, datetime

from manifold.models import Obj
from manifold.protocols.s3.errors import S3Error
from manifold.protocols.s3.xml import etag, http_time
from manifold.services.fs.notes import Note

USER = "x-amz-meta-"
MAX_USER_BYTES = 2048  # S3's limit on the metadata's names and values together
# The HTTP headers S3 keeps with an object and answers on GET and HEAD.
HTTP = ("cache-control", "content-disposition", "content-encoding", "content-language",
        "content-type", "expires")  # fmt: skip


def from_request(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers of a request (PUT, a multipart upload's start, a copy that replaces
    them) that the object keeps; too much metadata is refused as S3 refuses it."""
    kept = {name: value for name, value in headers.items() if name.startswith(USER)}
    used = sum(len(n[len(USER) :].encode()) + len(v.encode()) for n, v in kept.items())
    if used > MAX_USER_BYTES:
        raise S3Error(
            "MetadataTooLarge",
            f"Your metadata headers exceed the maximum allowed metadata size ({MAX_USER_BYTES})",
        )
    for name in HTTP:
        value = headers.get(name, "")
        if name == "content-encoding":
            # How the request's body was sent, not what the object is.
            value = ",".join(p for p in value.split(",") if p.strip() != "aws-chunked")
        if value.strip():
            kept[name] = value.strip()
    return kept


def tag_of(obj: Obj, note: Note) -> str:
    """The object's ETag: a multipart upload's, else one made up of its version."""
    return note.etag or etag(obj)


def modified_of(kept: Mapping[str, str]) -> datetime | None:
    """The time a client keeps in metadata (rclone's ``mtime``), if it sent one."""
    text = kept.get(f"{USER}mtime", "")
    try:
        return datetime.fromtimestamp(float(text), UTC) if text else None
    except (ValueError, OverflowError, OSError):
        return None


def object_headers(obj: Obj, note: Note, length: int) -> dict[str, str]:
    """The headers of a HEAD or GET of ``obj`` (``length`` bytes of it)."""
    kind = "application/x-directory" if obj.is_dir else None
    kind = kind or mimetypes.guess_type(obj.name)[0] or "application/octet-stream"
    headers = {
        "content-length": str(length),
        "content-type": kind,
        "etag": tag_of(obj, note),
        "last-modified": http_time(obj.modified),
        "accept-ranges": "bytes",
    }
    for name, value in note.meta.items():  # lower-case names, as the request's
        if name.startswith(USER) or name in HTTP:
            headers[name] = value
    return headers
