"""Where multipart uploads wait for their completion: a small interface and a local one.

``MultipartStore`` is what the S3 server needs from it. ``LocalMultipartStore`` keeps
each upload's parts in a private folder of its own under the data folder's ``temp``,
one file per part, written under a temporary name and renamed when whole, so a part
being re-sent never shows half. The headers the upload was started with wait there
too (``headers.json``), for the object it makes. An aborted upload's folder goes at
once; a completed one's parts go and its answer stays (``completed.json``), so the
same completion sent again gets the same answer, as S3 gives it.

Uploads survive a restart. ``sweep`` drops what has been idle longer than the expiry
(no part, listing or completion for that long; a completed upload's answer as long
after its completion), at start and then every so often, and what a crash left
behind (half-written parts, a folder without its record or the other way round).

Instances that share the database share the uploads' records (table ``s3_uploads``),
each naming its ``holder``: the instance whose disk has the parts. Any instance lists
every upload and may abort any (the holder's parts go at its next sweep); a part, a
parts listing or the completion sent to an instance other than the holder is refused
with ``NoSuchUpload`` and a message that says where the upload is, since the parts
are not there. A load balancer keeps an upload on one instance by keeping a client on
one (stickiness by source address).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from manifold.concurrency import DISK_POOL, run_in
from manifold.protocols.s3.errors import S3Error
from manifold.services.fs.streams import file_stream
from manifold.state.records import S3UploadRepo, UploadRow

log = logging.getLogger("manifold.s3")

MAX_PART_NUMBER = 10_000
_ID = re.compile(r"[0-9a-f]{32}")
_PART = re.compile(r"part-(\d{5})-([0-9a-f]{32})")
_HEADERS = "headers.json"
_COMPLETED = "completed.json"


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


@dataclass(frozen=True, slots=True)
class Completed:
    """What a completion answered, kept to answer the same completion again."""

    bucket: str
    key: str
    etag: str  # quoted
    parts: str  # the parts it named, as ``parts_named`` writes them


def parts_named(parts: list[tuple[int, str]]) -> str:
    """A completion's list of (number, ETag) in one string, to tell the same list again."""
    return ",".join(f"{number}:{etag}" for number, etag in parts)


class MultipartStore(Protocol):
    """Uploads in progress and their parts. Every method raises ``S3Error("NoSuchUpload")``
    for an id it does not hold."""

    async def sweep(self, max_idle: float, starting: bool = False) -> None:
        """Drop the uploads idle for more than ``max_idle`` seconds and what a crash
        left (``starting``: no part is being written)."""

    async def create(self, bucket: str, key: str, headers: Mapping[str, str]) -> Upload:
        """A new upload; ``headers`` are kept for the object it makes."""

    async def get(self, upload_id: str) -> Upload: ...

    async def headers(self, upload_id: str) -> dict[str, str]:
        """The headers the upload was created with."""

    async def uploads(self, bucket: str) -> list[Upload]:
        """The bucket's uploads, oldest first."""

    async def put_part(self, upload_id: str, number: int, stream: AsyncIterator[bytes]) -> Part:
        """Store part ``number`` whole, replacing an earlier one of that number."""

    async def parts(self, upload_id: str) -> list[Part]:
        """The parts stored, by number."""

    def read_parts(self, upload_id: str, parts: list[Part]) -> AsyncIterator[bytes]:
        """The bytes of ``parts`` (as ``parts`` gave them), one after another."""

    async def complete(self, upload_id: str, answer: Completed) -> None:
        """Drop the upload's parts and keep ``answer`` in its place for a while."""

    async def completed(self, upload_id: str) -> Completed | None:
        """The answer kept for a completed upload, if this instance has it."""

    async def remove(self, upload_id: str) -> None:
        """Drop the upload and its parts; an unknown id is not an error."""


async def keep_swept(store: MultipartStore, max_idle: float) -> None:
    """Sweep ``store`` every quarter of ``max_idle`` (at most every hour), until cancelled."""
    every = min(max(max_idle / 4, 0.25), 3600.0)
    while True:
        await asyncio.sleep(every)
        try:
            await store.sweep(max_idle)
        except Exception as exc:  # never an unhandled error in a background task
            log.warning("sweeping the S3 multipart uploads failed: %s", exc)


