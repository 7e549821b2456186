"""Reading archives with libarchive, in worker threads, from any link.

libarchive is synchronous and reads through callbacks; it runs here in a worker
thread and reads its source through a file object. A local file is opened as it
is; any other link (a URL, a driver's range reader) is read through ``LinkFile``,
which asks the event loop for one block of bytes at a time by range, so memory
stays at one block however large the archive, and formats with an index at the
end (zip's central directory, 7z's header) seek to it instead of reading it all.

Member paths are normalised to absolute, clean paths (``/dir/file``): a member
called ``../x`` or ``/etc/x`` is ``/x`` here, control and text-reordering characters
in a name are replaced, and only regular files and folders are ever written out,
never links or devices.

Every reading has a ``Budget``: the bytes it may decompress, the entries it may read
and the ratio of the two sizes, checked at each read of the source, so a small
archive that expands to gigabytes (a decompression bomb) is stopped early. Nothing
here waits on a client: a member is read one block per call (``MemberCursor``).
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

from manifold.concurrency import ARCHIVE_POOL, run_in, start_in
from manifold.errors import (
    ManifoldError,
    ObjectNotFound,
    ServerError,
    UnknownArchiveFormat,
    WrongArchivePassword,
)
from manifold.models import Link
from manifold.paths import safe_name
from manifold.services.fs.streams import open_range

BLOCK = 1 << 20
# A read at a new place asks for this much; reading on from there doubles it up to BLOCK.
FIRST_BLOCK = 64 << 10
# Blocks one call of ``MemberCursor.read`` skips on its way to a range's start.
SKIP_PER_CALL = 16
# What libarchive asks of its source per call: also how often the budget is checked
# while libarchive skips a member by decompressing it in one call.
READ_SIZE = 32 << 10
# Below this many bytes decompressed, the ratio is not checked: small archives of
# text may expand far more than any ratio a large one should.
RATIO_FREE = 16 << 20
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
        parts.append(safe_name(part))
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


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one reading of an archive may do; 0 is no limit.

    ``setting`` names where ``max_bytes`` comes from, for the error that tells it.
    """

    max_bytes: int = 0  # bytes decompressed
    max_entries: int = 0  # entries read
    max_ratio: int = 0  # bytes decompressed per byte of archive, past RATIO_FREE
    setting: str = ""


class Budget:
    """The work one reading of an archive has done, against its ``Limits``.

    The work is the larger of two counts: the bytes libarchive has decompressed (the
    position of its first filter, which also grows while it skips a member nobody
    asked for) and the member bytes handed out (formats that decompress inside the
    format reader, such as zip). ``check`` runs at every read of the source, so even
    one member skipped inside a single libarchive call is stopped a read later.
    """

    def __init__(self, limits: Limits, archive_size: int) -> None:
        self.limits = limits
        self.archive_size = max(archive_size, 1)
        self.data = 0
        self.entries = 0
        self.pointer: Any = None  # the open archive, once there is one
        self.failure: BaseException | None = None  # what stopped a read of the source

    def produced(self, nbytes: int) -> None:
        self.data += nbytes
        self.check()

    def entry(self) -> None:
        self.entries += 1
        most = self.limits.max_entries
        if most and self.entries > most:
            raise ServerError(
                f"the archive holds more than {most} entries, the most read here "
                "(setting archive_max_entries)"
            )

    def check(self) -> None:
        done = self.data
        if self.pointer is not None:
            done = max(done, libarchive.ffi.filter_bytes(self.pointer, 0))
        limits = self.limits
        if limits.max_bytes and done > limits.max_bytes:
            raise ServerError(
                f"the archive expands to more than {_mib(limits.max_bytes)}, the most "
                f"read here (setting {limits.setting}): stopped"
            )
        ratio = limits.max_ratio
        if ratio and done > RATIO_FREE and done > ratio * self.archive_size:
            raise ServerError(
                f"the archive expands to more than {ratio} times its size (setting "
                "archive_max_ratio): stopped as a likely decompression bomb"
            )

    def fail(self, exc: ArchiveError, locked: bool = False) -> BaseException:
        """What to raise for ``exc``: the reason the source stopped, if it did."""
        return self.failure or _translated(exc, locked)


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.0f} MiB" if nbytes >= 1 << 20 else f"{nbytes} bytes"


