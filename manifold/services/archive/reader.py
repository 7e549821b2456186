"""Reading archives with libarchive, in worker threads, from any link.

libarchive is synchronous and reads through callbacks; it runs here in a worker
thread and reads its source through a file object. A local file is opened as it
is; any other link (a URL, a driver's range reader) is read through ``LinkFile``,
which asks the event loop for one block of bytes at a time by range, so memory
stays at one block however large the archive, and formats with an index at the
end (zip's central directory, 7z's header) seek to it instead of reading it all.

Member paths are normalised to absolute, clean paths (``/dir/file``): a member
called ``../x`` or ``/etc/x`` is ``/x`` here, and only regular files and folders
are ever written out, never links or devices.
"""

from __future__ import annotations

import asyncio
import ctypes
import io
import os
import posixpath
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import libarchive
import libarchive.ffi
from libarchive.entry import ArchiveEntry
from libarchive.exception import ArchiveError

from manifold.errors import (
    ManifoldError,
    ServerError,
    UnknownArchiveFormat,
    WrongArchivePassword,
)
from manifold.models import Link
from manifold.services.fs.streams import open_range

BLOCK = 1 << 20
# A read at a new place asks for this much; reading on from there doubles it up to BLOCK.
FIRST_BLOCK = 64 << 10
# What libarchive asks of its source per call.
READ_SIZE = 64 << 10
# Extensions whose files are one compressed stream rather than an archive of members:
# opened as a single member named after the file without that extension.
STREAM_EXTENSIONS = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".lz", ".lzma", ".z")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_lib = libarchive.ffi.libarchive
_lib.archive_entry_is_encrypted.argtypes = [ctypes.c_void_p]
_lib.archive_entry_is_encrypted.restype = ctypes.c_int


@dataclass(slots=True)
class Member:
    """One entry of an archive: a folder (``children`` by name) or a file."""

    name: str
    is_dir: bool
    size: int = 0
    modified: datetime = EPOCH
    children: dict[str, Member] | None = None

    def child_list(self) -> list[Member]:
        return list(self.children.values()) if self.children is not None else []


@dataclass(slots=True)
class Catalog:
    """What an archive holds: its member tree and whether any member is encrypted."""

    root: Member = field(default_factory=lambda: Member("", True, children={}))
    encrypted: bool = False
    comment: str = ""

    def find(self, inner: str) -> Member | None:
        node = self.root
        for part in _parts(inner):
            if node.children is None or part not in node.children:
                return None
            node = node.children[part]
        return node

    def add(self, inner: str, is_dir: bool, size: int, modified: datetime) -> None:
        parts = _parts(inner)
        if not parts:
            return
        node = self.root
        for part in parts[:-1]:
            assert node.children is not None
            found = node.children.get(part)
            if found is None or found.children is None:
                found = node.children[part] = Member(part, True, 0, modified, {})
            node = found
        assert node.children is not None
        name = parts[-1]
        existing = node.children.get(name)
        if is_dir:
            if existing is None or existing.children is None:
                node.children[name] = Member(name, True, 0, modified, {})
            else:
                existing.modified = modified
        else:
            node.children[name] = Member(name, False, size, modified)


def clean_inner(path: str) -> str:
    """A member path as an absolute, clean path: no ``..`` can climb above the root."""
    return "/" + "/".join(_parts(path))


def _parts(path: str) -> list[str]:
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return parts


# -- the source: a link read by ranges ------------------------------------------------


