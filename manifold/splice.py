"""A download's bytes moved from a back end's socket to the client's by the kernel.

A range reader whose bytes arrive on a plain socket (an FTP data connection, rclone's
``--rc-serve`` answer once its head is read) need not copy them into Python and out
again: ``os.splice`` moves them through a pipe from that socket into the client's.
The serving side offers a ``Sink`` for one response (``open_range(..., sink=)``); the
driver whose link carries the matching ``Link.relay`` key claims it (``claim``) for
exactly the range the response asked, and hands the sink its socket a piece at a time.

Only the link's own reader can claim the offer: a link made anew over another one
(crypt, chunk) carries no key, so transformed bytes are never relayed unchanged. The
client's side says when splicing is safe (``Client.descriptor``): plain HTTP, a
Content-Length answer whose head is on the wire and nothing else waiting to be sent.

It all runs in the event loop, no thread: both sockets and the pipe are non-blocking,
and a splice that finds nothing to move waits for its socket's readiness, on a
duplicate of its descriptor so that the transports' own registrations stay as they are.
A piece (``Sink.relay``) moves at most a pipe's worth, so other requests are served
between pieces, and waits only on the back end, only until its first bytes: the
storage's idle limit and the driver's own read timeout see a stall exactly as on the
ordinary path. Waiting on the client is the response's (``Sink.flush``, between pieces),
as the ordinary path's sending is. No manifold imports: every layer may use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fcntl
import os
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import Protocol

# The ASGI scope's extension holding the response's ``Client`` (plain HTTP only).
EXTENSION = "manifold.client_socket"
# The key of an empty body message that reports bytes spliced (for byte counters).
SPLICED = "manifold.spliced"
# The pipe between the two sockets (the kernel's default is 64 KiB), and the most one
# piece moves before the loop serves others.
PIPE_BYTES = 1 << 20
_FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK if hasattr(os, "splice") else 0


class Client(Protocol):
    """The client's connection, as the HTTP server lets a response splice into it."""

    def descriptor(self) -> int | None:
        """A duplicate of the socket's descriptor (the caller closes it) when splicing
        is safe now; None when it is not (yet). ``ClientGone`` once the connection is
        closed or closing: nothing may be written to it any more."""

    def sent(self, count: int) -> None:
        """``count`` bytes of the body went out beside the server's own writes."""

    def broken(self) -> None:
        """The body cannot be completed: drop the connection."""


class ClientGone(Exception):
    """The client's socket refused the bytes: it went away."""


class SourceFailed(Exception):
    """The back end's socket failed mid-way."""


class SourceStalled(SourceFailed):
    """The back end sent nothing for the reader's longest wait."""


@dataclass(frozen=True, slots=True)
class Step:
    count: int  # bytes of the range this piece took from the back end
    ended: bool  # the back end's socket was at its end: the piece took nothing
    # The bytes themselves when the client's socket could not take a splice just then
    # (its head or other bytes still going out): the reader yields them.
    data: bytes = b""


def usable() -> bool:
    return hasattr(os, "splice")


class _Totals:
    moved = 0


def spliced_bytes() -> int:
    """Bytes this process has relayed by splicing since it started (diagnostics)."""
    return _Totals.moved


