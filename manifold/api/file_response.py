"""A local file served as Go's ``http.ServeContent`` serves it, at nginx's speed.

Behaviour (what AList clients see): ``Accept-Ranges``, ``Etag`` in AList's
``"<mtime hex>-<size hex>"`` form, ``Last-Modified``; a single range answers 206,
several answer ``multipart/byteranges``, a range past the end 416 with
``Content-Range: bytes */<size>``; ``If-Range``, ``If-Match``, ``If-None-Match``,
``If-Modified-Since`` and ``If-Unmodified-Since`` as RFC 7232 section 6 orders
them (304, 412); HEAD sends the headers only.

Speed: the body goes out in 4 MiB windows of the file mapped into memory, so the
only copy is the kernel's, from the page cache into the socket, as nginx's
``sendfile`` does. A worker thread maps and pre-faults each window
(``MADV_POPULATE_READ``) while the previous one is being sent, so the event loop
never waits for the disk. Pre-faulting also tells a file that shrank meanwhile
(the response then stops short and the connection is closed) before its pages
reach the server. Where the kernel lacks ``MADV_POPULATE_READ``, windows are
read with ``pread`` instead. A client that goes away stops the transfer.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import mimetypes
import mmap
import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import formatdate, parsedate_to_datetime

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from manifold.concurrency import DISK_POOL, run_in, start_in
from manifold.errors import ManifoldError, NotAFile, ObjectNotFound, PermissionDenied, ServerError

WINDOW = 4 * 1024 * 1024
# Up to this size a body is read whole in one call.
SMALL = 1024 * 1024
_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)
_MIME_OVERRIDES = {"apk": "application/vnd.android.package-archive"}
_OPEN_ERRORS: dict[type[OSError], type[ManifoldError]] = {
    FileNotFoundError: ObjectNotFound,
    IsADirectoryError: NotAFile,
    PermissionError: PermissionDenied,
}


class FileShrank(Exception):
    """The file got shorter while it was being sent: the response cannot be completed."""


class NotSatisfiable(Exception):
    def __init__(self, message: str, no_overlap: bool) -> None:
        super().__init__(message)
        self.no_overlap = no_overlap


@dataclass(frozen=True, slots=True)
class ByteRange:
    start: int
    length: int

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.start + self.length - 1}/{size}"


def content_type(name: str) -> str:
    """The type for ``name``'s extension; text types say UTF-8, as Go's table does."""
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    guessed = _MIME_OVERRIDES.get(ext) or mimetypes.guess_type(name, strict=False)[0]
    if guessed is None:
        return "application/octet-stream"
    return f"{guessed}; charset=utf-8" if guessed.startswith("text/") else guessed


def etag(st: os.stat_result) -> str:
    return f'"{int(st.st_mtime):x}-{st.st_size:x}"'


class LocalFileResponse(Response):
    """An opened file as a response; ``headers`` override the derived ones.

    Made by ``open``, so that a file that cannot be read fails before the response
    starts; the response closes the file when it has been sent.
    """

    def __init__(self, fd: int, st: os.stat_result, name: str, headers: Mapping[str, str]) -> None:
        super().__init__()
        self.fd = fd
        self.stat = st
        self.name = name
        self.extra_headers = dict(headers)

    @classmethod
    async def open(cls, path: str, name: str, headers: Mapping[str, str]) -> LocalFileResponse:
        """Raises ``ObjectNotFound``, ``NotAFile``, ``PermissionDenied`` or ``ServerError``."""
        try:
            fd, st = await run_in(DISK_POOL, _open, path)
        except OSError as exc:
            raise _OPEN_ERRORS.get(type(exc), ServerError)() from exc
        return cls(fd, st, name, headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await _Exchange(self.fd, self.stat, self, scope, receive, send).run()
        finally:
            os.close(self.fd)


class _Exchange:
    """One request for one open file."""

    def __init__(
        self,
        fd: int,
        st: os.stat_result,
        response: LocalFileResponse,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        self.fd = fd
        self.size = st.st_size
        self.mtime = int(st.st_mtime)
        self.etag = etag(st)
        self.request = Headers(scope=scope)
        self.method = scope["method"]
        self.receive = receive
        self.send = send
        self.headers = self._base_headers(response)

    def _base_headers(self, response: LocalFileResponse) -> dict[str, str]:
        headers = {
            "content-type": content_type(response.name),
            "accept-ranges": "bytes",
            "etag": self.etag,
        }
        if self.mtime:
            headers["last-modified"] = formatdate(self.mtime, usegmt=True)
        headers.update((k.lower(), v) for k, v in response.extra_headers.items())
        return headers

    async def run(self) -> None:
        status = self._precondition_status()
        if status is not None:
            await self._bare(status)
            return
        try:
            ranges = self._ranges()
        except NotSatisfiable as exc:
            await self._unsatisfiable(exc)
            return
        if len(ranges) > 1:
            await self._multipart(ranges)
            return
        whole = not ranges
        span = ByteRange(0, self.size) if whole else ranges[0]
        if not whole:
            self.headers["content-range"] = span.content_range(self.size)
        self.headers["content-length"] = str(span.length)
        await self._start(200 if whole else 206)
        if self.method == "HEAD" or span.length == 0:
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await self._body(span.start, span.length, last=True)

    # --- preconditions (RFC 7232 section 6, as Go's checkPreconditions) -----------

    def _precondition_status(self) -> int | None:
        verdict = self._if_match()
        if verdict is None:
            verdict = self._if_unmodified_since()
        if verdict is False:
            return 412
        none_match = self._if_none_match()
        if none_match is False:
            return 304 if self.method in ("GET", "HEAD") else 412
        if none_match is None and self._if_modified_since() is False:
            return 304
        return None

    def _if_match(self) -> bool | None:
        value = self.request.get("if-match")
        if value is None:
            return None
        tags = _etags(value)
        return "*" in tags or any(_strong_match(tag, self.etag) for tag in tags)

    def _if_none_match(self) -> bool | None:
        value = self.request.get("if-none-match")
        if value is None:
            return None
        tags = _etags(value)
        return not ("*" in tags or any(_weak_match(tag, self.etag) for tag in tags))

    def _if_modified_since(self) -> bool | None:
        if self.method not in ("GET", "HEAD"):
            return None
        since = _http_date(self.request.get("if-modified-since"))
        if since is None or not self.mtime:
            return None
        return self.mtime > since

    def _if_unmodified_since(self) -> bool | None:
        since = _http_date(self.request.get("if-unmodified-since"))
        if since is None or not self.mtime:
            return None
        return self.mtime <= since

    def _range_applies(self) -> bool:
        """``If-Range``: the range counts only while the file is the one the client has."""
        value = self.request.get("if-range")
        if value is None or self.method not in ("GET", "HEAD"):
            return True
        if value.startswith(('"', 'W/"')):
            return _strong_match(value.strip(), self.etag)
        return self.mtime != 0 and _http_date(value) == self.mtime

    # --- ranges -------------------------------------------------------------------

    def _ranges(self) -> list[ByteRange]:
        header = self.request.get("range")
        if not header or not self._range_applies():
            return []
        ranges = parse_ranges(header, self.size)
        if sum(r.length for r in ranges) > self.size:
            return []  # more bytes than the file holds: ignore the header, as Go does
        return ranges

    async def _unsatisfiable(self, exc: NotSatisfiable) -> None:
        body = f"{exc}\n".encode()
        headers = {"content-type": "text/plain; charset=utf-8", "content-length": str(len(body))}
        if exc.no_overlap:
            headers["content-range"] = f"bytes */{self.size}"
        await self.send({"type": "http.response.start", "status": 416, "headers": _raw(headers)})
        await self.send({"type": "http.response.body", "body": body, "more_body": False})

    async def _multipart(self, ranges: list[ByteRange]) -> None:
        boundary = secrets.token_hex(30)
        part_type = self.headers["content-type"]
        heads = [
            (
                ("" if i == 0 else "\r\n")
                + f"--{boundary}\r\nContent-Range: {r.content_range(self.size)}\r\n"
                + f"Content-Type: {part_type}\r\n\r\n"
            ).encode()
            for i, r in enumerate(ranges)
        ]
        tail = f"\r\n--{boundary}--\r\n".encode()
        length = sum(len(h) for h in heads) + sum(r.length for r in ranges) + len(tail)
        self.headers["content-type"] = f"multipart/byteranges; boundary={boundary}"
        self.headers["content-length"] = str(length)
        await self._start(206)
        if self.method == "HEAD":
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        for head, part in zip(heads, ranges, strict=True):
            await self.send({"type": "http.response.body", "body": head, "more_body": True})
            await self._body(part.start, part.length, last=False)
        await self.send({"type": "http.response.body", "body": tail, "more_body": False})

    # --- sending --------------------------------------------------------------------

    async def _start(self, status: int) -> None:
        await self.send(
            {"type": "http.response.start", "status": status, "headers": _raw(self.headers)}
        )

    async def _bare(self, status: int) -> None:
        """304 or 412: headers only."""
        for name in ("content-type", "content-length", "content-encoding"):
            self.headers.pop(name, None)
        if status == 304 and "etag" in self.headers:
            self.headers.pop("last-modified", None)
        await self._start(status)
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _body(self, start: int, length: int, last: bool) -> None:
        if length <= SMALL:
            data = await run_in(DISK_POOL, _read_exact, self.fd, start, length)
            await self.send({"type": "http.response.body", "body": data, "more_body": not last})
            return
        gone = asyncio.ensure_future(_disconnect(self.receive))
        try:
            await self._windows(start, start + length, last, gone)
        finally:
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone

    async def _windows(self, pos: int, end: int, last: bool, gone: asyncio.Future[None]) -> None:
        """Send ``[pos, end)`` window by window, preparing the next one meanwhile."""
        ahead = _prepare(self.fd, pos, min(WINDOW, end - pos))
        try:
            while True:
                window = await ahead
                pos += len(window)
                more = pos < end
                if more:
                    ahead = _prepare(self.fd, pos, min(WINDOW, end - pos))
                await self.send(
                    {"type": "http.response.body", "body": window, "more_body": more or not last}
                )
                if not more or gone.done():
                    return
        finally:
            # The file descriptor is closed after this returns: no thread may still use it.
            if not ahead.done():
                await asyncio.wait([ahead])
            if not ahead.cancelled():
                ahead.exception()


def parse_ranges(header: str, size: int) -> list[ByteRange]:
    """A ``Range`` header as Go's ``parseRange`` reads it."""
    if not header.startswith("bytes="):
        raise NotSatisfiable("invalid range", no_overlap=False)
    ranges: list[ByteRange] = []
    no_overlap = False
    for spec in header[len("bytes=") :].split(","):
        spec = spec.strip(" \t")
        if not spec:
            continue
        first, dash, last = spec.partition("-")
        first, last = first.strip(" \t"), last.strip(" \t")
        if not dash:
            raise NotSatisfiable("invalid range", no_overlap=False)
        if not first:
            suffix = _non_negative(last)
            start = size - min(suffix, size)
            ranges.append(ByteRange(start, size - start))
            continue
        start = _non_negative(first)
        if start >= size:
            no_overlap = True
            continue
        stop = size - 1 if not last else min(_non_negative(last), size - 1)
        if last and _non_negative(last) < start:
            raise NotSatisfiable("invalid range", no_overlap=False)
        ranges.append(ByteRange(start, stop - start + 1))
    if no_overlap and not ranges:
        raise NotSatisfiable("invalid range: failed to overlap", no_overlap=True)
    return ranges