class LinkFile(io.RawIOBase):
    """A seekable, read-only file over a link, for use in a worker thread.

    Each read that misses the buffer asks the event loop for a block at the current
    position: small after a seek (an index, a header), doubling while reading goes
    on from where the last block ended, up to ``BLOCK``. ``cancelled`` (set from the
    loop) ends reading at the next block.
    """

    def __init__(
        self, link: Link, size: int, loop: asyncio.AbstractEventLoop, client: Any = None
    ) -> None:
        super().__init__()
        self._link = link
        self._size = size
        self._loop = loop
        self._client = client
        self._pos = 0
        self._buf = b""
        self._buf_at = 0
        self._block = FIRST_BLOCK
        self.cancelled = threading.Event()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            pos = offset
        elif whence == os.SEEK_CUR:
            pos = self._pos + offset
        else:
            pos = self._size + offset
        self._pos = max(0, pos)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._pos >= self._size or not len(view):
            return 0
        start = self._pos - self._buf_at
        if not 0 <= start < len(self._buf):
            self._fill()
            start = 0
        count = min(len(view), len(self._buf) - start)
        view[:count] = self._buf[start : start + count]
        self._pos += count
        return count

    def _fill(self) -> None:
        if self.cancelled.is_set():
            raise ArchiveReadCancelled()
        sequential = self._buf and self._pos == self._buf_at + len(self._buf)
        self._block = min(BLOCK, self._block * 2) if sequential else FIRST_BLOCK
        length = min(self._block, self._size - self._pos)
        future = asyncio.run_coroutine_threadsafe(self._fetch(self._pos, length), self._loop)
        self._buf = future.result()
        self._buf_at = self._pos
        if not self._buf:
            raise ServerError(f"the archive ended early at byte {self._pos}")

    async def _fetch(self, offset: int, length: int) -> bytes:
        chunks = [c async for c in open_range(self._link, offset, length, client=self._client)]
        return b"".join(chunks)


class ArchiveReadCancelled(Exception):
    """The reader of an archive went away; the worker stops reading."""


@dataclass(slots=True)
class Source:
    """How a worker thread opens an archive: its link, size and name."""

    link: Link
    size: int
    name: str
    loop: asyncio.AbstractEventLoop
    client: Any = None
    cancelled: threading.Event = field(default_factory=threading.Event)

    def open(self) -> IO[bytes]:
        if self.link.file_path and self.link.reader is None:
            return open(self.link.file_path, "rb")
        file = LinkFile(self.link, self.size, self.loop, self.client)
        file.cancelled = self.cancelled
        return file  # type: ignore[return-value]


@contextmanager
def _opened(source: Source, password: str) -> Iterator[Any]:
    """The archive, read by libarchive; a plain compressed stream as one member.

    Only errors of opening are handled here; those of reading members reach the caller.
    """
    passphrase = password or None
    with source.open() as file, ExitStack() as stack:
        try:
            archive = stack.enter_context(
                libarchive.stream_reader(file, block_size=READ_SIZE, passphrase=passphrase)
            )
        except ArchiveError as exc:
            if "Unrecognized archive format" not in str(exc) or not _is_stream(source.name):
                raise _translated(exc) from exc
            file.seek(0)
            raw = libarchive.stream_reader(
                file, format_name="raw", block_size=READ_SIZE, passphrase=passphrase
            )
            try:
                archive = stack.enter_context(raw)
            except ArchiveError as again:
                raise _translated(again) from again
        yield archive


def _is_stream(name: str) -> bool:
    lower = name.lower()
    return lower.endswith(STREAM_EXTENSIONS) and ".tar." not in lower


def _is_raw(archive: Any) -> bool:
    """A compressed stream opened as one member, whose size shows only by reading it."""
    return bool(archive.format_name == b"raw")


def _member_path(entry: ArchiveEntry, source_name: str) -> str:
    if entry.pathname == "data" and _is_stream(source_name):
        stem = source_name.rsplit(".", 1)[0]
        return "/" + (stem or "data")  # a raw stream's one member, named after its file
    return clean_inner(entry.pathname or "")


def _encrypted(entry: ArchiveEntry) -> bool:
    return bool(_lib.archive_entry_is_encrypted(entry._entry_p))


def _translated(exc: ArchiveError, locked: bool = False) -> ManifoldError:
    """``exc`` as the API's error; ``locked`` when it came reading an encrypted member.

    ZipCrypto checks a password against one byte, so one wrong password in 256 passes
    that check and fails only in the decompression: for an encrypted member that
    failure is the password's too.
    """
    text = str(exc).split(" (errno=")[0]
    if "passphrase" in text.lower() or locked:
        return WrongArchivePassword()
    if "Unrecognized archive format" in text:
        return UnknownArchiveFormat()
    return ServerError(f"failed to read the archive: {text}")


def _modified(entry: ArchiveEntry) -> datetime:
    stamp = entry.mtime
    if not stamp:
        return EPOCH
    try:
        return datetime.fromtimestamp(float(stamp), tz=UTC)
    except (OverflowError, OSError, ValueError):
        return EPOCH


def _wanted(entry: ArchiveEntry) -> bool:
    return bool(entry.isdir or entry.isreg)


