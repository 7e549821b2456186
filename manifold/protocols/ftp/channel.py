"""One data connection's bytes, in clear text or TLS, and how the client ended them.

A transfer the client sends is whole only when the client ended the connection
cleanly: over TLS with its close_notify, in clear text with its FIN. TLS runs here on
memory buffers (``ssl.SSLObject``) over a plain TCP transport rather than in the
event loop's TLS transport, for two reasons. uvloop's (which the server runs on)
takes a FIN that arrives while reading is paused for a broken connection and closes
at once, dropping the records still buffered and reporting no error: an upload's
last blocks vanished and the transfer looked complete. And neither uvloop's nor
asyncio's tells a close_notify from a bare FIN. Here a FIN only marks the end of the
bytes received; every byte before it is still read, and the read past them says how
the client ended: ``b""`` after a close_notify, ``ssl.SSLEOFError`` without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from typing import cast

# Bytes received and not yet read past which the client is made to wait (reading
# paused), and below which it may send again.
READ_AHEAD = 4 << 20
RESUME_BELOW = 1 << 20
# How long the bytes written have to leave once the connection is being closed.
CLOSE_SECONDS = 30.0


class Cut(ConnectionError):
    """The data connection ended without its clean end (a reset, or closed here)."""


class Tls:
    """The TLS of one connection, on memory buffers: ciphertext in, ciphertext out."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.closed = False  # the client's close_notify was read

    def handshake(self) -> bool:
        """Take the handshake as far as the bytes received go; True once it is done."""
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            return False
        return True

    def read(self, size: int) -> bytes | None:
        """Up to ``size`` bytes of data; ``b""`` after the close_notify; None while
        more must arrive. A TCP end without close_notify raises ``SSLEOFError``."""
        parts: list[bytes] = []
        got = 0
        while got < size and not self.closed:
            try:
                chunk = self.tls.read(size - got)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                chunk = b""
            if not chunk:
                self.closed = True
            parts.append(chunk)
            got += len(chunk)
        if got or self.closed:
            return b"".join(parts)
        return None

    def encrypt(self, data: bytes) -> bytes:
        self.tls.write(data)
        return self.outgoing.read()

    def close_notify(self) -> bytes:
        with contextlib.suppress(ssl.SSLError):  # SSLWantReadError: theirs is yet to come
            self.tls.unwrap()
        return self.outgoing.read()


class DataChannel(asyncio.Protocol):
    """A data connection as a transfer uses it: ``open`` (the TLS handshake),
    ``read``, ``write``, then ``finish`` after a transfer or ``close`` to cut it."""

    def __init__(self, tls: ssl.SSLContext | None, made: Callable[[DataChannel], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._tls = Tls(tls) if tls is not None else None
        self._made = made
        self._transport: asyncio.Transport | None = None
        self._received = bytearray()  # clear text only; TLS keeps its bytes in Tls
        self._eof = False  # the client's FIN
        self._lost = False
        self._error: Exception | None = None
        self._reading_paused = False
        self._holding = False  # TLS bytes to send wait for the next write (see open)
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] = self._loop.create_future()

    # --- the transport's side -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A TCP transport (uvloop's is one without being an asyncio.Transport subclass).
        self._transport = cast(asyncio.Transport, transport)
        self._made(self)

    def data_received(self, data: bytes) -> None:
        if self._tls is not None:
            self._tls.incoming.write(data)
        else:
            self._received += data
        if self._buffered() >= READ_AHEAD and not self._reading_paused:
            self._reading_paused = True
            self._transport_now().pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._end_incoming()
        self._wake()
        return True  # kept open: an answer (our close_notify) may still be due

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost, self._error = True, exc
        self._end_incoming()
        self._wake()
        for future in (self._writable, self._closed):
            if future is not None and not future.done():
                future.set_result(None)

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    # --- the transfer's side --------------------------------------------------------

    @property
    def peer_host(self) -> str:
        peer = self._transport_now().get_extra_info("peername") or ("",)
        return str(peer[0])

    async def open(self) -> None:
        """Complete the TLS handshake (nothing to do in clear text)."""
        if self._tls is None:
            return
        while not self._tls.handshake():
            self._flush()
            if self._lost or self._eof:
                raise Cut("the data connection closed during the TLS handshake")
            await self._wait()
        # TLS 1.3 sends session tickets after the handshake. A client that uploads never
        # reads them, and closing its socket with them unread makes its system reset
        # the connection, dropping whatever the client had not yet sent (its last
        # blocks, its close_notify). They wait here for our next bytes instead: the
        # data of a download, or the close_notify that answers the client's.
        self._holding = self._tls.tls.version() == "TLSv1.3"
        if not self._holding:
            self._flush()

    async def read(self, size: int) -> bytes:
        """Up to ``size`` bytes; ``b""`` once the client ended cleanly, and an error
        (``Cut``, an ``ssl.SSLError``) if the connection ended otherwise."""
        while (data := self._take(size)) is None:
            await self._wait()
        return data

    async def write(self, data: bytes) -> None:
        """Send ``data``, waiting while the client is behind in reading."""
        self._check_open()
        if not data:
            return
        self._send(self._tls.encrypt(data) if self._tls is not None else data)
        if self._writable is not None:
            await self._writable
            self._writable = None
            self._check_open()

    async def finish(self) -> None:
        """End the connection after a transfer: TLS's close_notify, then close once
        what was written has left (so that the reply never comes before the data's
        end). A client already gone makes no difference now."""
        if self._tls is not None and not self._lost:
            self._send(self._tls.close_notify())
        self._transport_now().close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_SECONDS):
                await asyncio.shield(self._closed)
        self.close()

    def close(self) -> None:
        """Cut the connection now, whatever is still unsent."""
        if self._transport is not None and not self._lost:
            self._transport.abort()

    # --- inside ---------------------------------------------------------------------

    def _take(self, size: int) -> bytes | None:
        if self._tls is not None:
            data = self._tls.read(size)
            if not self._holding:
                self._flush()  # what reading may have to answer (TLS 1.2's renegotiation)
        elif self._received:
            data = bytes(self._received[:size])
            del self._received[:size]
        elif self._eof:
            data = b""
        else:
            data = None
            self._check_open()
        if data is not None:
            self._resume()
        return data

    def _check_open(self) -> None:
        if self._lost:
            why = f" ({self._error})" if self._error else ""
            raise Cut(f"the data connection was closed before its end{why}") from self._error

    def _end_incoming(self) -> None:
        # TLS reads then run to the end of what arrived, and past it say how it ended.
        if self._tls is not None:
            self._tls.incoming.write_eof()

    def _buffered(self) -> int:
        return self._tls.incoming.pending if self._tls is not None else len(self._received)

    def _resume(self) -> None:
        if self._reading_paused and self._buffered() <= RESUME_BELOW and not self._lost:
            self._reading_paused = False
            self._transport_now().resume_reading()

    def _flush(self) -> None:
        if self._tls is not None:
            self._send(self._tls.outgoing.read())

    def _send(self, data: bytes) -> None:
        if data and not self._lost:
            self._transport_now().write(data)

    async def _wait(self) -> None:
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _transport_now(self) -> asyncio.Transport:
        assert self._transport is not None  # set before any bytes or calls arrive
        return self._transport
