"""Receiving an upload, for every front end: checks, hashes, and as-task uploads.

The API's ``/api/fs/put`` and ``/api/fs/form`` hand the body here as a stream; the
WebDAV and S3 servers will too (their ``Content-MD5`` and ``x-amz-checksum-*`` go
into ``expected`` the same way). Expected hashes are checked at the end of the
stream, before the driver renames the upload into place, so a corrupted upload
leaves nothing behind. Hashing runs in worker threads (hashlib releases the GIL on
large buffers), so a big upload never holds the event loop.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Mapping
from datetime import datetime

from manifold.concurrency import CPU_POOL, run_in
from manifold.errors import InvalidRequest
from manifold.models import Task
from manifold.services.auth.service import Caller
from manifold.services.fs.transfers import Transfers
from manifold.services.fs.write import GuardedWriter
from manifold.services.runner import TaskService

HASHES = ("md5", "sha1", "sha256")
_FILE_READ = 4 << 20


class Uploads:
    def __init__(self, writer: GuardedWriter, transfers: Transfers, tasks: TaskService) -> None:
        self._writer = writer
        self._transfers = transfers
        self._tasks = tasks

    async def receive(
        self,
        caller: Caller,
        path: str,
        stream: AsyncIterator[bytes],
        size: int | None,
        *,
        password: str = "",
        modified: datetime | None = None,
        overwrite: bool = True,
        as_task: bool = False,
        expected: Mapping[str, str] | None = None,
    ) -> Task | None:
        """Store ``stream`` at ``path``; with ``as_task``, spool it and return the
        upload task that stores it. ``expected`` maps md5/sha1/sha256 to hex digests."""
        if expected:
            stream = verified(stream, expected)
        if not as_task:
            await self._writer.put(caller, path, password, stream, size, modified, overwrite)
            return None
        place, name = await self._writer.upload_target(caller, path, password, overwrite)
        spooled, spooled_size = await self._transfers.spool(stream, size)
        title = f"upload {name} to [{place.mount_path}]({_parent(place.sub_path)})"
        payload = {
            "spool": spooled,
            "path": place.path,
            "size": spooled_size,
            "overwrite": overwrite,
            "modified": None if modified is None else modified.timestamp(),
        }
        if password:
            payload["password"] = password  # a retry is checked with it again
        return await self._tasks.submit("upload", title, caller.user, payload, spooled_size)


def verified(stream: AsyncIterator[bytes], expected: Mapping[str, str]) -> AsyncIterator[bytes]:
    """``stream``, failing at its end unless each expected digest matches."""
    wanted = _wanted(expected)
    return _checked(stream, wanted) if wanted else stream


async def check_file(path: str, expected: Mapping[str, str]) -> None:
    """Fail unless the file at ``path`` has each expected digest: the file is read
    once, in a worker thread, every digest taken in the same pass."""
    wanted = _wanted(expected)
    if wanted:
        hashers = await run_in(CPU_POOL, _hash_file, path, list(wanted))
        _compare(hashers, wanted)


def _wanted(expected: Mapping[str, str]) -> dict[str, str]:
    wanted = {algo: digest.strip().lower() for algo, digest in expected.items() if digest.strip()}
    unknown = set(wanted) - set(HASHES)
    if unknown:
        raise InvalidRequest(f"unknown hash: {', '.join(sorted(unknown))}")
    return wanted


async def _checked(stream: AsyncIterator[bytes], wanted: dict[str, str]) -> AsyncIterator[bytes]:
    hashers = [(algo, hashlib.new(algo)) for algo in wanted]
    async for data in stream:
        await run_in(CPU_POOL, _update, hashers, data)
        yield data
    _compare(hashers, wanted)


def _compare(hashers: list[tuple[str, hashlib._Hash]], wanted: dict[str, str]) -> None:
    for algo, hasher in hashers:
        if hasher.hexdigest() != wanted[algo]:
            raise InvalidRequest(f"{algo} of the uploaded data does not match the header")


def _hash_file(path: str, algos: list[str]) -> list[tuple[str, hashlib._Hash]]:
    hashers = [(algo, hashlib.new(algo)) for algo in algos]
    with open(path, "rb", buffering=0) as file:
        while data := file.read(_FILE_READ):
            _update(hashers, data)
    return hashers


def _update(hashers: list[tuple[str, hashlib._Hash]], data: bytes) -> None:
    for _, hasher in hashers:
        hasher.update(data)


def _parent(sub_path: str) -> str:
    return sub_path.rsplit("/", 1)[0] or "/"
