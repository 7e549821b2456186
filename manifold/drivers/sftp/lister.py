"""Folder listings over a second SFTP channel of the storage's SSH connection.

The library's own listing decodes every entry into objects of its own (a name record
with its long name, an attributes record with a field per attribute, a log line per
entry): for a folder of a few thousand entries that decoding took more time than the
server's answers. This channel speaks SFTP version 3 for the few requests a listing
needs (``OPENDIR``, ``READDIR``, ``CLOSE``) and decodes each ``NAME`` answer straight
into ``Listed`` tuples: the name, its kind, size and time, nothing else.

Requests carry ids and may be in flight side by side (several listings at once); a
folder handle is closed without waiting for the answer, so a listing cut off by its
time limit never waits on a server that stopped answering. Server errors are the
library's own exceptions (``SFTPError.construct``), so the driver's one error table
maps both channels alike; a lost channel fails every waiting request with
``SFTPConnectionLost``.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import AsyncIterator
from typing import NamedTuple, cast

import asyncssh
from asyncssh.packet import SSHPacket

VERSION = 3
# Packet types of SFTP version 3 (draft-ietf-secsh-filexfer-02).
_INIT, _VERSION, _CLOSE, _OPENDIR, _READDIR = 1, 2, 4, 11, 12
_STATUS, _HANDLE, _NAME = 101, 102, 104
_EOF = 1
# Attribute flags, and the file kinds in the permission bits.
_SIZE, _UIDGID, _PERMISSIONS, _ACMODTIME, _EXTENDED = 1, 2, 4, 8, 0x80000000
_KINDS = {
    0o040000: asyncssh.FILEXFER_TYPE_DIRECTORY,
    0o100000: asyncssh.FILEXFER_TYPE_REGULAR,
    0o120000: asyncssh.FILEXFER_TYPE_SYMLINK,
}
_UNKNOWN = asyncssh.FILEXFER_TYPE_UNKNOWN
_SPECIAL = asyncssh.FILEXFER_TYPE_SPECIAL
# ``READDIR`` requests kept in flight beyond the one whose answer is awaited.
READ_AHEAD = 2
# A packet longer than this is refused, as the library refuses one.
LONGEST_PACKET = 4 << 20

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_HEAD = struct.Struct(">IBI")  # length, type, request id


class Listed(NamedTuple):
    """One folder entry: ``kind`` is an ``asyncssh.FILEXFER_TYPE_*``; ``mtime`` is
    seconds since the epoch, None when the server sent none."""

    name: str
    kind: int
    size: int
    mtime: int | None


def kind_of(permissions: int | None) -> int:
    if permissions is None:
        return _UNKNOWN
    return _KINDS.get(permissions & 0o170000, _SPECIAL)


def decode_names(data: bytes, at: int) -> list[Listed]:
    """The entries of a ``NAME`` answer whose count starts at ``at``."""
    try:
        return _decode_names(data, at)
    except (struct.error, UnicodeDecodeError) as exc:
        reason = "Unable to decode name" if isinstance(exc, UnicodeDecodeError) else "Bad NAME"
        raise asyncssh.SFTPBadMessage(reason) from None


def _decode_names(data: bytes, at: int) -> list[Listed]:
    (count,) = _U32.unpack_from(data, at)
    at += 4
    listed = []
    u32, end = _U32.unpack_from, len(data)
    for _ in range(count):
        (length,) = u32(data, at)
        name = data[at + 4 : at + 4 + length].decode()
        at += 4 + length
        (length,) = u32(data, at)  # the long name (``ls -l``), not wanted
        at += 4 + length
        size, permissions, mtime, at = _attributes(data, at)
        if at > end:
            raise struct.error("short NAME")
        listed.append(Listed(name, kind_of(permissions), size, mtime))
    return listed


def _attributes(data: bytes, at: int) -> tuple[int, int | None, int | None, int]:
    """(size, permissions, mtime, where the next field starts) of an ATTRS."""
    (flags,) = _U32.unpack_from(data, at)
    at += 4
    size, permissions, mtime = 0, None, None
    if flags & _SIZE:
        (size,) = _U64.unpack_from(data, at)
        at += 8
    if flags & _UIDGID:
        at += 8
    if flags & _PERMISSIONS:
        (permissions,) = _U32.unpack_from(data, at)
        at += 4
    if flags & _ACMODTIME:
        (mtime,) = _U32.unpack_from(data, at + 4)
        at += 8
    if flags & _EXTENDED:
        at = _skip_extended(data, at)
    return size, permissions, mtime, at


def _skip_extended(data: bytes, at: int) -> int:
    (count,) = _U32.unpack_from(data, at)
    at += 4
    for _ in range(2 * count):  # a name and a value each
        (length,) = _U32.unpack_from(data, at)
        at += 4 + length
    return at


def _string(value: bytes) -> bytes:
    return _U32.pack(len(value)) + value


class _Channel(asyncssh.SSHClientSession[bytes]):
    """Cuts the channel's bytes into SFTP packets and hands each to ``Lister``."""

    def __init__(self) -> None:
        self.lister: Lister | None = None
        self._buffer = bytearray()

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= 4:
            (length,) = _U32.unpack_from(buffer)
            if length > LONGEST_PACKET or length == 0:
                self._fail(asyncssh.SFTPBadMessage("Bad packet length"))
                return
            if len(buffer) < 4 + length:
                return
            packet = bytes(buffer[4 : 4 + length])
            del buffer[: 4 + length]
            if self.lister is not None:
                self.lister.received(packet)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(asyncssh.SFTPConnectionLost(str(exc) if exc else "Channel closed"))

    def _fail(self, exc: asyncssh.SFTPError) -> None:
        if self.lister is not None:
            self.lister.fail(exc)