class Metered(io.RawIOBase):
    """The archive's source as libarchive reads it, checking the budget at each read.

    libarchive calls ``readinto`` through ctypes, where an exception cannot pass: it
    is kept in ``budget.failure`` and libarchive is told the read failed, so the
    error it then raises is replaced by the kept one.
    """

    def __init__(self, file: IO[bytes], budget: Budget) -> None:
        super().__init__()
        self._file = file
        self._budget = budget

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._file.seekable()

    def tell(self) -> int:
        return self._file.tell()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        try:
            return self._file.seek(offset, whence)
        except Exception as exc:  # kept for the caller, see the class docstring
            self._budget.failure = self._budget.failure or exc
            return -1

    def readinto(self, buffer: Any) -> int:
        try:
            self._budget.check()
            return self._file.readinto(buffer)  # type: ignore[attr-defined,no-any-return]
        except Exception as exc:  # kept for the caller, see the class docstring
            self._budget.failure = self._budget.failure or exc
            return -1


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
def _opened(source: Source, password: str, budget: Budget) -> Iterator[Any]:
    """The archive, read by libarchive; a plain compressed stream as one member.

    Only errors of opening are handled here; those of reading members reach the caller.
    """
    passphrase = password or None
    with source.open() as raw_file, ExitStack() as stack:
        file = Metered(raw_file, budget)
        try:
            archive = stack.enter_context(
                libarchive.stream_reader(file, block_size=READ_SIZE, passphrase=passphrase)
            )
        except ArchiveError as exc:
            if budget.failure is not None:
                raise budget.failure from exc
            if "Unrecognized archive format" not in str(exc) or not _is_stream(source.name):
                raise _translated(exc) from exc
            file.seek(0)
            raw = libarchive.stream_reader(
                file, format_name="raw", block_size=READ_SIZE, passphrase=passphrase
            )
            try:
                archive = stack.enter_context(raw)
            except ArchiveError as again:
                raise budget.fail(again) from again
        budget.pointer = archive._pointer
        try:
            yield archive
        finally:
            budget.pointer = None


def _is_stream(name: str) -> bool:
    lower = name.lower()
    return lower.endswith(STREAM_EXTENSIONS) and ".tar." not in lower


def _is_raw(archive: Any) -> bool:
    """A compressed stream opened as one member, whose size shows only by reading it."""
    return bool(archive.format_name == b"raw")


def _member_path(entry: ArchiveEntry, source_name: str) -> str:
    if entry.pathname == "data" and _is_stream(source_name):
        stem = source_name.rsplit(".", 1)[0]
        return clean_inner(stem or "data")  # a raw stream's one member, named after its file
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


def scan(source: Source, password: str, limits: Limits = Limits()) -> Catalog:
    """Every member's name, size and time, reading no member's data where the format
    allows, within ``limits``."""
    catalog = Catalog()
    budget = Budget(limits, source.size)
    try:
        with _opened(source, password, budget) as archive:
            for entry in archive:
                budget.entry()
                if not _wanted(entry):
                    continue
                if _encrypted(entry):
                    catalog.encrypted = True
                path = _member_path(entry, source.name)
                size = entry.size or 0
                if entry.isreg and not size and _is_raw(archive):
                    size = _measured(entry, budget)
                catalog.add(path, bool(entry.isdir), size, _modified(entry))
    except ArchiveError as exc:
        raise budget.fail(exc) from exc
    return catalog


def _measured(entry: ArchiveEntry, budget: Budget) -> int:
    size = 0
    for block in entry.get_blocks(BLOCK):
        size += len(block)
        budget.produced(len(block))
    return size


