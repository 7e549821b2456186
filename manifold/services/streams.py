"""The bytes behind a link, streamed in bounded chunks: a local file or a URL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import IO

import httpx

from manifold.errors import ObjectNotFound, TemporaryFailure
from manifold.models import Link

CHUNK = 1 << 20


async def link_stream(link: Link, chunk: int = CHUNK) -> AsyncIterator[bytes]:
    """The bytes behind a link, in chunks of at most ``chunk`` bytes."""
    if link.file_path:
        async for data in file_stream(link.file_path, chunk):
            yield data
        return
    if not link.url:
        raise ObjectNotFound("link has neither a file nor a URL")
    try:
        async with (
            httpx.AsyncClient(
                follow_redirects=True, timeout=httpx.Timeout(30.0, read=300.0)
            ) as client,
            client.stream("GET", link.url, headers=link.headers) as response,
        ):
            if response.status_code >= 400:
                raise TemporaryFailure(f"fetching the source failed: HTTP {response.status_code}")
            async for data in response.aiter_bytes(chunk):
                yield data
    except httpx.HTTPError as exc:
        raise TemporaryFailure(f"fetching the source failed: {exc}") from exc


async def file_stream(path: str, chunk: int = CHUNK) -> AsyncIterator[bytes]:
    file = await _open(path)
    try:
        while data := await asyncio.to_thread(file.read, chunk):
            yield data
    finally:
        _close_soon(file)


async def _open(path: str) -> IO[bytes]:
    """Open ``path`` in a worker. An open that ends after its caller was cancelled (a
    FIFO waits for its writer, a network file system for its server) closes the file it
    made, rather than leaving it to the garbage collector."""
    opening: asyncio.Future[IO[bytes]]
    opening = asyncio.ensure_future(asyncio.to_thread(open, path, "rb", buffering=0))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        opening.add_done_callback(_close_opened)
        raise


def _close_opened(opening: asyncio.Future[IO[bytes]]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


def _close_soon(file: IO[bytes]) -> None:
    # Closed in a worker: a cancelled read may still hold the file in its thread, and
    # closing it here would block the event loop until that read returns. Without a
    # loop (a generator finalised late) it is closed at once.
    try:
        asyncio.get_running_loop().run_in_executor(None, file.close)
    except RuntimeError:
        file.close()
