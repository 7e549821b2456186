"""Uploads into a container that appear whole or not at all.

A stream that ends within its first block is one Put Blob. A longer one (or one of
unknown size that turns out long) is staged as blocks of a bounded size, one block
sending while the next is read (memory: two blocks), and becomes the blob only when
Put Block List commits every block after the last arrived. Until then the blocks are
uncommitted: no listing, read or lookup sees them, and a blob already at the name
keeps its bytes. A failed, cut or cancelled upload commits nothing; the service
discards its uncommitted blocks by itself (within a week, or at the name's next
commit), as it offers no call to discard them sooner.

The service's errors are translated around each request only: an exception the
upload's stream raises passes through unchanged.
"""

from __future__ import annotations

import asyncio
import mimetypes
import secrets
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

from azure.core import MatchConditions
from azure.storage.blob import BlobBlock, ContentSettings
from azure.storage.blob.aio import BlobClient

from manifold.drivers.base import ErrorTable, Upload, check_size, translating
from manifold.drivers.parts import part_body, read_part
from manifold.errors import InvalidRequest

# The service's limits: blocks of one blob, and the largest block.
MAX_BLOCKS = 50_000
LARGEST_BLOCK = 4000 << 20
# With the size unknown, blocks double in size every this many blocks, so a blob of
# any size the service takes fits in its 50,000 blocks.
BLOCKS_PER_SIZE = 5_000


class BlockUploader:
    """Puts streams into blobs in blocks of ``block_size`` bytes (at least)."""

    def __init__(self, errors: ErrorTable, block_size: int) -> None:
        self.errors = errors
        self.block_size = block_size

    async def put(self, blob: BlobClient, upload: Upload, metadata: dict[str, str]) -> int:
        """Store ``upload`` as ``blob``; the byte count. With ``overwrite`` false the
        service refuses a taken name when the blob is committed (If-None-Match: *)."""
        # None: no condition; IfMissing: If-None-Match: *
        condition = None if upload.overwrite else MatchConditions.IfMissing
        settings = ContentSettings(
            content_type=mimetypes.guess_type(blob.blob_name)[0] or "application/octet-stream"
        )
        first, stream = await read_part(upload.stream, self.block_size)
        if stream is None:  # the whole file fits in one block
            check_size(len(first), upload.size)
            with translating(self.errors):
                await blob.upload_blob(
                    part_body(first, upload.progress),
                    length=len(first),
                    overwrite=upload.overwrite,
                    metadata=metadata,
                    content_settings=settings,
                )
            return len(first)
        blocks, count = await self._stage(blob, first, stream, upload)
        check_size(count, upload.size)
        with translating(self.errors):
            await blob.commit_block_list(
                [BlobBlock(block_id) for block_id in blocks],
                content_settings=settings,
                metadata=metadata,
                match_condition=condition,
            )
        return count

    async def _stage(
        self, blob: BlobClient, first: bytes, stream: AsyncIterator[bytes], upload: Upload
    ) -> tuple[list[str], int]:
        """Stage ``first`` and the rest of ``stream`` as blocks, each sent while the
        next is read; the block ids in order, and the byte count."""
        # Ids of one blob's blocks have one length; a token of this upload's own keeps
        # its blocks apart from another upload's to the same name.
        token = secrets.token_hex(8)
        size, blocks = upload.size, list[str]()
        count, data = 0, first
        sending: asyncio.Future[None] | None = None
        try:
            while data:
                count += len(data)
                if size is not None and count > size:
                    raise InvalidRequest(f"more bytes than the {size} announced")
                if len(blocks) >= MAX_BLOCKS:
                    raise InvalidRequest(f"a file of more than {MAX_BLOCKS} blocks")
                if sending is not None:
                    await sending
                blocks.append(f"{token}-{len(blocks):06d}")
                body = part_body(data, upload.progress)
                sending = asyncio.ensure_future(self._block(blob, blocks[-1], body, len(data)))
                data, _ = await read_part(stream, self._block_size(len(blocks), size))
            if sending is not None:
                await sending
                sending = None
        finally:
            if sending is not None:
                sending.cancel()
                with suppress(BaseException):
                    await sending
        return blocks, count

    async def _block(self, blob: BlobClient, block_id: str, body: Any, length: int) -> None:
        with translating(self.errors):
            await blob.stage_block(block_id, body, length=length)

    def _block_size(self, staged: int, size: int | None) -> int:
        if size is not None:
            return max(self.block_size, -(-size // MAX_BLOCKS))
        return min(LARGEST_BLOCK, self.block_size << (staged // BLOCKS_PER_SIZE))
