"""Uploads into S3 that appear whole or not at all.

A stream that ends within its first part is one ``PutObject``; a longer one (or one
of unknown size that turns out long) is a multipart upload: parts are sent as they
fill, one part uploading while the next is read (memory: two parts), and the object
appears only when ``CompleteMultipartUpload`` is accepted after the last part. Any
failure, a wrong byte count or a cancellation aborts the upload, so its parts do not
linger in the bucket. An abort the store could not take (it was down) is kept and
tried again before the next upload, and when the storage is dropped.

The store's errors are translated here (``failures.ERRORS``), around each request
only: an exception the upload's stream raises passes through unchanged.
"""

from __future__ import annotations

import asyncio
import io
import mimetypes
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

from botocore.exceptions import ClientError

from manifold.drivers.base import Upload, check_size, made_progress, translating
from manifold.drivers.batches import background
from manifold.drivers.parts import part_body, read_part
from manifold.errors import InvalidRequest

from .failures import ERRORS, answer

# S3's limits: parts of one upload, and the largest part.
MAX_PARTS = 10_000
LARGEST_PART = 5 << 30
# With the size unknown, parts double in size every this many parts, so an upload
# of any size S3 takes (5 TiB) fits in its 10,000 parts.
PARTS_PER_SIZE = 1_000
# Seconds an abort may take when the storage is dropped.
ABORT_SECONDS = 5.0
# Seconds a part under way may take to end before its upload is aborted.
SETTLE_SECONDS = 10.0


