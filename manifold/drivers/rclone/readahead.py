"""Long downloads of the Rclone driver as ranges fetched side by side.

On an SFTP remote rclone decrypts one connection's stream on one core, and that is
what bounds a download (``rclone cat`` too): a long read fetched as ranges of
``RANGE`` bytes, ``STREAMS`` of them at once over connections of their own, has the
second one decrypted meanwhile. Each range is read by a task of its own at most
``AHEAD`` bytes ahead of the client, so a download holds at most
``STREAMS * AHEAD`` bytes besides aiohttp's buffer of each connection.

One stream gains nothing from a task reading ahead: aiohttp already reads its
connection as data arrives (up to its own buffer) while the server writes the last
piece to the client. Object stores (S3 on moto here) lose by ranges: every ranged
request starts over at the object's first-byte latency.

The reader gives exactly the bytes asked for or fails: a range's error is raised in
order, after the bytes before it, and a range that ends short fails the read rather
than shortening it. Closing the reader (the client went away) cancels the ranges in
flight and closes their connections before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Callable

from manifold.errors import TemporaryFailure

# Ranges of a long read, how many are fetched at once, and bytes each is read ahead.
RANGE = 64 << 20
STREAMS = 2
AHEAD = 4 << 20

# A ranged read of a remote file: ``(start, length)`` (None: to its end) to its bytes.
Source = Callable[[int, int | None], AsyncGenerator[bytes, None]]


class ReadAhead:
    """One range's pieces, read by a task at most ``limit`` bytes ahead of the consumer."""

    def __init__(self, source: AsyncGenerator[bytes, None], limit: int) -> None:
        self._source = source
        self._limit = limit
        self._pieces: deque[bytes] = deque()
        self._held = 0
        self._failure: Exception | None = None
        self._ended = False
        self._arrived = asyncio.Event()
        self._taken = asyncio.Event()
        self._task = asyncio.create_task(self._fill())

    async def _fill(self) -> None:
        try:
            async for data in self._source:
                self._pieces.append(data)
                self._held += len(data)
                self._arrived.set()
                while self._held >= self._limit:
                    self._taken.clear()
                    await self._taken.wait()
        except Exception as exc:
            self._failure = exc
        finally:
            self._ended = True
            self._arrived.set()
            with contextlib.suppress(Exception):
                await self._source.aclose()

    async def next(self) -> bytes | None:
        """The next piece; None at the end; the range's error after the pieces before it."""
        while not self._pieces:
            if self._ended:
                if self._failure is not None:
                    raise self._failure
                return None
            self._arrived.clear()
            await self._arrived.wait()
        data = self._pieces.popleft()
        self._held -= len(data)
        self._taken.set()
        return data

    async def aclose(self) -> None:
        """Stop the background read; its connection is closed when this returns."""
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def ranges(start: int, length: int | None, size: int) -> list[tuple[int, int | None]]:
    """A read split into ranges of ``RANGE`` bytes of the file as listed (one range
    when it is not longer). The last range asks for the rest of what was asked, so
    the read ends where one request would have: at the end of a file grown or
    shrunk since it was listed, never past ``start + length``."""
    end = size if length is None else min(start + length, size)
    if end - start <= RANGE:
        return [(start, length)]
    parts: list[tuple[int, int | None]] = [
        (at, min(RANGE, end - at)) for at in range(start, end, RANGE)
    ]
    last = parts[-1][0]
    parts[-1] = (last, None if length is None else start + length - last)
    return parts


async def read(
    source: Source, start: int, length: int | None, size: int
) -> AsyncGenerator[bytes, None]:
    """Bytes ``start`` to ``start + length`` (None: to the end) of a file of ``size``
    bytes: one request for a short read, ranges side by side for a long one."""
    parts = ranges(start, length, size)
    one = len(parts) == 1
    reading = source(start, length) if one else _ranged(source, deque(parts))
    async with contextlib.aclosing(reading):
        async for data in reading:
            yield data


async def _ranged(
    source: Source, waiting: deque[tuple[int, int | None]]
) -> AsyncGenerator[bytes, None]:
    flight: deque[tuple[ReadAhead, int | None]] = deque()
    try:
        while waiting or flight:
            while waiting and len(flight) < STREAMS:
                at, length = waiting.popleft()
                flight.append((ReadAhead(source(at, length), AHEAD), length))
            stream, length = flight[0]
            got = 0
            while (data := await stream.next()) is not None:
                got += len(data)
                yield data
            # Short only at the end, as one request would be: a hole anywhere else.
            if (waiting or len(flight) > 1) and got != length:
                raise TemporaryFailure(f"the file changed while read: {got} of {length} bytes")
            flight.popleft()
    finally:
        for stream, _length in flight:
            await stream.aclose()
