"""One logged-in FTP control connection and its data connections.

aioftp speaks the control channel (connect, ``AUTH TLS``, login, commands and
replies); data connections are opened here, because a server such as vsftpd accepts
a passive connection only once the transfer command arrived, and so starts its TLS
handshake only then (RFC 4217), while aioftp's own would shake hands on connect and
wait forever. Data connections are always passive, to the control connection's host
whatever address ``PASV`` names (a server behind NAT names its inner one).

Every failure of the socket marks the connection ``broken``: the pool closes it
instead of lending it again. A transfer stopped early (a range read that has all its
bytes) is ended with ``ABOR`` and a ``NOOP`` whose reply marks where the replies of
the abandoned transfer end, so the connection goes back to the pool in step.
"""

from __future__ import annotations

import asyncio
import codecs
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import aioftp
from aioftp.common import SSLSessionBoundContext

from manifold.drivers.ftp.listing import (
    LINK,
    Entry,
    decode_line,
    entry_from_facts,
    parse_facts,
    parse_timeval,
)
from manifold.errors import ServerError

# What a connection is lent for: the pool counts each kind apart.
Kind = Literal["call", "read", "write"]
# Any final reply: the caller looks at the code itself.
FINAL = ("2xx", "3xx", "4xx", "5xx")
NETWORK_ERRORS = (OSError, EOFError, TimeoutError)
# Replies read after ``ABOR``/``NOOP`` before the connection is given up as out of step.
RESYNC_REPLIES = 6
# Bytes a data connection reads ahead of its consumer (it pauses at twice this): the
# largest piece a download is handed over in.
DATA_BUFFER = 1 << 20
# Bytes of a listing handed over in one batch of lines (small enough that the first
# batches are parsed while the server still writes the rest), and the longest line taken.
LINES_BATCH = 32 << 10
LONGEST_LINE = 1 << 20
# Where a listing's lines go, a batch at a time, as they arrive.
LineSink = Callable[[list[bytes]], Awaitable[None]]
# The same for a folder's listing, told whether the lines are MLSD's.
ListingSink = Callable[[list[bytes], bool], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how to log in; ``password`` never appears in a repr or a message."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    encoding: str
    tls: ssl.SSLContext | None
    connect_timeout: float
    io_timeout: float


@dataclass(frozen=True, slots=True)
class Reply:
    code: str
    lines: Sequence[str]

    @property
    def text(self) -> str:
        """The reply's last line without its code (multi-line replies end with it)."""
        return self.lines[-1].strip() if self.lines else ""

    def ok(self) -> bool:
        return self.code.startswith("2")


class ReplyError(Exception):
    """The server refused a command: its verb (never its argument) and the reply."""

    def __init__(self, verb: str, reply: Reply) -> None:
        super().__init__(f"{verb}: {reply.code} {reply.text}")
        self.verb = verb
        self.code = reply.code
        self.text = reply.text


@dataclass(frozen=True, slots=True)
class Features:
    """What ``FEAT`` said the server supports, as far as the driver cares."""

    mlst: bool = False
    mfmt: bool = False
    utf8: bool = False

    @classmethod
    def parse(cls, lines: Sequence[str]) -> Features:
        names = {line.strip().split(" ")[0].upper() for line in lines}
        return cls(mlst="MLST" in names, mfmt="MFMT" in names, utf8="UTF8" in names)


@contextmanager
def _step(verb: str) -> Iterator[None]:
    """aioftp's refusals during log-in as ``ReplyError``s naming the step."""
    try:
        yield
    except aioftp.StatusCodeError as exc:
        info = exc.info if isinstance(exc.info, list) else [exc.info]
        raise ReplyError(verb, Reply(str(exc.received_codes[-1]), info)) from exc


class DataChannel:
    """One passive data connection, every wait bounded by the idle time."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.timeout = timeout

    async def read(self, count: int) -> bytes:
        async with asyncio.timeout(self.timeout):
            return await self.reader.read(count)

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        async with asyncio.timeout(self.timeout):
            await self.writer.drain()

    async def lines(self) -> AsyncIterator[list[bytes]]:
        """The transfer's lines (line endings kept), in batches of about
        ``LINES_BATCH`` bytes as they arrive: a listing is never one giant string.
        A line longer than ``LONGEST_LINE`` is refused (no listing line is that long)."""
        pending = b""
        while data := await self.read(LINES_BATCH):
            pending += data
            if len(pending) < LINES_BATCH:
                continue
            whole, _, pending = pending.rpartition(b"\n")
            if len(pending) > LONGEST_LINE:
                raise ServerError("the FTP server sent a listing line too long to be one")
            if whole:
                yield (whole + b"\n").splitlines(keepends=True)
        if pending:
            yield pending.splitlines(keepends=True)

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        """Drop the connection at once, unread bytes and TLS goodbye and all."""
        self.writer.transport.abort()

    async def shut(self) -> None:
        """Close after the last byte went (and TLS said goodbye), so the server sees a
        whole file rather than a cut connection."""
        self.writer.close()
        async with asyncio.timeout(self.timeout):
            await self.writer.wait_closed()


class Connection:
    """A logged-in control connection. Paths are absolute server paths."""

    def __init__(self, client: aioftp.Client, endpoint: Endpoint, features: Features) -> None:
        self.client = client
        self.endpoint = endpoint
        self.features = features
        self.broken = False
        # Replies read since the pool last lent it: a lent connection that fails before
        # any reply was most likely closed by the server while it sat idle.
        self.replies = 0
        self.loans = 0
        self.kind: Kind = "call"  # which of the pool's slots it holds while lent
        self.last_used = time.monotonic()
        self._epsv = True

    @classmethod
    async def open(cls, endpoint: Endpoint) -> Connection:
        client = aioftp.Client(
            socket_timeout=endpoint.io_timeout,
            connection_timeout=endpoint.connect_timeout,
            encoding=endpoint.encoding,
        )
        try:
            with _step("connect"):
                await client.connect(endpoint.host, endpoint.port)
            if endpoint.tls is not None:
                with _step("AUTH TLS"):
                    await client.upgrade_to_tls(endpoint.tls)
            with _step("login"):
                await client.login(endpoint.user or "anonymous", endpoint.password or "anon@")
            code, lines = await client.command("FEAT", FINAL)
            features = Features.parse(lines if code.startswith("2") else [])
            connection = cls(client, endpoint, features)
            if features.utf8 and codecs.lookup(endpoint.encoding).name == "utf-8":
                await connection.ask("OPTS UTF8 ON")  # some servers want it; any answer will do
            await connection.do("TYPE I")
        except BaseException:
            client.close()
            raise
        return connection

    # --- the control channel ------------------------------------------------------

    async def ask(self, line: str, wait: bool = True) -> Reply:
        """Send ``line`` and read its reply, whatever its code. ``wait`` skips the
        preliminary (1xx) replies; a transfer command wants the first one."""
        if "\r" in line or "\n" in line:
            raise ValueError("an FTP command cannot carry a line break")
        expected, waited = (FINAL, "1xx") if wait else (("1xx", *FINAL), ())
        try:
            code, lines = await self.client.command(line, expected, waited)
        except BaseException:
            self.broken = True  # cut off, cancelled or garbled: the next reply is unknown
            raise
        self.replies += 1
        return Reply(code, lines)

    async def do(self, line: str, expect: str = "2") -> Reply:
        """``ask``, raising ``ReplyError`` unless the reply's code starts with ``expect``."""
        reply = await self.ask(line)
        if not reply.code.startswith(expect):
            raise ReplyError(line.split(" ", 1)[0], reply)
        return reply

    async def final(self) -> Reply:
        """The final reply of a transfer whose data connection just closed."""
        try:
            code, lines = await self.client.command(None, FINAL, "1xx")
        except BaseException:
            self.broken = True
            raise
        self.replies += 1
        reply = Reply(code, lines)
        if not reply.ok():
            raise ReplyError("transfer", reply)
        return reply

    def alive(self) -> bool:
        """Whether the socket still looks open, asking nothing of the server."""
        if self.broken:
            return False
        stream = self.client.stream
        reader, transport = stream.reader, stream.writer.transport
        return not (transport.is_closing() or reader.at_eof() or reader.exception())

    def close(self) -> None:
        self.broken = True
        self.client.close()

    # --- data connections ---------------------------------------------------------

    async def open_data(self, command: str, offset: int = 0) -> DataChannel:
        """A passive data connection carrying ``command``'s transfer (after ``REST``
        when ``offset``); ``ReplyError`` when the server refuses the command."""
        port = await self._passive_port()
        endpoint = self.endpoint
        try:
            async with asyncio.timeout(endpoint.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    endpoint.host, port, limit=DATA_BUFFER
                )
        except BaseException:
            self.broken = True  # the server waits for a connection that never came
            raise
        try:
            await self._start(command, offset)
            if endpoint.tls is not None:
                await self._secure(writer, endpoint.tls)
        except BaseException:
            writer.close()
            raise
        return DataChannel(reader, writer, endpoint.io_timeout)

    async def open_socket(self, command: str, offset: int = 0) -> socket.socket:
        """``open_data`` without TLS, as a bare non-blocking socket that the event loop
        never reads: the bytes go from it to the client by ``manifold.splice``."""
        port = await self._passive_port()
        try:
            async with asyncio.timeout(self.endpoint.connect_timeout):
                sock = await _bare(self.endpoint.host, port)
        except BaseException:
            self.broken = True
            raise
        try:
            await self._start(command, offset)
        except BaseException:
            sock.close()
            raise
        return sock

    async def _start(self, command: str, offset: int) -> None:
        if offset:
            await self.do(f"REST {offset}", "3")
        reply = await self.ask(command, wait=False)
        if not reply.code.startswith("1"):
            raise ReplyError(command.split(" ", 1)[0], reply)

    async def _passive_port(self) -> int:
        if self._epsv:
            reply = await self.ask("EPSV")
            if reply.code == "229":
                return self.client.parse_epsv_response(reply.text)[1]
            if not reply.code.startswith("5"):
                raise ReplyError("EPSV", reply)
            self._epsv = False  # an old server: PASV from now on
        reply = await self.do("PASV")
        return self.client.parse_pasv_response(reply.text)[1]

    async def _secure(self, writer: asyncio.StreamWriter, tls: ssl.SSLContext) -> None:
        """TLS on a data connection, resuming the control connection's session (which
        vsftpd and others require) and checking the same host's certificate."""
        context = tls
        ssl_object = self.client.stream.writer.transport.get_extra_info("ssl_object")
        if ssl_object is not None and ssl_object.session is not None:
            context = SSLSessionBoundContext(
                ssl.PROTOCOL_TLS_CLIENT, context=context, session=ssl_object.session
            )
        try:
            await writer.start_tls(
                context,
                server_hostname=self.endpoint.host,
                ssl_handshake_timeout=self.endpoint.io_timeout,
            )
        except BaseException:
            self.broken = True
            raise

    async def fetch(self, command: str, take: LineSink) -> None:
        """The lines of a transfer to this side (a listing), handed to ``take`` a batch
        at a time; an error ``take`` raises ends the transfer, and this connection."""
        data = await self.open_data(command)
        try:
            async for lines in data.lines():
                await take(lines)
        except BaseException:
            data.close()
            self.broken = True
            raise
        data.close()
        await self.final()

    async def abandon(self, data: DataChannel | socket.socket) -> None:
        """End a download before its end: close the data connection, then ``ABOR``, and
        read every reply up to ``NOOP``'s (the transfer's own ``226`` or ``426``, the
        abort's, in whatever mix the server sends)."""
        if isinstance(data, socket.socket):
            data.close()  # bytes left unread: the kernel resets the connection
        else:
            data.abort()
        try:
            await self.client.stream.write(b"ABOR\r\nNOOP\r\n")
            for _ in range(RESYNC_REPLIES):
                code, _lines = await self.client.parse_response()
                if code == "200":
                    return
        except Exception:  # noqa: S110 - any failure here only means: not reusable
            pass
        self.broken = True

    # --- questions about paths -----------------------------------------------------

    async def listing(
        self, path: str, take: Callable[[list[bytes], bool], Awaitable[None]]
    ) -> None:
        """The raw lines of ``path``'s listing, handed to ``take`` in batches as they
        arrive, with whether they are MLSD's.

        MLSD where offered; else ``LIST -a`` inside the folder (``-a``: vsftpd hides
        dot files without it; no argument: vsftpd would expand ``*?[`` in a path).
        """
        if self.features.mlst:
            await self.fetch(f"MLSD {path}", lambda lines: take(lines, True))
            return
        await self.do(f"CWD {path}")
        taken = False

        async def plain(lines: list[bytes]) -> None:
            nonlocal taken
            taken = True
            await take(lines, False)

        try:
            await self.fetch("LIST -a", plain)
        except ReplyError as exc:
            # Refused before any line came: a server without ``-a``.
            if taken or not exc.code.startswith("5"):
                raise
            await self.fetch("LIST", plain)

    async def stat(self, path: str, times: bool = False) -> Entry | None:
        """What is at ``path``: its entry, or None when nothing (readable) is there.

        MLST where offered; else ``SIZE`` (a file; ``MDTM`` for its time if ``times``),
        then ``CWD`` (a folder, whose time no command but MLST tells)."""
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if self.features.mlst:
            reply = await self.ask(f"MLST {path}")
            if not reply.ok() or len(reply.lines) < 2:
                return None
            facts = parse_facts(reply.lines[1].strip().partition(" ")[0])
            entry = entry_from_facts(name, facts)
            if entry is None or entry.kind != LINK:
                return entry
        return await self._probe(path, name, times)

    async def _probe(self, path: str, name: str, times: bool) -> Entry | None:
        reply = await self.ask(f"SIZE {path}")
        if reply.code == "213" and reply.text.isdigit():
            modified = None
            if times:
                stamp = await self.ask(f"MDTM {path}")
                modified = parse_timeval(stamp.text) if stamp.code == "213" else None
            return Entry(name, "file", int(reply.text), modified)
        if (await self.ask(f"CWD {path}")).ok():
            return Entry(name, "dir", 0, None)
        return None

    def decode(self, raw: bytes) -> str | None:
        return decode_line(raw, self.endpoint.encoding)


async def _bare(host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket to ``host:port`` (its first address that
    answers)."""
    loop = asyncio.get_running_loop()
    found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    failure: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _, address in found:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise failure
