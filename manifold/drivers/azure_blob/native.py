"""The API's resumable multipart uploads straight into staged blocks of a blob.

Each chunk is one Put Block, from whichever instance receives it, with a block id of
fixed width made of the upload's own token and the chunk's index (an id of another
upload to the same name never meets it); completion asks the service for the blob's
uncommitted blocks, checks that every chunk is there, and commits them in order. Until
then no listing, read or lookup sees them, and a blob already at the name keeps its
bytes. The token kept in the database is the blob's name, the temporary name (if any)
and the upload's id, as JSON.

With hashes to check the blocks are staged and committed under a temporary name in
the same folder, read back hashing, and copied into place on the service (Copy Blob),
as the S3 driver does and for the same reasons (see ``drivers.s3.native``). The service
has no call to discard uncommitted blocks: those of an aborted or expired upload stay,
invisible, until it discards them itself (a week at most, or at the name's next
commit), as those of any failed upload do.
"""

from __future__ import annotations

import mimetypes
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any

from azure.core import MatchConditions
from azure.storage.blob import BlobBlock, ContentSettings
from azure.storage.blob.aio import BlobClient

from manifold.drivers.base import NativeParts
from manifold.drivers.multipart import check_hashes, make_token, read_exactly, read_token
from manifold.errors import InvalidRequest, ManifoldError


class NativeBlocks:
    """Block uploads the API's sessions drive, through the driver's own calls."""

    def __init__(
        self,
        blob: Callable[[str], BlobClient],
        call: Callable[[Awaitable[Any]], Awaitable[Any]],
        copy: Callable[[str, str, bool], Awaitable[None]],
    ) -> None:
        self._blob = blob  # a client of the blob of a name
        self._call = call  # one request, its errors translated
        self._copy = copy  # (name, new name, exclusive): a copy on the service

    @staticmethod
    def begin(key: str, temp: str) -> str:
        """A token for an upload to ``key`` (under ``temp`` when one is given); the
        service keeps nothing of it until the first block arrives."""
        return make_token(key, temp, secrets.token_hex(8))

    async def part(self, token: str, index: int, length: int, stream: AsyncIterator[bytes]) -> None:
        upload = read_token(token)
        body = await read_exactly(stream, length)
        blob = self._blob(upload["temp"] or upload["key"])
        await self._call(blob.stage_block(_block(upload, index), body, length=length))

    async def finish(
        self, key: str, native: NativeParts, overwrite: bool, metadata: dict[str, str]
    ) -> int:
        """Commit the upload as ``key``; its size."""
        upload = read_token(native.token)
        if upload["key"] != key:
            raise InvalidRequest("the multipart upload was begun for another name")
        blob = self._blob(upload["temp"] or key)
        ids, size = await self._blocks(blob, upload, native.count)
        exclusive = not overwrite and not upload["temp"]
        await self._call(
            blob.commit_block_list(
                [BlobBlock(block_id) for block_id in ids],
                content_settings=ContentSettings(content_type=_content_type(key)),
                metadata=metadata,
                match_condition=MatchConditions.IfMissing if exclusive else None,
            )
        )
        if upload["temp"]:
            await self._checked_into_place(upload["temp"], key, overwrite, native.expected)
        return size

    async def _blocks(
        self, blob: BlobClient, upload: dict[str, str], count: int
    ) -> tuple[list[str], int]:
        """The ids of chunks 0 to ``count - 1`` and their bytes; ``InvalidRequest``
        when the service lacks one (it discarded them: a week passed, or another
        upload committed the name)."""
        _, uncommitted = await self._call(blob.get_block_list("uncommitted"))
        sizes = {block.id: int(block.size) for block in uncommitted or ()}
        ids = [_block(upload, index) for index in range(count)]
        missing = [block_id for block_id in ids if block_id not in sizes]
        if missing:
            raise InvalidRequest(f"the service holds {count - len(missing)} of the {count} parts")
        return ids, sum(sizes[block_id] for block_id in ids)

    async def _checked_into_place(
        self, temp: str, key: str, overwrite: bool, expected: Mapping[str, str]
    ) -> None:
        try:
            await self._check(temp, expected)
            await self._copy(temp, key, not overwrite)
        finally:
            with suppress(ManifoldError):
                await self._call(self._blob(temp).delete_blob())

    async def _check(self, name: str, expected: Mapping[str, str]) -> None:
        downloader = await self._call(self._blob(name).download_blob())
        await check_hashes(downloader.chunks(), expected)

    async def abort(self, token: str) -> None:
        """Remove the temporary of a hidden upload, if committed already; staged
        blocks cannot be discarded (see the module's docstring)."""
        temp = read_token(token)["temp"]
        if temp:
            with suppress(ManifoldError):
                await self._call(self._blob(temp).delete_blob())


def _block(upload: dict[str, str], index: int) -> str:
    return f"{upload['id']}-{index:06d}"


def _content_type(key: str) -> str:
    return mimetypes.guess_type(key)[0] or "application/octet-stream"