class LocalMultipartStore:
    def __init__(self, root: Path, records: S3UploadRepo, holder: str) -> None:
        self._root = root
        self._records = records
        self._holder = holder
        # A sweep never runs while an upload is being made (its folder and its record
        # appear one after the other).
        self._making = asyncio.Lock()

    async def sweep(self, max_idle: float, starting: bool = False) -> None:
        async with self._making:
            rows = {row.upload_id for row in await self._records.of_holder(self._holder)}
            cutoff = time.time() - max_idle
            kept = await run_in(DISK_POOL, _sweep_folders, self._root, rows, cutoff, starting)
            for upload_id in rows - kept:
                await self._records.remove(upload_id)

    async def create(self, bucket: str, key: str, headers: Mapping[str, str]) -> Upload:
        upload = Upload(secrets.token_hex(16), bucket, key, datetime.now(UTC), self._holder)
        at = upload.initiated.timestamp()
        async with self._making:
            await run_in(DISK_POOL, self._write_upload, upload, dict(headers))
            await self._records.add(UploadRow(upload.upload_id, bucket, key, at, self._holder))
        return upload

    def _write_upload(self, upload: Upload, headers: dict[str, str]) -> None:
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder = self._root / upload.upload_id
        folder.mkdir(mode=0o700)
        _write_json(folder / _HEADERS, headers)

    async def get(self, upload_id: str) -> Upload:
        self._folder(upload_id)  # a malformed id is refused before any query
        row = await self._records.get(upload_id)
        if row is None:
            raise _missing()
        return _upload_of(row)

    async def headers(self, upload_id: str) -> dict[str, str]:
        folder = await self._held_here(upload_id)
        found = await run_in(DISK_POOL, _read_json, folder / _HEADERS)
        return {str(k): str(v) for k, v in (found or {}).items()}

    async def uploads(self, bucket: str) -> list[Upload]:
        return [_upload_of(row) for row in await self._records.of_bucket(bucket)]

    async def _held_here(self, upload_id: str) -> Path:
        """The folder of an upload whose parts this instance keeps, marked as in use."""
        upload = await self.get(upload_id)
        if upload.holder != self._holder:
            raise S3Error(
                "NoSuchUpload",
                f"The parts of this multipart upload are kept by another server "
                f"({upload.holder}); send every request of an upload to the server that "
                "started it.",
            )
        folder = self._folder(upload_id)
        await run_in(DISK_POOL, _touch, folder)
        return folder

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

    async def complete(self, upload_id: str, answer: Completed) -> None:
        folder = self._folder(upload_id)
        # Aborted while it was being completed: there is nothing to answer again.
        with contextlib.suppress(FileNotFoundError):
            await run_in(DISK_POOL, _write_json, folder / _COMPLETED, asdict(answer))
        await self._records.remove(upload_id)
        await run_in(DISK_POOL, _drop_parts, folder)

    async def completed(self, upload_id: str) -> Completed | None:
        found = await run_in(DISK_POOL, _read_json, self._folder(upload_id) / _COMPLETED)
        if not isinstance(found, dict):
            return None
        try:
            return Completed(**{k: str(found[k]) for k in ("bucket", "key", "etag", "parts")})
        except KeyError:
            return None

    async def remove(self, upload_id: str) -> None:
        await self._records.remove(upload_id)
        await run_in(DISK_POOL, shutil.rmtree, self._folder(upload_id), True)

    def _folder(self, upload_id: str) -> Path:
        if not _ID.fullmatch(upload_id):
            raise _missing()
        return self._root / upload_id


def _sweep_folders(root: Path, records: set[str], cutoff: float, starting: bool) -> set[str]:
    """Remove the folders under ``root`` idle since before ``cutoff``, those of uploads
    without a record (aborted on another instance), and half-written parts; the ids
    of the uploads in progress that stay."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    kept: set[str] = set()
    for folder in root.iterdir():
        done = (folder / _COMPLETED).exists()
        live = folder.name in records and not done
        if not _ID.fullmatch(folder.name) or not (live or done) or _last_use(folder) < cutoff:
            _remove(folder)
            continue
        for temp in folder.glob(".*.partial"):
            if starting or _mtime(temp) < cutoff:
                temp.unlink(missing_ok=True)
        if live:
            kept.add(folder.name)
    return kept


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _last_use(folder: Path) -> float:
    """When an upload was last used: its folder is touched by every request that uses
    it, and a part being written keeps its own file's time moving."""
    times = [_mtime(folder), *(_mtime(p) for p in folder.glob(".*.partial"))]
    return max(times)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _touch(folder: Path) -> None:
    try:
        os.utime(folder)
    except FileNotFoundError:
        raise _missing() from None  # aborted or swept meanwhile


def _drop_parts(folder: Path) -> None:
    try:
        paths = list(folder.iterdir())
    except FileNotFoundError:
        return
    for path in paths:
        if path.name != _COMPLETED:
            path.unlink(missing_ok=True)


def _write_json(path: Path, value: Any) -> None:
    temp = path.with_name(f".{secrets.token_hex(8)}.partial")
    with _open_private(temp) as file:
        file.write(json.dumps(value).encode())
    os.replace(temp, path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None


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
