"""Requests answered side by side, and answers sent in batches: the SFTP request loop.

asyncssh's SFTP server reads a request, awaits its answer, and only then reads the
next one, so a client's many requests in flight (rclone's client keeps 64 reads or
writes of 32 KiB going) wait in line behind each other; and it writes every answer
to the channel on its own, so each 32 KiB answer (a little more than one SSH packet
of the client's 32 KiB) costs two SSH packets. Here instead:

* requests on an open file (read, write, close, fstat, fsetstat) go to that file's
  lane, a queue its own task works through in arrival order: the request loop goes
  on reading, a write is always followed by the reads and the close after it, and
  files do not wait for each other;
* any other request (open, stat, rename, ...) first waits for every lane to be
  empty, then runs where it was read, as before: a client that closes a file and
  then opens or renames it finds it written;
* the answers made in one turn of the event loop go to the channel in one write, so
  the SSH layer packs them into full packets, with the reply's bytes copied once;
* the SSH packets made in one turn go to the socket in one system call
  (``BatchedTransport``) rather than one each (asyncssh also sends an empty ignore
  packet before every packet, two system calls a packet).

At most ``MAX_QUEUED`` requests (all files together) wait in lanes: beyond that the
request loop stops reading, so a client that never waits for answers holds no more
memory than that.

This is the one module that builds on asyncssh's internals (``SFTPServerHandler``,
the function its stream session calls to run it, a connection's transport), pinned in
constraints.txt; tests/protocols/test_sftp_dispatch.py fails if they change
(``missing_internals``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, cast

import asyncssh.stream
from asyncssh.constants import FXP_CLOSE, FXP_FSETSTAT, FXP_FSTAT, FXP_READ, FXP_WRITE
from asyncssh.packet import Byte, SSHPacket, UInt32
from asyncssh.sftp import SFTPNoConnection, SFTPServerHandler, run_sftp_server

# Requests waiting in lanes before the request loop stops reading more.
MAX_QUEUED = 256
# Requests whose first field is the handle of an open file.
_ON_HANDLE = frozenset({FXP_READ, FXP_WRITE, FXP_CLOSE, FXP_FSTAT, FXP_FSETSTAT})

Request = tuple[int, int, SSHPacket]


class LaneHandler(SFTPServerHandler):
    """asyncssh's SFTP server session, answering each open file in its own lane."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._quiet = not self._logger.isEnabledFor(logging.DEBUG)
        self._lanes: dict[bytes, deque[Request]] = {}
        self._workers: dict[bytes, asyncio.Task[None]] = {}
        self._room = asyncio.Semaphore(MAX_QUEUED)
        self._out: list[bytes] = []  # answers not yet written to the channel

    async def _process_packet(self, pkttype: int, pktid: int, packet: SSHPacket) -> None:
        handle = handle_of(pkttype, packet)
        if handle is None:
            await self._idle()
            await super()._process_packet(pkttype, pktid, packet)
            return
        await self._room.acquire()
        self._lanes.setdefault(handle, deque()).append((pkttype, pktid, packet))
        if handle not in self._workers:
            self._workers[handle] = asyncio.ensure_future(self._work(handle))

    async def _work(self, handle: bytes) -> None:
        """Answer the requests of one lane in order, until it is empty."""
        lane = self._lanes[handle]
        try:
            while lane:
                try:
                    await super()._process_packet(*lane.popleft())
                except SFTPNoConnection:
                    pass  # the client is gone: the rest is still applied, unanswered
                finally:
                    self._room.release()
        finally:
            del self._lanes[handle], self._workers[handle]

    async def _idle(self) -> None:
        """Return once every lane has been worked through."""
        while self._workers:
            await asyncio.wait(set(self._workers.values()))

    async def _cleanup(self, exc: Exception | None) -> None:
        # What the client sent before it left is applied first, as asyncssh does with
        # the requests it had read: a close already sent still puts its file in place.
        await self._idle()
        self._write_out()
        await super()._cleanup(exc)

    def log_received_packet(self, *args: Any, **kwargs: Any) -> None:
        # asyncssh formats a packet's log line before its logger looks at the level:
        # without debug logging, that is work for every packet and nothing to show.
        if not self._quiet:
            super().log_received_packet(*args, **kwargs)

    def send_packet(self, pkttype: int, pktid: int | None, *args: bytes) -> None:
        writer = self._writer
        if writer is None:
            raise SFTPNoConnection("Connection not open")
        if writer.channel.is_closing():
            return
        if not self._out:
            asyncio.get_running_loop().call_soon(self._write_out)
        self._out.append(UInt32(1 + sum(map(len, args))) + Byte(pkttype))
        self._out.extend(args)
        if not self._quiet:
            self.log_sent_packet(pkttype, pktid, Byte(pkttype) + b"".join(args))

    def _write_out(self) -> None:
        out, self._out = self._out, []
        writer = self._writer
        if out and writer is not None and not writer.channel.is_closing():
            writer.write(b"".join(out))


def handle_of(pkttype: int, packet: SSHPacket) -> bytes | None:
    """The file handle a request acts on, None for a request on no open file."""
    if pkttype not in _ON_HANDLE:
        return None
    payload = packet.get_full_payload()  # type byte, request id, then the handle
    length = int.from_bytes(payload[5:9], "big")
    return payload[9 : 9 + length] if len(payload) >= 9 + length else None


Runner = Callable[..., Awaitable[None]]
_RUN_ORIGINAL: Runner = run_sftp_server


async def _run(sftp_server: Any, reader: Any, writer: Any, sftp_version: int) -> None:
    if not isinstance(sftp_server, asyncssh.SFTPServer) or not _laned(sftp_server):
        await _RUN_ORIGINAL(sftp_server, reader, writer, sftp_version)
        return
    reader.logger.info("Starting SFTP server")
    await LaneHandler(sftp_server, reader, writer, sftp_version).run()


_LANED: set[type] = set()


def _laned(server: asyncssh.SFTPServer) -> bool:
    return any(isinstance(server, kind) for kind in _LANED)


def answer_in_lanes(kind: type[asyncssh.SFTPServer]) -> None:
    """Serve the SFTP sessions of ``kind`` with ``LaneHandler``; every other SFTP
    server in the process keeps asyncssh's own loop."""
    _LANED.add(kind)
    asyncssh.stream.run_sftp_server = _run  # type: ignore[attr-defined]


class BatchedTransport:
    """A connection's transport whose writes of one event-loop turn go to the socket
    as one: asyncssh writes every SSH packet on its own (and an empty ignore packet
    before each), one system call apiece."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append(data)

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.write(b"".join(pending))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


# What this module takes from asyncssh beyond its documented API: (owner, name).
_INTERNALS = (
    (SFTPServerHandler, "_process_packet"),
    (SFTPServerHandler, "_cleanup"),
    (SFTPServerHandler, "run"),
    (asyncssh.stream, "run_sftp_server"),
    (asyncssh.SSHServerConnection, "_send"),
)


def missing_internals() -> list[str]:
    """The asyncssh internals this module builds on that the installed asyncssh lacks
    (none with the pinned version; a test fails on any)."""
    return [
        f"{getattr(owner, '__name__', owner)}.{name}"
        for owner, name in _INTERNALS
        if not hasattr(owner, name)
    ]


def batch_sends(conn: asyncssh.SSHServerConnection) -> None:
    """Make ``conn``'s writes of one event-loop turn one socket write."""
    transport = conn._transport
    if transport is not None:
        conn._transport = cast(asyncio.Transport, BatchedTransport(transport))