class Uploader:
    """Puts and part-wise copies into one bucket through ``client``."""

    def __init__(self, client: Any, bucket: str, part_size: int) -> None:
        self.client = client
        self.bucket = bucket
        self.part_size = part_size
        # (key, upload id) of multipart uploads whose abort failed.
        self.unaborted: set[tuple[str, str]] = set()
        self._retrying: asyncio.Future[None] | None = None

    async def call(self, operation: str, **params: Any) -> Any:
        """One request for this bucket, its errors translated."""
        with translating(ERRORS):
            return await getattr(self.client, operation)(Bucket=self.bucket, **params)

    async def put(self, key: str, upload: Upload) -> int:
        """Store ``upload`` at ``key``; the byte count. ``ObjectExists`` (through the
        caller's translation of 412) when ``overwrite`` is false and the key is taken."""
        self._retry_aborts_soon()
        condition = {} if upload.overwrite else {"IfNoneMatch": "*"}
        content_type = mimetypes.guess_type(key)[0] or "application/octet-stream"
        first, stream = await read_part(upload.stream, self.part_size)
        if stream is None:  # the whole file fits in one part
            check_size(len(first), upload.size)
            body = part_body(first, upload.progress)
            await self.call("put_object", Key=key, Body=body, ContentType=content_type, **condition)
            return len(first)
        created = await self.call("create_multipart_upload", Key=key, ContentType=content_type)
        upload_id: str = created["UploadId"]
        try:
            parts, count = await self._send_parts(key, upload_id, first, stream, upload)
            check_size(count, upload.size)
            await self.call(
                "complete_multipart_upload",
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                **condition,
            )
        except BaseException:
            await self._abort_soon(key, upload_id)
            raise
        return count

    async def _send_parts(
        self,
        key: str,
        upload_id: str,
        first: bytes,
        stream: AsyncIterator[bytes],
        upload: Upload,
    ) -> tuple[list[dict[str, Any]], int]:
        """Upload ``first`` and the rest of ``stream`` as parts, each part sent while
        the next is read; the parts for completion, and the byte count."""
        size = upload.size
        parts: list[dict[str, Any]] = []
        count, number, data = 0, 1, first
        sending: asyncio.Task[dict[str, Any]] | None = None
        try:
            while data:
                count += len(data)
                if size is not None and count > size:
                    raise InvalidRequest(f"more bytes than the {size} announced")
                if sending is not None:
                    parts.append(await sending)
                body = part_body(data, upload.progress)
                sending = asyncio.ensure_future(self._part(key, upload_id, number, body))
                number += 1
                if number > MAX_PARTS:
                    raise InvalidRequest(f"a file of more than {MAX_PARTS} parts")
                data, _ = await read_part(stream, self._part_size(number, size))
            if sending is not None:
                parts.append(await sending)
                sending = None
        finally:
            if sending is not None:
                await _settle(sending)
        return parts, count

    async def _part(
        self, key: str, upload_id: str, number: int, body: bytes | io.BytesIO
    ) -> dict[str, Any]:
        sent = await self.call(
            "upload_part", Key=key, UploadId=upload_id, PartNumber=number, Body=body
        )
        return {"ETag": sent["ETag"], "PartNumber": number}

    def _part_size(self, number: int, size: int | None) -> int:
        if size is not None:
            return max(self.part_size, -(-size // MAX_PARTS))
        return min(LARGEST_PART, self.part_size << ((number - 1) // PARTS_PER_SIZE))

    async def copy_in_parts(
        self, source: dict[str, str], key: str, size: int, part_size: int
    ) -> None:
        """Copy ``source`` (bucket and key) to ``key`` in ranges (UploadPartCopy), for
        objects beyond CopyObject's 5 GiB."""
        part_size = max(part_size, -(-size // MAX_PARTS))
        created = await self.call("create_multipart_upload", Key=key)
        upload_id: str = created["UploadId"]
        try:
            parts = []
            for number, start in enumerate(range(0, size, part_size), start=1):
                end = min(size, start + part_size) - 1
                copied = await self.call(
                    "upload_part_copy",
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    CopySource=source,
                    CopySourceRange=f"bytes={start}-{end}",
                )
                parts.append({"ETag": copied["CopyPartResult"]["ETag"], "PartNumber": number})
                made_progress()
            await self.call(
                "complete_multipart_upload",
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except BaseException:
            await self._abort_soon(key, upload_id)
            raise

    async def _abort_soon(self, key: str, upload_id: str) -> None:
        """Abort an upload, finishing even if the caller is being cancelled."""
        task = background(self._abort(key, upload_id))
        with suppress(BaseException):
            await asyncio.shield(task)

    async def _abort(self, key: str, upload_id: str) -> None:
        try:
            await self.call("abort_multipart_upload", Key=key, UploadId=upload_id)
        except Exception as exc:
            if gone(exc):
                return
            self.unaborted.add((key, upload_id))
        else:
            self.unaborted.discard((key, upload_id))

    def _retry_aborts_soon(self) -> None:
        """Abort again, behind the caller's back, the uploads whose abort failed (the
        store was away); an upload never waits for an old one's clean-up."""
        if self.unaborted and (self._retrying is None or self._retrying.done()):
            self._retrying = background(self.retry_aborts())

    async def retry_aborts(self) -> None:
        for key, upload_id in list(self.unaborted):
            self.unaborted.discard((key, upload_id))
            await self._abort(key, upload_id)

    async def close(self) -> None:
        with suppress(Exception):
            async with asyncio.timeout(ABORT_SECONDS):
                await self.retry_aborts()


def gone(exc: Exception) -> bool:
    """Whether the store says the upload no longer exists (aborted or completed)."""
    cause = exc.__cause__ if isinstance(exc.__cause__, ClientError) else exc
    return isinstance(cause, ClientError) and answer(cause)[0] == "NoSuchUpload"


async def _settle(sending: asyncio.Future[Any]) -> None:
    """Let a part under way end before the upload is aborted (a part the store takes
    after the abort would linger), giving up on it after ``SETTLE_SECONDS``."""
    with suppress(BaseException):
        async with asyncio.timeout(SETTLE_SECONDS):
            await asyncio.shield(sending)
    sending.cancel()
    with suppress(BaseException):
        await sending
