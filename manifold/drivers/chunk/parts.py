"""A chunked file's parts: what its folder holds, the bytes of a range of them, and an
upload cut into parts as it streams.

The layout is OpenList's, so parts it wrote read here and the other way round: the
file ``name`` is the folder ``<chunk_prefix>name`` holding ``0<ext>``, ``1<ext>``, ...
(every part but the last ``part_size`` bytes) and, with ``store_hash``, one-byte files
``hash_<kind>_<value><ext>`` naming the file's hashes.
"""

from __future__ import annotations

import posixpath
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from manifold.errors import ServerError, TemporaryFailure
from manifold.models import Obj

HASH_PREFIX = "hash_"

# Bytes ``[offset, offset + length)`` of the file at a path (``VirtualTree.open_path``).
Opener = Callable[[str, int, int | None], AsyncIterator[bytes]]


@dataclass(frozen=True, slots=True)
class Part:
    """One part: where it is in the server's tree, and where it starts in the file."""

    path: str
    start: int
    size: int


@dataclass(slots=True)
class Layout:
    """What a chunk folder holds: the parts by number, and the hashes named beside."""

    sizes: dict[int, int] = field(default_factory=dict)
    modified: dict[int, datetime] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether parts 0 to the last are all there, none but the last empty (an
        upload is put in place whole, so only damage leaves a gap)."""
        count = len(self.sizes)
        if count == 0 or set(self.sizes) != set(range(count)):
            return False
        return all(self.sizes[i] > 0 for i in range(count - 1))

    def missing(self) -> int:
        """The first part number that is missing, or empty where it may not be."""
        last = max(self.sizes, default=-1)
        for index in range(last + 1):
            if index not in self.sizes or (self.sizes[index] == 0 and index < last):
                return index
        return last + 1

    @property
    def size(self) -> int:
        return sum(self.sizes.values())

    def parts(self, folder: str, ext: str) -> list[Part]:
        """The parts in order, each at ``folder/<number><ext>``."""
        found, start = [], 0
        for index in range(len(self.sizes)):
            size = self.sizes[index]
            found.append(Part(posixpath.join(folder, part_name(index, ext)), start, size))
            start += size
        return found


def part_name(index: int, ext: str) -> str:
    return f"{index}{ext}"


def hash_name(kind: str, value: str, ext: str) -> str:
    return f"{HASH_PREFIX}{kind}_{value}{ext}"


def layout_of(entries: Sequence[Obj], ext: str) -> Layout:
    """The layout a chunk folder's listing shows; other entries are left aside."""
    layout = Layout()
    for entry in entries:
        if entry.is_dir or (ext and not entry.name.endswith(ext)):
            continue
        stem = entry.name[: len(entry.name) - len(ext)] if ext else entry.name
        if stem.startswith(HASH_PREFIX):
            kind, sep, value = stem[len(HASH_PREFIX) :].partition("_")
            if sep and kind and value:
                layout.hashes[kind] = value
        elif stem.isascii() and stem.isdigit():
            layout.sizes[int(stem)] = entry.size
            layout.modified[int(stem)] = entry.modified
    return layout


def part_sizes(size: int, part_size: int) -> list[int]:
    """How a file of ``size`` bytes is cut: full parts, the last one the rest (a full
    part when it divides evenly); an empty file is one empty part."""
    if size == 0:
        return [0]
    full, tail = divmod(size, part_size)
    return [part_size] * full + ([tail] if tail else [])


def ranged_reader(
    parts: Sequence[Part], open_part: Opener
) -> Callable[[int, int | None], AsyncIterator[bytes]]:
    """A range reader over the parts, opening only those the range touches, one after
    another, each checked for its full share of bytes."""
    total = sum(part.size for part in parts)

    async def reader(offset: int, length: int | None) -> AsyncIterator[bytes]:
        end = total if length is None else min(total, offset + length)
        for part in parts:
            low, high = max(offset, part.start), min(end, part.start + part.size)
            if low >= high:
                continue
            got = 0
            async for data in open_part(part.path, low - part.start, high - low):
                got += len(data)
                yield data
            if got != high - low:
                raise TemporaryFailure(f"chunk part {posixpath.basename(part.path)} is short")

    return reader


def missing_part(layout: Layout) -> ServerError:
    return ServerError(f"chunk part[{layout.missing()}] is missing")


class Splitter:
    """An upload's stream, handed out as consecutive parts of at most so many bytes;
    nothing is held but the one chunk the stream gave last. Counts what it passed on."""

    def __init__(self, stream: AsyncIterator[bytes], seen: Callable[[bytes], None]) -> None:
        self._stream = stream
        self._seen = seen
        self._rest = b""
        self._ended = False
        self.sent = 0

    async def more(self) -> bool:
        """Whether any byte is left, reading ahead one chunk to tell."""
        while not self._rest and not self._ended:
            try:
                self._rest = await anext(self._stream)
            except StopAsyncIteration:
                self._ended = True
        return bool(self._rest)

    async def part(self, limit: int) -> AsyncIterator[bytes]:
        """The next ``limit`` bytes, or fewer when the stream ends first."""
        left = limit
        while left > 0 and await self.more():
            data, self._rest = self._rest[:left], self._rest[left:]
            left -= len(data)
            self.sent += len(data)
            self._seen(data)
            yield data