# -- what runs in the worker ----------------------------------------------------------


def scan(source: Source, password: str) -> Catalog:
    """Every member's name, size and time, reading no member's data."""
    catalog = Catalog()
    try:
        with _opened(source, password) as archive:
            for entry in archive:
                if not _wanted(entry):
                    continue
                if _encrypted(entry):
                    catalog.encrypted = True
                path = _member_path(entry, source.name)
                size = entry.size or 0
                if entry.isreg and not size and _is_raw(archive):
                    size = sum(len(block) for block in entry.get_blocks(BLOCK))
                catalog.add(path, bool(entry.isdir), size, _modified(entry))
    except ArchiveError as exc:
        raise _translated(exc) from exc
    return catalog


def read_member(
    source: Source,
    password: str,
    inner: str,
    offset: int,
    length: int | None,
    deliver: Callable[[bytes], None],
) -> None:
    """Pass bytes ``[offset, offset + length)`` of member ``inner`` to ``deliver``."""
    inner = clean_inner(inner)
    locked = False  # reading an encrypted member's bytes
    try:
        with _opened(source, password) as archive:
            for entry in archive:
                if not entry.isreg or _member_path(entry, source.name) != inner:
                    continue
                locked = _encrypted(entry)
                _deliver_range(entry, offset, length, deliver, source.cancelled)
                return
    except ArchiveError as exc:
        raise _translated(exc, locked) from exc
    raise ServerError("object not found")


def _deliver_range(
    entry: ArchiveEntry,
    offset: int,
    length: int | None,
    deliver: Callable[[bytes], None],
    cancelled: threading.Event,
) -> None:
    skip, left = offset, length
    for block in entry.get_blocks(BLOCK):
        if cancelled.is_set():
            raise ArchiveReadCancelled()
        if skip:
            cut = min(skip, len(block))
            block, skip = block[cut:], skip - cut
        if left is not None:
            block, left = block[:left], left - min(left, len(block))
        if block:
            deliver(block)
        if left == 0:
            return


def extract(
    source: Source, password: str, inner: str, into: str, progress: Callable[[int], None]
) -> None:
    """Write member ``inner`` (a file, or a folder with everything in it; ``/`` is the
    whole archive) into the folder ``into``, keeping its name. ``progress`` gets the
    bytes written so far."""
    inner = clean_inner(inner)
    prefix = posixpath.dirname(inner) if inner != "/" else "/"
    written = 0
    locked = False  # reading an encrypted member's bytes
    try:
        with _opened(source, password) as archive:
            for entry in archive:
                if not _wanted(entry):
                    continue
                path = _member_path(entry, source.name)
                if inner != "/" and path != inner and not path.startswith(inner + "/"):
                    continue
                relative = path[len(prefix) :].lstrip("/")
                if not relative:
                    continue
                target = os.path.join(into, *relative.split("/"))
                if entry.isdir:
                    os.makedirs(target, mode=0o700, exist_ok=True)
                    continue
                os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
                locked = _encrypted(entry)
                with open(target, "wb") as out:
                    for block in entry.get_blocks(BLOCK):
                        if source.cancelled.is_set():
                            raise ArchiveReadCancelled()
                        out.write(block)
                        written += len(block)
                        progress(written)
                locked = False
    except ArchiveError as exc:
        raise _translated(exc, locked) from exc


async def member_stream(
    source: Source, password: str, inner: str, offset: int, length: int | None
) -> AsyncIterator[bytes]:
    """Member bytes read by a worker thread, handed over through a small queue, so
    a slow client holds back the reading rather than filling memory."""
    loop = source.loop
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(maxsize=4)

    def deliver(block: bytes) -> None:
        asyncio.run_coroutine_threadsafe(queue.put(block), loop).result()

    def work() -> None:
        outcome: BaseException | None = None
        try:
            read_member(source, password, inner, offset, length, deliver)
        except BaseException as exc:  # handed to the reader below
            outcome = exc
        if not source.cancelled.is_set():
            asyncio.run_coroutine_threadsafe(queue.put(outcome), loop).result()

    worker = loop.run_in_executor(None, work)
    try:
        while True:
            item = await queue.get()
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        source.cancelled.set()
        while not queue.empty():  # free a worker blocked on a full queue
            queue.get_nowait()
        if not worker.done():
            worker.add_done_callback(lambda f: f.exception())
