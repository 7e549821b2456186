"""One S3 request as the handlers see it: who asks, which bucket and key, its body.

The key pair's caller is held in the bucket's folder (``Caller.rooted``): a bucket is
a root for the file services as a user's base path is, so they resolve its keys onto
it and refuse whatever a link or an Alias would take out of it."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from manifold.paths import split_path
from manifold.protocols.s3 import sigv4
from manifold.protocols.s3.buckets import Bucket
from manifold.protocols.s3.errors import S3Error
from manifold.protocols.s3.multipart import MultipartStore
from manifold.protocols.s3.xml import MAX_XML_BODY
from manifold.services.auth.service import Caller
from manifold.services.fs.notes import ObjectNotes
from manifold.services.fs.ops import GuardedOps

XML = "application/xml"


@dataclass(slots=True)
class Context:
    request: Request
    ops: GuardedOps
    notes: ObjectNotes
    keys: Caller  # the key pair's caller, before it is held in a bucket
    store: MultipartStore
    buckets: dict[str, Bucket]
    signed: sigv4.Signed
    bucket_name: str
    key: str

    @property
    def bucket(self) -> Bucket:
        bucket = self.buckets.get(self.bucket_name)
        if bucket is None:
            raise S3Error("NoSuchBucket", "The specified bucket does not exist", self.resource)
        return bucket

    @property
    def caller(self) -> Caller:
        """The key pair's caller held in the request's bucket."""
        return self.caller_in(self.bucket)

    def caller_in(self, bucket: Bucket) -> Caller:
        return self.keys.rooted(bucket.path)

    @property
    def resource(self) -> str:
        return f"/{self.bucket_name}/{self.key}" if self.key else f"/{self.bucket_name}"

    def path(self) -> str:
        """The key's path in its bucket (the caller's root)."""
        return self.bucket.path_of(self.key)

    def param(self, name: str, default: str = "") -> str:
        return self.request.query_params.get(name, default)

    def has(self, name: str) -> bool:
        return name in self.request.query_params

    def header(self, name: str) -> str:
        return self.request.headers.get(name, "")

    def body(self) -> AsyncIterator[bytes]:
        """The body as stored: aws-chunked decoded, signatures and Content-MD5 checked."""
        stream = sigv4.payload(self.request.stream(), self.signed)
        md5 = self.header("content-md5")
        return _md5_checked(stream, _digest_of(md5)) if md5 else stream

    def declared_size(self) -> int | None:
        text = self.header("x-amz-decoded-content-length") or self.header("content-length")
        if not text:
            return None
        if not text.isdigit():
            raise S3Error("InvalidArgument", "Content-Length is not a number")
        return int(text)

    async def small_body(self) -> bytes:
        """A request document, refused past ``MAX_XML_BODY`` bytes."""
        held = bytearray()
        async for data in self.body():
            held += data
            if len(held) > MAX_XML_BODY:
                raise S3Error("InvalidRequest", "The request document is too large")
        return bytes(held)

    async def make_parent(self, path: str) -> None:
        """Folders above a new key are made as the key is written, as S3 implies them."""
        parent = split_path(path)[0]
        if parent != "/":
            await self.ops.mkdir(self.caller, parent)


def xml_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, headers=headers, media_type=XML)


def _digest_of(md5: str) -> bytes:
    try:
        digest = base64.b64decode(md5, validate=True)
    except binascii.Error as exc:
        raise S3Error("InvalidDigest", "The Content-MD5 you specified was invalid.") from exc
    if len(digest) != 16:
        raise S3Error("InvalidDigest", "The Content-MD5 you specified was invalid.")
    return digest


async def _md5_checked(stream: AsyncIterator[bytes], expected: bytes) -> AsyncIterator[bytes]:
    digest = hashlib.md5(usedforsecurity=False)
    async for data in stream:
        digest.update(data)
        yield data
    if not hmac.compare_digest(digest.digest(), expected):
        raise S3Error("BadDigest", "The Content-MD5 you specified did not match what we received.")
