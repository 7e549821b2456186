"""An upload's stream cut into parts of a bounded size (S3's multipart parts, Azure's
blocks), each part's bytes telling the upload's progress as the HTTP client sends them.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable


async def read_part(
    stream: AsyncIterator[bytes], size: int
) -> tuple[bytes, AsyncIterator[bytes] | None]:
    """Up to ``size`` bytes of ``stream`` (more when a chunk crosses the line, carried
    to the next part); and the stream when bytes may follow, ``None`` when it ended."""
    chunks: list[bytes] = []
    held = 0
    async for chunk in stream:
        chunks.append(chunk)
        held += len(chunk)
        if held >= size:
            return b"".join(chunks), stream
    return b"".join(chunks), None


class _Reported(io.BytesIO):
    """A part's bytes that tell ``progress`` of each piece read from them as the HTTP
    client sends them (it reads a file body a piece at a time, as the socket takes it)."""

    def __init__(self, data: bytes, progress: Callable[[int], None]) -> None:
        super().__init__(data)
        self._progress = progress

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        self._progress(len(data))
        return data


def part_body(data: bytes, progress: Callable[[int], None] | None) -> bytes | io.BytesIO:
    """``data`` as a request body that reports to ``progress`` (when set) as it goes."""
    return data if progress is None else _Reported(data, progress)
