"""Where multipart uploads wait for their completion: a small interface and a local one.

``MultipartStore`` is what the S3 server needs from it, so that several servers can
later share one (a database and a shared folder) without the handlers changing.
``LocalMultipartStore`` keeps each upload in a private folder of its own under the
data folder's ``temp``: ``upload.json`` (bucket, key, start) and one file per part,
written under a temporary name and renamed when whole, so a part being re-sent never
shows half. The folder is emptied when the server starts and an upload's folder goes
when it is completed or aborted.
"""

from __future__ import annotations

import hashlib
import json
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

MAX_PART_NUMBER = 10_000
_ID = re.compile(r"[0-9a-f]{32}")
_PART = re.compile(r"part-(\d{5})-([0-9a-f]{32})")


@dataclass(frozen=True, slots=True)
class Upload:
    upload_id: str
    bucket: str
    key: str
    initiated: datetime


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
    def __init__(self, root: Path) -> None:
        self._root = root

    async def clear(self) -> None:
        await run_in(DISK_POOL, self._reset)

    def _reset(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)

    async def create(self, bucket: str, key: str) -> Upload:
        upload = Upload(secrets.token_hex(16), bucket, key, datetime.now(UTC))
        await run_in(DISK_POOL, self._write_upload, upload)
        return upload

    def _write_upload(self, upload: Upload) -> None:
        folder = self._root / upload.upload_id
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700)
        record = {"bucket": upload.bucket, "key": upload.key, "at": upload.initiated.isoformat()}
        _write_private(folder / "upload.json", json.dumps(record).encode())

    async def get(self, upload_id: str) -> Upload:
        return await run_in(DISK_POOL, self._read_upload, self._folder(upload_id))

    def _read_upload(self, folder: Path) -> Upload:
        try:
            record = json.loads((folder / "upload.json").read_bytes())
        except (OSError, ValueError) as exc:
            raise _missing() from exc
        at = datetime.fromisoformat(record["at"])
        return Upload(folder.name, record["bucket"], record["key"], at)

    async def uploads(self, bucket: str) -> list[Upload]:
        found = await run_in(DISK_POOL, self._all_uploads)
        return sorted((u for u in found if u.bucket == bucket), key=lambda u: u.initiated)

    def _all_uploads(self) -> list[Upload]:
        found = []
        for folder in self._root.iterdir() if self._root.is_dir() else ():
            try:
                found.append(self._read_upload(folder))
            except S3Error:
                continue  # aborted meanwhile
        return found

    async def put_part(self, upload_id: str, number: int, stream: AsyncIterator[bytes]) -> Part:
        folder = self._folder(upload_id)
        await self.get(upload_id)
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
        await self.get(upload_id)
        return await run_in(DISK_POOL, self._read_parts, self._folder(upload_id))

    def _read_parts(self, folder: Path) -> list[Part]:
        found: dict[int, Part] = {}
        for path in folder.iterdir():
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
        await run_in(DISK_POOL, shutil.rmtree, self._folder(upload_id), True)

    def _folder(self, upload_id: str) -> Path:
        if not _ID.fullmatch(upload_id):
            raise _missing()
        return self._root / upload_id


def _missing() -> S3Error:
    return S3Error(
        "NoSuchUpload",
        "The specified multipart upload does not exist. The upload ID may be invalid, "
        "or the upload may have been aborted or completed.",
    )


def _open_private(path: Path) -> IO[bytes]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb")


def _write_private(path: Path, data: bytes) -> None:
    with _open_private(path) as file:
        file.write(data)


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