# Go's strconv.ParseInt(text, 10, 64): ASCII digits only, nothing past int64.
_INT64_MAX = (1 << 63) - 1
_INT64_DIGITS = len(str(_INT64_MAX))


def _non_negative(text: str) -> int:
    # str.isdigit() also passes digits int() refuses (a Latin-1 superscript) and
    # numbers too long for int() to read: both would otherwise end as a 500.
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > _INT64_DIGITS:
        raise NotSatisfiable("invalid range", no_overlap=False)
    value = int(text.lstrip("0") or "0")
    if value > _INT64_MAX:
        raise NotSatisfiable("invalid range", no_overlap=False)
    return value


def _etags(value: str) -> list[str]:
    return [tag.strip() for tag in value.split(",") if tag.strip()]


def _strong_match(tag: str, ours: str) -> bool:
    return tag == ours and not tag.startswith("W/")


def _weak_match(tag: str, ours: str) -> bool:
    return tag.removeprefix("W/") == ours.removeprefix("W/")


def _http_date(value: str | None) -> int | None:
    """Seconds since the epoch of an HTTP date, or None when absent or unreadable."""
    if not value:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int((when - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds())


def _raw(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _prepare(fd: int, start: int, length: int) -> asyncio.Future[bytes | memoryview]:
    return start_in(DISK_POOL, _window, fd, start, length)


def _open(path: str) -> tuple[int, os.stat_result]:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


class _Mapping:
    """Whether windows can be mapped; switched off once if the kernel lacks pre-faulting."""

    usable = hasattr(mmap.mmap, "madvise")


def _window(fd: int, start: int, length: int) -> bytes | memoryview:
    """``length`` bytes of the file from ``start``, mapped and pre-faulted where possible."""
    if _Mapping.usable:
        try:
            return _mapped(fd, start, length)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                raise FileShrank() from exc
            _Mapping.usable = False
    return _read_exact(fd, start, length)


def _mapped(fd: int, start: int, length: int) -> memoryview:
    offset = start - start % mmap.ALLOCATIONGRANULARITY
    try:
        mapped = mmap.mmap(fd, start + length - offset, access=mmap.ACCESS_READ, offset=offset)
    except ValueError as exc:  # the file is now shorter than the window
        raise FileShrank() from exc
    try:
        mapped.madvise(_POPULATE_READ)
    except OSError:
        mapped.close()
        raise
    return memoryview(mapped)[start - offset :]


def _read_exact(fd: int, start: int, length: int) -> bytes:
    data = os.pread(fd, length, start)
    if len(data) == length:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, start + got)
        if not more:
            raise FileShrank()
        parts.append(more)
        got += len(more)
    return b"".join(parts)
