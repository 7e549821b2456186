"""The API's resumable multipart uploads straight into S3's own multipart upload.

A session begins one ``CreateMultipartUpload``; each chunk is one ``UploadPart``
(part number = chunk index + 1), from whichever instance receives it; completion asks
the store for the parts (``ListParts``), so no instance keeps ETags for another, and
sends ``CompleteMultipartUpload``. The token kept in the database is the key, the
temporary key (if any) and the upload id, as JSON.

Hashes the page gave at ``init`` must match before anything takes the name. S3 knows
no digest of a multipart object, so such an upload is begun under a temporary key in
the same folder, completed there, read back hashing, then copied into place on the
store (``CopyObject``; in parts above 5 GiB) and the temporary removed; on a mismatch
only the temporary is removed. Measured on moto for a 1 GiB file in 10 MiB chunks
(one loaded machine): parts 28 s, ListParts and complete 22 s, read back hashing 7 s,
CopyObject 24 s; sending the bytes through this server again as a new upload instead
of the copy took 66 s, and on a real store a copy moves nothing out of it. Hashing the
chunks as they arrive would spare the read back only while they come in order to one
process: a hash's state cannot be kept in the database for a restart or another
instance to go on with, so the read back is the one way that holds for every session,
and it is paid only when the page sends hashes; without them the upload is completed
under its name directly (no copy).
"""

from __future__ import annotations

import mimetypes
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import suppress
from typing import Any

from manifold.drivers.base import NativeParts
from manifold.drivers.multipart import check_hashes, make_token, read_exactly, read_token
from manifold.errors import InvalidRequest, ManifoldError

from .upload import Uploader, gone

# S3's smallest part, but for the last.
MIN_PART = 5 << 20
# Parts one ListParts answers (S3's maximum).
LIST_PAGE = 1000


class NativeUploads:
    """Multipart uploads the API's sessions drive, through ``uploader``'s client."""

    def __init__(self, uploader: Uploader, copy: Callable[[str, str, int], Any]) -> None:
        self.uploader = uploader
        self._copy = copy  # (key, new key, size): the driver's copy on the store

    async def begin(self, key: str, temp: str) -> str:
        """Begin the upload of ``key``, under the key ``temp`` when one is given."""
        content_type = mimetypes.guess_type(key)[0] or "application/octet-stream"
        created = await self.uploader.call(
            "create_multipart_upload", Key=temp or key, ContentType=content_type
        )
        return make_token(key, temp, created["UploadId"])

    async def part(self, token: str, index: int, length: int, stream: AsyncIterator[bytes]) -> None:
        upload = read_token(token)
        body = await read_exactly(stream, length)
        await self.uploader.call(
            "upload_part",
            Key=upload["temp"] or upload["key"],
            UploadId=upload["id"],
            PartNumber=index + 1,
            Body=body,
        )

    async def abort(self, token: str) -> None:
        upload = read_token(token)
        try:
            key = upload["temp"] or upload["key"]
            await self.uploader.call("abort_multipart_upload", Key=key, UploadId=upload["id"])
        except ManifoldError as exc:
            if not gone(exc):
                raise

    async def finish(self, key: str, native: NativeParts, overwrite: bool) -> int:
        """Complete the upload as ``key``; its size."""
        upload = read_token(native.token)
        if upload["key"] != key:
            raise InvalidRequest("the multipart upload was begun for another name")
        target = upload["temp"] or key
        parts, size = await self._parts(target, upload["id"], native.count)
        condition = {} if overwrite or upload["temp"] else {"IfNoneMatch": "*"}
        await self.uploader.call(
            "complete_multipart_upload",
            Key=target,
            UploadId=upload["id"],
            MultipartUpload={"Parts": parts},
            **condition,
        )
        if upload["temp"]:
            await self._checked_into_place(upload["temp"], key, size, native.expected)
        return size

    async def _parts(self, key: str, upload_id: str, count: int) -> tuple[list[Any], int]:
        """The parts the store holds (their ETags for completion) and their bytes;
        ``InvalidRequest`` unless they are exactly parts 1 to ``count``."""
        parts: list[dict[str, Any]] = []
        size, after = 0, 0
        while True:
            page = await self.uploader.call(
                "list_parts",
                Key=key,
                UploadId=upload_id,
                PartNumberMarker=after,
                MaxParts=LIST_PAGE,
            )
            for part in page.get("Parts") or ():
                parts.append({"ETag": part["ETag"], "PartNumber": part["PartNumber"]})
                size += int(part["Size"])
            if not page.get("IsTruncated"):
                break
            after = int(page["NextPartNumberMarker"])
        if [p["PartNumber"] for p in parts] != list(range(1, count + 1)):
            raise InvalidRequest(f"the store holds {len(parts)} of the {count} parts")
        return parts, size

    async def _checked_into_place(
        self, temp: str, key: str, size: int, expected: Mapping[str, str]
    ) -> None:
        try:
            await self._check(temp, expected)
            await self._copy(temp, key, size)
        finally:
            with suppress(ManifoldError):
                await self.uploader.call("delete_object", Key=temp)

    async def _check(self, key: str, expected: Mapping[str, str]) -> None:
        answer = await self.uploader.call("get_object", Key=key)
        async with answer["Body"] as body:
            await check_hashes(body.iter_chunks(1 << 20), expected)