class Sink:
    """One response's end of the relay: a pipe, the bytes in it, the bytes moved."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._pipe: tuple[int, int] | None = None
        self._room = PIPE_BYTES  # the pipe's size, once made
        self._held = 0  # bytes in the pipe: read from the back end, not yet sent
        self._unreported = 0
        self._waits = 0  # times the relay waited for a socket

    def take_moved(self) -> int:
        """Bytes relayed since the last call (for whoever counts a response's bytes)."""
        moved, self._unreported = self._unreported, 0
        return moved

    async def relay(self, source: int, count: int | None, stall: float | None = None) -> Step:
        """One piece from the non-blocking socket ``source``: at most a pipe's worth,
        ``count`` at most (None: no bound). Waits for the back end's first bytes,
        ``stall`` seconds at most (``SourceStalled``; None: no limit), never for the
        client: bytes it cannot take yet stay in the pipe for ``flush``. Raises
        ``ClientGone`` or ``SourceFailed``."""
        waits = self._waits
        await self.flush()
        budget = min(self._made(), PIPE_BYTES if count is None else count)
        taken = await self._fill(source, budget, stall)
        if not taken:
            return Step(0, True)
        # Asked only now, after the last wait: what the server did meanwhile (an answer
        # of its own to a bad request pipelined behind this one, a close) counts.
        target = self._target()
        if target is None:
            step = Step(taken, False, self._emptied())
        else:
            try:
                taken += self._spliced(source, target, budget - taken)
            finally:
                os.close(target)
            step = Step(taken, False)
        if self._waits == waits:
            await asyncio.sleep(0)  # the loop's other work gets a turn between pieces
        return step

    async def flush(self) -> None:
        """Wait until the pipe's bytes are all in the client's socket: the response
        calls this between pieces, as it waits for its own sends."""
        while self._held:
            target = self._target()  # again after each wait (see ``relay``)
            if target is None:  # bytes of its own went out meanwhile: the order is lost
                self._broken()
                raise ClientGone("the connection changed under the relay")
            try:
                if self._drain(target):
                    return
                await self._waited(_ready(target, writing=True))
            finally:
                os.close(target)

    def close(self) -> None:
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            for end in pipe:
                os.close(end)

    def _target(self) -> int | None:
        try:
            return self._client.descriptor()
        except ClientGone:
            self._broken()
            raise

    def _emptied(self) -> bytes:
        """The pipe's bytes, read: the ordinary way for a piece the client's socket
        cannot take spliced just now."""
        data = b""
        while self._held:
            part = os.read(self._made_pipe()[0], self._held)
            self._held -= len(part)
            data += part
        return data

    def _spliced(self, source: int, target: int, room: int) -> int:
        """Drain the pipe into ``target`` and fill it again, without waiting, until
        ``room`` more bytes are taken, the back end has none ready or the client's
        socket is full; the bytes taken."""
        taken = 0
        while self._drain(target) and taken < room:
            more = self._take(source, room - taken)
            if not more:  # nothing ready (or the end, which the next piece finds)
                break
            taken += more
        return taken

    async def _fill(self, source: int, budget: int, stall: float | None) -> int:
        """Bytes put in the pipe from ``source``, waiting for the first ones; 0 at its end."""
        while True:
            got = self._take(source, budget)
            if got is not None:
                return got
            try:
                await self._waited(_ready(source, writing=False, seconds=stall))
            except TimeoutError:
                raise SourceStalled(f"no byte for {stall:g}s") from None

    def _take(self, source: int, budget: int) -> int | None:
        """A splice from ``source`` into the pipe: bytes moved, 0 at the end, None when
        it has nothing ready."""
        try:
            got = os.splice(source, self._made_pipe()[1], budget, flags=_FLAGS)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise SourceFailed(str(exc)) from exc
        self._held += got
        return got

    def _drain(self, target: int) -> bool:
        """Splice the pipe's bytes into ``target`` while it takes them; whether the pipe
        is empty now."""
        out = self._made_pipe()[0]
        while self._held:
            try:
                sent = os.splice(out, target, self._held, flags=_FLAGS)
            except BlockingIOError:
                return False
            except OSError as exc:
                self._broken()
                raise ClientGone(str(exc)) from exc
            self._held -= sent
            self._counted(sent)
        return True

    def _counted(self, sent: int) -> None:
        self._client.sent(sent)
        self._unreported += sent
        _Totals.moved += sent

    async def _waited(self, wait: Awaitable[None]) -> None:
        """``wait``; cancelled with bytes in the pipe, the body cannot be completed."""
        self._waits += 1
        try:
            await wait
        except asyncio.CancelledError:
            if self._held:
                self._broken()
            raise

    def _broken(self) -> None:
        self._client.broken()

    def _made(self) -> int:
        self._made_pipe()
        return self._room

    def _made_pipe(self) -> tuple[int, int]:
        if self._pipe is None:
            self._pipe = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            with contextlib.suppress(OSError):
                fcntl.fcntl(self._pipe[1], fcntl.F_SETPIPE_SZ, PIPE_BYTES)
            # What the kernel granted: a splice into a full pipe would wait for ever
            # on a back end that is ready.
            self._room = fcntl.fcntl(self._pipe[1], fcntl.F_GETPIPE_SZ)
        return self._pipe


async def _ready(fd: int, *, writing: bool, seconds: float | None = None) -> None:
    """Until ``fd`` is readable (writable), ``seconds`` at most (``TimeoutError``).
    The loop watches a duplicate: the descriptor may be a transport's, whose own
    registration must stay; the duplicate is unwatched before it is closed."""
    loop = asyncio.get_running_loop()
    watched = os.dup(fd)
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if writing:
        loop.add_writer(watched, wake)
    else:
        loop.add_reader(watched, wake)
    try:
        async with asyncio.timeout(seconds):
            await ready
    finally:
        if writing:
            loop.remove_writer(watched)
        else:
            loop.remove_reader(watched)
        os.close(watched)


# --- the offer ----------------------------------------------------------------------


@dataclass(slots=True)
class Offer:
    key: object
    offset: int
    length: int | None
    sink: Sink
    taken: bool = False


_OFFER: contextvars.ContextVar[Offer | None] = contextvars.ContextVar("splice_offer", default=None)


@contextlib.contextmanager
def offering(offer: Offer | None) -> Iterator[None]:
    """``offer`` is the one open to readers while this block runs (None: none is)."""
    token = _OFFER.set(offer)
    try:
        yield
    finally:
        _OFFER.reset(token)


def claim(key: object, offset: int, length: int | None) -> Sink | None:
    """The sink offered for exactly this link and range, once; else None."""
    offer = _OFFER.get()
    if offer is None or offer.taken or offer.key is not key:
        return None
    if (offer.offset, offer.length) != (offset, length):
        return None
    offer.taken = True
    return offer.sink
