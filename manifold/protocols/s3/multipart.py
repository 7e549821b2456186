"""Where multipart uploads wait for their completion: a small interface and a local one.

``MultipartStore`` is what the S3 server needs from it. ``LocalMultipartStore`` keeps
each upload's parts in a private folder of its own under the data folder's ``temp``,
one file per part, written under a temporary
name and renamed when whole, so a part being re-sent never shows half. The folder is
emptied when the server starts and an upload's folder goes when it is completed or
aborted.

Instances that share the database share the uploads' records (table ``s3_uploads``),
each naming its ``holder``: the instance whose disk has the parts. Any instance lists
every upload and may abort any (the holder's parts go at its next start); a part, a
parts listing or the completion sent to an instance other than the holder is refused
with ``NoSuchUpload`` and a message that says where the upload is, since the parts
are not there. A load balancer keeps an upload on one instance by keeping a client on
one (stickiness by source address).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from manifold.concurrency import DISK_POOL, run_in
from manifold.protocols.s3.errors import S3Error
from manifold.services.fs.streams import file_stream
from manifold.state.records import S3UploadRepo, UploadRow

MAX_PART_NUMBER = 10_000
_ID = re.compile(r"[0-9a-f]{32}")
_PART = re.compile(r"part-(\d{5})-([0-9a-f]{32})")


@dataclass(frozen=True, slots=True)
class Upload:
    upload_id: str
    bucket: str
    key: str
    initiated: datetime
    holder: str = ""  # the instance whose disk keeps the parts


@dataclass(frozen=True, slots=True)
class Part:
    number: int
    etag: str  # the MD5 of the part's bytes, in hex, unquoted
    size: int
    modified: datetime

    @property
    def file_name(self) -> str:
        return f"part-{self.number:05d}-{self.etag}"


class MultipartStore(Protocol):
    """Uploads in progress and their parts. Every method raises ``S3Error("NoSuchUpload")``
    for an id it does not hold."""

    async def clear(self) -> None:
        """Forget every upload (at start: nothing survives a restart half-done)."""

    async def create(self, bucket: str, key: str) -> Upload: ...

    async def get(self, upload_id: str) -> Upload: ...

    async def uploads(self, bucket: str) -> list[Upload]:
        """The bucket's uploads, oldest first."""

    async def put_part(self, upload_id: str, number: int, stream: AsyncIterator[bytes]) -> Part:
        """Store part ``number`` whole, replacing an earlier one of that number."""

    async def parts(self, upload_id: str) -> list[Part]:
        """The parts stored, by number."""

    def read_parts(self, upload_id: str, parts: list[Part]) -> AsyncIterator[bytes]:
        """The bytes of ``parts`` (as ``parts`` gave them), one after another."""

    async def remove(self, upload_id: str) -> None:
        """Drop the upload and its parts; an unknown id is not an error."""


class LocalMultipartStore:
    def __init__(self, root: Path, records: S3UploadRepo, holder: str) -> None:
        self._root = root
        self._records = records
        self._holder = holder

    async def clear(self) -> None:
        await run_in(DISK_POOL, self._reset)
        await self._records.forget_holder(self._holder)

    def _reset(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)

    async def create(self, bucket: str, key: str) -> Upload:
        upload = Upload(secrets.token_hex(16), bucket, key, datetime.now(UTC), self._holder)
        await run_in(DISK_POOL, self._write_upload, upload)
        at = upload.initiated.timestamp()
        await self._records.add(UploadRow(upload.upload_id, bucket, key, at, self._holder))
        return upload

    def _write_upload(self, upload: Upload) -> None:
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self._root / upload.upload_id).mkdir(mode=0o700)

    async def get(self, upload_id: str) -> Upload:
        self._folder(upload_id)  # a malformed id is refused before any query
        row = await self._records.get(upload_id)
        if row is None:
            raise _missing()
        return _upload_of(row)

    async def uploads(self, bucket: str) -> list[Upload]:
        return [_upload_of(row) for row in await self._records.of_bucket(bucket)]

    async def _held_here(self, upload_id: str) -> Path:
        """The folder of an upload whose parts this instance keeps."""
        upload = await self.get(upload_id)
        if upload.holder != self._holder:
            raise S3Error(
                "NoSuchUpload",
                f"The parts of this multipart upload are kept by another server "
                f"({upload.holder}); send every request of an upload to the server that "
                "started it.",
            )
        return self._folder(upload_id)

    async def put_part(self, upload_id: str, number: int, stream: AsyncIterator[bytes]) -> Part:
        folder = await self._held_here(upload_id)
        temp = folder / f".{secrets.token_hex(8)}.partial"
        digest = hashlib.md5(usedforsecurity=False)
        file = await run_in(DISK_POOL, _open_private, temp)
        size = 0
        try:
            async for data in stream:
                await run_in(DISK_POOL, _write_hashed, file, digest, data)
                size += len(data)
            await run_in(DISK_POOL, file.close)
            part = Part(number, digest.hexdigest(), size, datetime.now(UTC))
            await run_in(DISK_POOL, _place, temp, folder, part)
        except BaseException:
            await run_in(DISK_POOL, _discard, file, temp)
            raise
        return part

    async def parts(self, upload_id: str) -> list[Part]:
        return await run_in(DISK_POOL, self._read_parts, await self._held_here(upload_id))

    def _read_parts(self, folder: Path) -> list[Part]:
        found: dict[int, Part] = {}
        try:
            paths = list(folder.iterdir())
        except FileNotFoundError:
            raise _missing() from None  # completed or aborted meanwhile
        for path in paths:
            match = _PART.fullmatch(path.name)
            if match is None:
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue  # replaced by a newer copy of the same part meanwhile
            modified = datetime.fromtimestamp(stat.st_mtime, UTC)
            part = Part(int(match.group(1)), match.group(2), stat.st_size, modified)
            if part.number not in found or found[part.number].modified < part.modified:
                found[part.number] = part
        return sorted(found.values(), key=lambda p: p.number)

    async def read_parts(self, upload_id: str, parts: list[Part]) -> AsyncIterator[bytes]:
        folder = self._folder(upload_id)
        for part in parts:
            async for data in file_stream(str(folder / part.file_name)):
                yield data

    async def remove(self, upload_id: str) -> None:
        await self._records.remove(upload_id)
        await run_in(DISK_POOL, shutil.rmtree, self._folder(upload_id), True)

    def _folder(self, upload_id: str) -> Path:
        if not _ID.fullmatch(upload_id):
            raise _missing()
        return self._root / upload_id


def _upload_of(row: UploadRow) -> Upload:
    at = datetime.fromtimestamp(row.initiated, UTC)
    return Upload(row.upload_id, row.bucket, row.key, at, row.holder)


def _missing() -> S3Error:
    return S3Error(
        "NoSuchUpload",
        "The specified multipart upload does not exist. The upload ID may be invalid, "
        "or the upload may have been aborted or completed.",
    )


def _open_private(path: Path) -> IO[bytes]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb")


def _write_hashed(file: IO[bytes], digest: Any, data: bytes) -> None:
    digest.update(data)
    file.write(data)


def _place(temp: Path, folder: Path, part: Part) -> None:
    """The part under its final name; an earlier copy of the same number goes."""
    os.replace(temp, folder / part.file_name)
    for path in folder.glob(f"part-{part.number:05d}-*"):
        if path.name != part.file_name:
            path.unlink(missing_ok=True)


def _discard(file: IO[bytes], path: Path) -> None:
    file.close()
    path.unlink(missing_ok=True)