class MemberCursor:
    """Bytes ``[offset, offset + length)`` of one member, one block per ``read`` call.

    Each call does a bounded piece of work and returns, so no worker thread is
    parked while a client is slow to take a block: the open archive waits between
    calls without a thread. Calls are serialised by a lock, so ``close`` after a
    cancelled ``read`` waits for that read to end rather than pull the archive from
    under it.
    """

    def __init__(
        self, source: Source, password: str, inner: str, offset: int, length: int | None
    ) -> None:
        self._source = source
        self._password = password
        self._inner = clean_inner(inner)
        self._skip, self._left = offset, length
        self._budget = Budget(Limits(), source.size)
        self._stack = ExitStack()
        self._blocks: Iterator[bytes] | None = None
        self._locked = False  # reading an encrypted member's bytes
        self._lock = threading.Lock()

    def open(self) -> None:
        """Find the member; ``ObjectNotFound`` when the archive has no such file."""
        with self._lock:
            try:
                archive = self._stack.enter_context(
                    _opened(self._source, self._password, self._budget)
                )
                for entry in archive:
                    if entry.isreg and _member_path(entry, self._source.name) == self._inner:
                        self._locked = _encrypted(entry)
                        self._blocks = iter(entry.get_blocks(BLOCK))
                        return
            except ArchiveError as exc:
                self._stack.close()
                raise self._budget.fail(exc, self._locked) from exc
            except BaseException:
                self._stack.close()
                raise
            self._stack.close()
        raise ObjectNotFound()

    def read(self) -> bytes | None:
        """The next block of the range; None once it is all read. Skipping to the
        range's start may answer ``b""`` (skipped a while, nothing yet), so that one
        call stays short and a client gone meanwhile stops the work."""
        with self._lock:
            try:
                return self._next()
            except ArchiveError as exc:
                self._end()
                raise self._budget.fail(exc, self._locked) from exc
            except BaseException:
                self._end()
                raise

    def _next(self) -> bytes | None:
        skipped = 0
        while self._blocks is not None and self._left != 0:
            if skipped == SKIP_PER_CALL:
                return b""
            if self._source.cancelled.is_set():
                raise ArchiveReadCancelled()
            block = next(self._blocks, None)
            if block is None:
                break
            if self._skip:
                cut = min(self._skip, len(block))
                block, self._skip = block[cut:], self._skip - cut
            if self._left is not None:
                block, self._left = block[: self._left], self._left - min(self._left, len(block))
            if block:
                return block
            skipped += 1
        self._end()
        return None

    def close(self) -> None:
        with self._lock:
            self._end()

    def _end(self) -> None:
        self._blocks = None
        self._stack.close()


def extract(
    source: Source,
    password: str,
    inner: str,
    into: str,
    progress: Callable[[int], None],
    limits: Limits = Limits(),
    skipped: list[str] | None = None,
) -> None:
    """Write member ``inner`` (a file, or a folder with everything in it; ``/`` is the
    whole archive) into the folder ``into``, keeping its name, within ``limits``.
    ``progress`` gets the bytes written so far. A member whose place an earlier member
    took (a file ``d``, then ``d/inner.txt``) is left out and named in ``skipped``."""
    inner = clean_inner(inner)
    prefix = posixpath.dirname(inner) if inner != "/" else "/"
    budget = Budget(limits, source.size)
    locked = False  # reading an encrypted member's bytes
    try:
        with _opened(source, password, budget) as archive:
            for entry in archive:
                budget.entry()
                if not _wanted(entry):
                    continue
                path = _member_path(entry, source.name)
                if inner != "/" and path != inner and not path.startswith(inner + "/"):
                    continue
                relative = path[len(prefix) :].lstrip("/")
                if relative:
                    locked = _encrypted(entry)
                    try:
                        _write_entry(entry, into, relative, budget, progress, source.cancelled)
                    except _Clash:
                        if skipped is not None:
                            skipped.append(relative)
                    locked = False
    except ArchiveError as exc:
        raise budget.fail(exc, locked) from exc


def _write_entry(
    entry: ArchiveEntry,
    into: str,
    relative: str,
    budget: Budget,
    progress: Callable[[int], None],
    cancelled: threading.Event,
) -> None:
    """One member written below ``into``; an error names the member, not the folder."""
    target = os.path.join(into, *relative.split("/"))
    try:
        if entry.isdir:
            os.makedirs(target, mode=0o700, exist_ok=True)
            return
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        with open(target, "wb") as out:
            for block in entry.get_blocks(BLOCK):
                if cancelled.is_set():
                    raise ArchiveReadCancelled()
                out.write(block)
                budget.produced(len(block))
                progress(budget.data)
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:
        raise _Clash() from exc
    except OSError as exc:
        shown = relative if len(relative) <= 200 else f"{relative[:200]}..."
        raise ServerError(f"could not extract {shown}: {exc.strerror}") from None


class _Clash(Exception):
    """A member's place is taken by an earlier member of another kind."""


async def member_stream(
    source: Source, password: str, inner: str, offset: int, length: int | None
) -> AsyncIterator[bytes]:
    """Member bytes, one block per call into the archive pool: a slow client holds
    back the reading without holding a thread."""
    cursor = MemberCursor(source, password, inner, offset, length)
    try:
        await run_in(ARCHIVE_POOL, cursor.open)
        while (block := await run_in(ARCHIVE_POOL, cursor.read)) is not None:
            if block:
                yield block
    finally:
        source.cancelled.set()
        _close_soon(cursor)


def _close_soon(cursor: MemberCursor) -> None:
    # In the pool: a read cancelled by its client may still run there, and closing
    # waits for it. Without a loop (a generator finalised late) it is closed at once.
    try:
        closing = start_in(ARCHIVE_POOL, cursor.close)
    except RuntimeError:
        cursor.close()
        return
    closing.add_done_callback(lambda done: done.exception())
