"""What the drivers that take the API's multipart chunks natively share (S3's
``native``, Azure Blob's): the token they keep, a chunk read whole at its exact
length, and the hashes of a finished upload checked as it is read back."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from manifold.concurrency import CPU_POOL, run_in
from manifold.errors import InvalidRequest

FIELDS = ("key", "temp", "id")


def make_token(key: str, temp: str, upload_id: str) -> str:
    """The text kept in the database: the object's key, the temporary key the upload
    goes to first ("" for none), and the store's id of the upload."""
    return json.dumps({"key": key, "temp": temp, "id": upload_id})


def read_token(token: str) -> dict[str, str]:
    try:
        upload = json.loads(token)
        return {name: str(upload[name]) for name in FIELDS}
    except (ValueError, KeyError, TypeError):
        raise InvalidRequest("not a multipart upload of this storage") from None


async def read_exactly(stream: AsyncIterator[bytes], length: int) -> bytes:
    """The whole of ``stream``, which must be ``length`` bytes (a part is one request)."""
    chunks: list[bytes] = []
    held = 0
    async for data in stream:
        held += len(data)
        if held > length:
            raise InvalidRequest(f"chunk is longer than its expected {length} bytes")
        chunks.append(data)
    if held != length:
        raise InvalidRequest(f"chunk has {held} bytes, {length} expected")
    return b"".join(chunks)


async def check_hashes(stream: AsyncIterator[bytes], expected: Mapping[str, str]) -> None:
    """Read ``stream`` to its end; ``InvalidRequest`` naming the first hash that does
    not match (hashing in worker threads, off the event loop)."""
    hashers = [(algo, hashlib.new(algo)) for algo in expected]
    async for data in stream:
        await run_in(CPU_POOL, _update, hashers, data)
    for algo, hasher in hashers:
        if hasher.hexdigest() != expected[algo]:
            raise InvalidRequest(f"{algo} of the uploaded data does not match the header")


def _update(hashers: list[tuple[str, Any]], data: bytes) -> None:
    for _, hasher in hashers:
        hasher.update(data)