class Lister:
    """Listings over one SFTP channel; ``open`` starts it."""

    def __init__(self, channel: asyncssh.SSHClientChannel[bytes], session: _Channel) -> None:
        self._channel = channel
        self._waiting: dict[int, asyncio.Future[bytes]] = {}
        self._next_id = 0
        self._failed: asyncssh.SFTPError | None = None
        self._version: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        session.lister = self

    @classmethod
    async def open(cls, conn: asyncssh.SSHClientConnection) -> Lister:
        """A new SFTP channel on ``conn``, its version agreed (3)."""
        channel, session = await conn.create_session(_Channel, subsystem="sftp", encoding=None)
        lister = cls(channel, cast(_Channel, session))
        try:
            channel.write(_U32.pack(5) + bytes([_INIT]) + _U32.pack(VERSION))
            answer = await lister._version
            if answer[0] != _VERSION or _U32.unpack_from(answer, 1)[0] != VERSION:
                raise asyncssh.SFTPBadMessage("the server does not speak SFTP version 3")
        except BaseException:
            lister.close()
            raise
        return lister

    def close(self) -> None:
        self.fail(asyncssh.SFTPConnectionLost("Channel closed"))
        self._channel.close()

    async def scan(self, path: str) -> AsyncIterator[list[Listed]]:
        """The entries of folder ``path``, an answer's worth at a time.

        ``READ_AHEAD`` more answers are asked for before one is handed on, so that the
        server reads on in the folder while this side decodes and builds what it got
        (OpenSSH answers them in turn). The folder has ended once every answer still
        awaited says so too.
        """
        handle = await self._handle(path)
        asked: deque[tuple[int, asyncio.Future[bytes]]] = deque()
        ended = False
        try:
            while True:
                while not ended and len(asked) <= READ_AHEAD:
                    asked.append(self._send(_READDIR, _string(handle)))
                if not asked:
                    return
                names = await self._read(*asked.popleft())
                ended = not names  # entries after an end: a server answering out of turn
                if names:
                    yield names
        finally:
            for request, _ in asked:
                self._waiting.pop(request, None)
            self._close(handle)

    # --- requests ------------------------------------------------------------------

    async def _handle(self, path: str) -> bytes:
        kind, data = await self._ask(_OPENDIR, _string(path.encode()))
        if kind != _HANDLE:
            raise asyncssh.SFTPBadMessage(f"Unexpected response type: {kind}")
        (length,) = _U32.unpack_from(data, 5)
        return data[9 : 9 + length]

    async def _read(self, request: int, waiter: asyncio.Future[bytes]) -> list[Listed]:
        """The entries a ``READDIR`` sent as ``request`` got; none at the folder's end."""
        try:
            kind, data = await self._answer(request, waiter)
        except asyncssh.SFTPEOFError:
            return []
        if kind != _NAME:
            raise asyncssh.SFTPBadMessage(f"Unexpected response type: {kind}")
        return decode_names(data, 5)

    async def _ask(self, kind: int, body: bytes) -> tuple[int, bytes]:
        """Send a request; its answer's type and packet (a status raises)."""
        return await self._answer(*self._send(kind, body))

    async def _answer(self, request: int, waiter: asyncio.Future[bytes]) -> tuple[int, bytes]:
        """The answer to ``request``: its type and packet (a status raises)."""
        try:
            data = await waiter
        finally:
            self._waiting.pop(request, None)
        if data[0] == _STATUS:
            _raise_status(data)
        return data[0], data

    def _send(self, kind: int, body: bytes) -> tuple[int, asyncio.Future[bytes]]:
        if self._failed is not None:
            raise self._failed
        request = self._next_id
        self._next_id = (request + 1) & 0xFFFFFFFF
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiting[request] = waiter
        self._channel.write(_HEAD.pack(5 + len(body), kind, request) + body)
        return request, waiter

    def _close(self, handle: bytes) -> None:
        """Close a folder handle; its answer is not waited for (nor wanted)."""
        if self._failed is None:
            request, _waiter = self._send(_CLOSE, _string(handle))
            del self._waiting[request]

    # --- answers -------------------------------------------------------------------

    def received(self, packet: bytes) -> None:
        if packet[0] == _VERSION:
            if not self._version.done():
                self._version.set_result(packet)
            return
        if len(packet) < 5:
            self.fail(asyncssh.SFTPBadMessage("Bad packet"))
            return
        waiter = self._waiting.pop(_U32.unpack_from(packet, 1)[0], None)
        if waiter is not None and not waiter.done():  # else: a close, or given up
            waiter.set_result(packet)

    def fail(self, exc: asyncssh.SFTPError) -> None:
        """Every request now and later fails with ``exc``."""
        if self._failed is None:
            self._failed = exc
        waiting, self._waiting = self._waiting, {}
        for waiter in [self._version, *waiting.values()]:
            if not waiter.done():
                waiter.set_exception(exc)


def _raise_status(data: bytes) -> None:
    exc = asyncssh.SFTPError.construct(SSHPacket(data[5:]), "strict")
    if exc is None:
        raise asyncssh.SFTPBadMessage("Unexpected FX_OK response")
    raise exc
