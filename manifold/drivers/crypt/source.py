"""The encrypted bytes of a file on the storage below, a range at a time.

The storage below hands a link of any kind (a local file, a URL, a range reader);
this reads each the same way, within the driver layer: a local file in the disk
threads, a URL through the shared HTTP pool with a Range header.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import BinaryIO

import httpx

from manifold.concurrency import DISK_POOL, run_in
from manifold.drivers.base import Resources
from manifold.drivers.helpers import trimmed
from manifold.errors import ObjectNotFound, TemporaryFailure
from manifold.models import Link

CHUNK = 1 << 20


def read_range(
    link: Link, offset: int, length: int | None, resources: Resources
) -> AsyncIterator[bytes]:
    """Bytes ``[offset, offset + length)`` behind ``link`` (None: to the end)."""
    if link.reader is not None:
        return link.reader(offset, length)
    if link.file_path:
        return _file_range(link.file_path, offset, length)
    if link.url:
        return _url_range(link, offset, length, resources)
    raise ObjectNotFound("link has neither a file, a URL nor a reader")


async def _file_range(path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
    file = await run_in(DISK_POOL, _opened, path, offset)
    try:
        left = length
        while left is None or left > 0:
            data = await run_in(DISK_POOL, file.read, CHUNK if left is None else min(CHUNK, left))
            if not data:
                return
            left = None if left is None else left - len(data)
            yield data
    finally:
        await run_in(DISK_POOL, file.close)


def _opened(path: str, offset: int) -> BinaryIO:
    file = open(path, "rb", buffering=0)  # noqa: SIM115 -- closed by the reader
    file.seek(offset)
    return file


async def _url_range(
    link: Link, offset: int, length: int | None, resources: Resources
) -> AsyncIterator[bytes]:
    end = "" if length is None else str(offset + length - 1)
    headers = {**link.headers, "Range": f"bytes={offset}-{end}"}
    client = resources.http(verify=link.verify)
    try:
        async with client.stream("GET", link.url, headers=headers) as response:
            if response.status_code == 416:
                return
            if response.status_code in (404, 410):
                raise ObjectNotFound()
            if response.status_code not in (200, 206):
                raise TemporaryFailure(f"fetching the source failed: HTTP {response.status_code}")
            skip = offset if response.status_code == 200 else 0
            async for data in trimmed(response.aiter_bytes(CHUNK), skip, length):
                yield data
    except httpx.HTTPError as exc:
        raise TemporaryFailure(f"fetching the source failed: {type(exc).__name__}") from exc
