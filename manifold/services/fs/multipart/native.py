"""The second ``PartStore``: chunks straight into the destination storage's own
multipart upload (S3's), through the storage's layers as any driver call.

Chosen at ``init`` when the storage offers it (``Driver.multipart_begin``) and the
session's chunks suit it (not under the store's smallest part, not more parts than it
takes); else the session is staged. Nothing of the file is kept on this server's
disk, and every instance that mounts the storage reaches the parts, so a restart or
another instance behind a balancer continues the session. The session's ``staging``
key is the destination folder and the driver's token, as JSON; ``complete`` hands
the token to ``put`` (``Upload.native``), which finishes the upload into place after
the checks of any upload.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from manifold.drivers.base import Driver
from manifold.drivers.multipart import read_exactly
from manifold.errors import ManifoldError, NotFound, ServerError
from manifold.paths import split_path
from manifold.services.fs.multipart.snapshot import total_chunks
from manifold.services.fs.tree import Place
from manifold.services.fs.write import GuardedWriter

NATIVE, STAGING = "native", "staging"
log = logging.getLogger("manifold.multipart")


class NativeStore:
    """Parts in the destination storage's multipart upload (see the module's docstring)."""

    def __init__(self, writer: GuardedWriter) -> None:
        self._writer = writer

    @staticmethod
    def offers(place: Place, size: int, chunk_size: int) -> bool:
        """Whether the storage at ``place`` takes a file of ``size`` in such chunks."""
        driver = place.ops.driver
        if "multipart_begin" not in driver.capabilities():
            return False
        smallest, most = driver.multipart_limits()
        count = total_chunks(size, chunk_size)
        return count <= most and (chunk_size >= smallest or count == 1)

    async def begin(self, place: Place, hidden: bool) -> str:
        """Begin the upload to ``place``; the session's key. ``hidden``: the file's
        hashes are to be checked before it takes its name."""
        folder, name = split_path(place.sub_path)
        dst_dir = await place.ops.make_dir(folder)
        token = await place.ops.driver.multipart_begin(dst_dir, name, hidden)
        return json.dumps({"folder": split_path(place.path)[0], "token": token})

    @staticmethod
    def token(key: str) -> str:
        return _parsed(key)[1]

    async def open(self, key: str) -> None:
        """Nothing to make: ``begin`` began the upload."""

    async def put(
        self, key: str, index: int, offset: int, length: int, body: AsyncIterator[bytes]
    ) -> None:
        """The chunk is read whole before the storage is called: a slow sender holds
        none of the storage's upload slots (a chunk is at most the chunk size)."""
        folder, token = _parsed(key)
        data = await read_exactly(body, length)
        await self._driver(folder).multipart_part(token, index, length, _once(data))

    async def present(self, key: str, indexes: set[int]) -> set[int]:
        """All: the store lists its parts itself when the upload is finished."""
        return indexes

    async def whole(self, key: str, size: int) -> str:
        """Never: the store joins the parts itself (``Upload.native``)."""
        raise ServerError("the parts of a native multipart upload are not read back")

    async def discard(self, key: str) -> None:
        """Abort the upload. A store that cannot be reached keeps the parts until its
        own clean-up rule (S3's lifecycle ``AbortIncompleteMultipartUpload``)."""
        try:
            folder, token = _parsed(key)
            await self._driver(folder).multipart_abort(token)
        except ManifoldError as exc:
            log.warning("aborting a native multipart upload failed: %s", exc)

    async def sweep(self, live: set[str]) -> None:
        """Nothing: each upload belongs to a session, and goes with it."""

    def _driver(self, folder: str) -> Driver[Any]:
        return self._writer.place(folder).ops.driver


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _parsed(key: str) -> tuple[str, str]:
    try:
        parts = json.loads(key)
        return str(parts["folder"]), str(parts["token"])
    except (ValueError, KeyError, TypeError):
        raise NotFound("multipart upload session not found") from None
