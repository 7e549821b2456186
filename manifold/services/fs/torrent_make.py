"""A .torrent for a file or a folder of the tree (OpenList's ``torrent/generate``,
which makes one for a single file; a folder here too), its work bounded: at most
``MAX_BYTES`` read and ``MAX_FILES`` files, every one through the caller's checks."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import AsyncIterator
from typing import Any

from manifold.errors import BadRequest
from manifold.models import LinkArgs, Obj
from manifold.services.auth.service import Caller
from manifold.services.fs.bencode import Value, decode_spans, encode
from manifold.services.fs.read import GuardedReader
from manifold.services.fs.streams import open_range

# OpenList's limit for one file; a folder's files together stay within it too.
MAX_BYTES = 1 << 30
MAX_FILES = 1000
PIECE_LENGTH = 256 << 10


async def generate(
    reader: GuardedReader, caller: Caller, path: str, password: str
) -> dict[str, Any]:
    """OpenList's answer: the .torrent in base64, its info hash, name and size."""
    found = await reader.get(caller, path, password)
    name = found.obj.name or "root"
    files = await _files(reader, caller, found.path, found.obj, password)
    pieces = await _pieces(reader, [full for full, _, _ in files], sum(s for _, _, s in files))
    info: dict[bytes, Value] = {
        b"name": name.encode(),
        b"piece length": PIECE_LENGTH,
        b"pieces": pieces,
    }
    if found.obj.is_dir:
        info[b"files"] = [
            {b"length": size, b"path": [p.encode() for p in parts]} for _, parts, size in files
        ]
    else:
        info[b"length"] = found.obj.size
    data = encode({b"created by": b"Manifold", b"info": info})
    _, spans = decode_spans(data)
    return {
        "torrent_data": base64.b64encode(data).decode(),
        "info_hash": hashlib.sha1(spans[b"info"]).hexdigest(),  # noqa: S324 - BitTorrent's
        "file_name": f"{name}.torrent",
        "size": len(data),
        "with_cas": False,
    }


async def _files(
    reader: GuardedReader, caller: Caller, full: str, obj: Obj, password: str
) -> list[tuple[str, list[str], int]]:
    """(virtual path, path inside the torrent, size) of each file, in name order."""
    if not obj.is_dir:
        _bounded(1, obj.size)
        return [(full, [obj.name], obj.size)]
    found: list[tuple[str, list[str], int]] = []
    folders = [(full, list[str]())]
    while folders:
        folder, parts = folders.pop(0)
        listing = await reader.list(caller, folder, password, 1, 0)
        for entry in sorted(listing.entries[listing.start : listing.stop], key=lambda o: o.name):
            child = f"{folder.rstrip('/')}/{entry.name}"
            if entry.is_dir:
                folders.append((child, [*parts, entry.name]))
            else:
                found.append((child, [*parts, entry.name], entry.size))
            _bounded(len(found) + len(folders), sum(size for _, _, size in found))
    if not found:
        raise BadRequest("the folder holds no file")
    return found


def _bounded(count: int, total: int) -> None:
    if count > MAX_FILES:
        raise BadRequest(f"too many files for a torrent (at most {MAX_FILES})")
    if total > MAX_BYTES:
        raise BadRequest("too big for a torrent (at most 1 GiB)")


async def _pieces(reader: GuardedReader, paths: list[str], expected: int) -> bytes:
    """The SHA-1 of each piece of the files' bytes end to end, as BitTorrent hashes;
    bytes other than the listed sizes (a file changed meanwhile) fail the torrent."""
    hashes: list[bytes] = []
    piece, filled, total = hashlib.sha1(), 0, 0  # noqa: S324
    async for chunk in _bytes(reader, paths):
        total += len(chunk)
        if total > expected:
            raise BadRequest("a file changed while the torrent was made")
        view = memoryview(chunk)
        while view:
            take = min(len(view), PIECE_LENGTH - filled)
            piece.update(view[:take])
            view, filled = view[take:], filled + take
            if filled == PIECE_LENGTH:
                hashes.append(piece.digest())
                piece, filled = hashlib.sha1(), 0  # noqa: S324
        await asyncio.sleep(0)  # hashing a gigabyte must not hold up other requests
    if total != expected:
        raise BadRequest("a file changed while the torrent was made")
    if filled:
        hashes.append(piece.digest())
    return b"".join(hashes)


async def _bytes(reader: GuardedReader, paths: list[str]) -> AsyncIterator[bytes]:
    for full in paths:
        _, link, _ = await reader.link(full, LinkArgs())
        async for chunk in open_range(link, 0, None, client=reader.tree.pool_for(link)):
            yield chunk
