"""A URL read in parts fetched side by side (Alias's ``download_concurrency`` and
``download_part_size``): for an upstream that serves each connection slowly, as some
cloud drives do. Memory stays bounded at ``concurrency`` parts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from manifold.errors import TemporaryFailure
from manifold.models import Link, RangeReader


def parted_reader(
    link: Link, size: int, client: httpx.AsyncClient, concurrency: int, part_size: int
) -> RangeReader:
    """A range reader over ``link.url`` (a file of ``size`` bytes), fetching up to
    ``concurrency`` parts of ``part_size`` bytes at once and yielding them in order."""

    async def fetch(start: int, stop: int) -> bytes:
        headers = {**link.headers, "Range": f"bytes={start}-{stop - 1}"}
        try:
            response = await client.get(link.url, headers=headers)
        except httpx.HTTPError as exc:
            raise TemporaryFailure(f"part download failed: {type(exc).__name__}") from exc
        if response.status_code != 206:
            raise TemporaryFailure(f"part download failed, status: {response.status_code}")
        if len(response.content) != stop - start:
            raise TemporaryFailure("part download failed: a short part")
        return response.content

    async def reader(offset: int, length: int | None) -> AsyncIterator[bytes]:
        end = size if length is None else min(size, offset + length)
        parts = [(s, min(s + part_size, end)) for s in range(offset, end, part_size)]
        running: list[asyncio.Task[bytes]] = []
        try:
            for index in range(len(parts)):
                while len(running) < concurrency and index + len(running) < len(parts):
                    running.append(asyncio.ensure_future(fetch(*parts[index + len(running)])))
                yield await running.pop(0)
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    return reader
