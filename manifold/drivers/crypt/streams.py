"""Contents decrypted as they are read and encrypted as they are written.

Both sides work a batch of blocks at a time in the storage's threads (the
secretbox calls release the GIL), so memory stays at a batch per transfer however
large the file, and a range reads the header and the blocks it touches: a read near
the end of a 10 GiB file fetches a few blocks, never the bytes before them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from manifold.drivers.crypt.blocks import (
    BLOCK_SIZE,
    DATA_SIZE,
    HEADER_SIZE,
    header_nonce,
    new_header,
    open_blocks,
    seal_blocks,
)
from manifold.drivers.helpers import check_size, trimmed
from manifold.errors import InvalidRequest

Run = Callable[..., Awaitable[Any]]
# A range of the encrypted file: (offset, length or None for the rest).
Source = Callable[[int, int | None], AsyncIterator[bytes]]
# Blocks opened or sealed per call in a thread: 1 MiB.
BATCH = 16


async def decrypted(
    source: Source, key: bytes, offset: int, length: int | None, run: Run
) -> AsyncIterator[bytes]:
    """Plain bytes ``[offset, offset + length)`` of the encrypted file ``source`` reads."""
    if length == 0:
        return
    first = offset // DATA_SIZE
    span = None
    if length is not None:
        span = ((offset + length - 1) // DATA_SIZE - first + 1) * BLOCK_SIZE
    if first == 0:  # the header and the blocks in one read
        blocks = source(0, None if span is None else HEADER_SIZE + span)
        nonce = None
    else:
        nonce = header_nonce(b"".join([data async for data in source(0, HEADER_SIZE)]))
        blocks = source(HEADER_SIZE + first * BLOCK_SIZE, span)
    plain = _opened(blocks, key, nonce, first, run)
    async for data in trimmed(plain, offset - first * DATA_SIZE, length):
        yield data


async def _opened(
    blocks: AsyncIterator[bytes], key: bytes, nonce: bytes | None, index: int, run: Run
) -> AsyncIterator[bytes]:
    """The plain bytes of ``blocks`` (led by the header when ``nonce`` is None)."""
    pending = bytearray()
    try:
        async for data in blocks:
            pending += data
            if nonce is None:
                if len(pending) < HEADER_SIZE:
                    continue
                nonce = header_nonce(bytes(pending[:HEADER_SIZE]))
                del pending[:HEADER_SIZE]
            whole = len(pending) // BLOCK_SIZE
            if whole >= BATCH:
                cut = whole * BLOCK_SIZE
                yield await run(open_blocks, key, nonce, index, bytes(pending[:cut]))
                del pending[:cut]
                index += whole
        if nonce is None:
            nonce = header_nonce(bytes(pending))  # too short: raises
        if pending:
            yield await run(open_blocks, key, nonce, index, bytes(pending))
    finally:
        await _close(blocks)


async def _close(stream: AsyncIterator[bytes]) -> None:
    closing = getattr(stream, "aclose", None)
    if closing is not None:
        await closing()


async def encrypted(
    stream: AsyncIterator[bytes], key: bytes, size: int | None, run: Run
) -> AsyncIterator[bytes]:
    """``stream`` as an encrypted file; raises ``InvalidRequest`` before the last bytes
    go when the stream does not hold ``size`` bytes, so nothing is put."""
    header = new_header()
    nonce = header_nonce(header)
    yield header
    pending = bytearray()
    index = count = 0
    async for data in stream:
        count += len(data)
        if size is not None and count > size:
            raise InvalidRequest(f"upload size mismatch: more than the {size} bytes announced")
        pending += data
        if len(pending) >= BATCH * DATA_SIZE:
            whole = len(pending) // DATA_SIZE
            cut = whole * DATA_SIZE
            yield await run(seal_blocks, key, nonce, index, bytes(pending[:cut]))
            del pending[:cut]
            index += whole
    check_size(count, size)
    if pending:
        yield await run(seal_blocks, key, nonce, index, bytes(pending))
