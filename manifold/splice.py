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

The splicing runs in a worker thread, a bounded piece at a time (``PIECE_SECONDS``):
the thread waits in ``poll`` for either socket, the event loop stays free, and the
reader yields between pieces so the storage's idle check and a cancelled download
act as they do on the ordinary path. No manifold imports: every layer may use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fcntl
import functools
import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

# The ASGI scope's extension holding the response's ``Client`` (plain HTTP only).
EXTENSION = "manifold.client_socket"
# The key of an empty body message that reports bytes spliced (for byte counters).
SPLICED = "manifold.spliced"
# Longest a piece waits before handing control back to the reader.
PIECE_SECONDS = 0.5
# The most read at once when a piece cannot be spliced.
READ_BYTES = 1 << 20
# The pipe between the two sockets (the kernel's default is 64 KiB).
PIPE_BYTES = 1 << 20
_FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK if hasattr(os, "splice") else 0
# Threads splicing at once; a piece lasts at most PIECE_SECONDS, so more downloads
# than threads take turns rather than wait on one another's clients.
_POOL = ThreadPoolExecutor(16, thread_name_prefix="manifold-splice")


class Client(Protocol):
    """The client's connection, as the HTTP server lets a response splice into it."""

    def descriptor(self) -> int | None:
        """A duplicate of the socket's descriptor (the caller closes it) when splicing
        is safe now; None when it is not (yet)."""

    def sent(self, count: int) -> None:
        """``count`` bytes of the body went out beside the server's own writes."""

    def broken(self) -> None:
        """The body cannot be completed: drop the connection."""


class ClientGone(Exception):
    """The client's socket refused the bytes: it went away."""


class SourceFailed(Exception):
    """The back end's socket failed mid-way."""


@dataclass(frozen=True, slots=True)
class Step:
    moved: int  # bytes that reached the client in this piece
    ended: bool  # the back end's socket reached its end (all it sent is moved)
    # Bytes read instead, for the reader to yield: the client's socket could not take
    # a splice just then (its head or other bytes still going out, a body reframed).
    data: bytes = b""

    @property
    def count(self) -> int:
        """Bytes of the range this piece took care of, either way."""
        return self.moved + len(self.data)


def usable() -> bool:
    return hasattr(os, "splice")


class _Totals:
    moved = 0


def spliced_bytes() -> int:
    """Bytes this process has relayed by splicing since it started (diagnostics)."""
    return _Totals.moved


class Sink:
    """One response's end of the relay: a pipe, and the bytes moved so far."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._pipe: tuple[int, int] | None = None
        self._held = 0  # bytes in the pipe, read from the back end, not yet sent
        self._unreported = 0
        self._source_seen = time.monotonic()

    def take_moved(self) -> int:
        """Bytes relayed since the last call (for whoever counts a response's bytes)."""
        moved, self._unreported = self._unreported, 0
        return moved

    def source_idle(self) -> float:
        """Seconds the relay has waited on the back end without a byte."""
        return time.monotonic() - self._source_seen

    async def relay(self, source: int, count: int | None) -> Step:
        """Move up to ``count`` bytes (None: to the end) from ``source``, for at most
        about ``PIECE_SECONDS``. Raises ``ClientGone`` or ``SourceFailed``."""
        target = self._client.descriptor()
        if target is None:
            return await self._read(source, count)
        try:
            step = await _in_thread(self._piece, source, target, count)
        except BaseException:
            self._client.broken()  # cancelled: what the pipe held is lost
            raise
        finally:
            os.close(target)
        return self._account(*step)

    def _account(self, step: Step, error: Exception | None) -> Step:
        self._client.sent(step.moved)
        self._unreported += step.moved
        _Totals.moved += step.moved
        if isinstance(error, ClientGone):
            self._client.broken()
        if error is not None:
            raise error
        return step

    async def _read(self, source: int, count: int | None) -> Step:
        """The ordinary way for one piece: bytes read (the pipe's first), to be yielded."""
        try:
            data = await _in_thread(self._take, source, count)
        except OSError as exc:
            raise SourceFailed(str(exc)) from exc
        if data is None:
            return Step(0, False)
        self._source_seen = time.monotonic()
        return Step(0, not data, data)

    def _take(self, source: int, count: int | None, stop: threading.Event) -> bytes | None:
        """Up to ``READ_BYTES`` (``count`` at most), waiting ``PIECE_SECONDS`` at most
        for them; None when none came."""
        wanted = READ_BYTES if count is None else min(READ_BYTES, count)
        if self._held:
            data = os.read(self.pipe()[0], min(wanted, self._held))
            self._held -= len(data)
            return data
        poller = select.poll()
        poller.register(source, select.POLLIN)
        deadline = time.monotonic() + PIECE_SECONDS
        while not poller.poll(100):
            if stop.is_set() or time.monotonic() > deadline:
                return None
        try:
            return os.read(source, wanted)
        except BlockingIOError:
            return None

    def close(self) -> None:
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            for end in pipe:
                os.close(end)

    # --- in the worker thread ---------------------------------------------------------

    def _piece(
        self, source: int, target: int, count: int | None, stop: threading.Event
    ) -> tuple[Step, Exception | None]:
        piece = _Piece(self, source, target, count)
        try:
            return piece.run(stop), None
        except (ClientGone, SourceFailed) as exc:
            return Step(piece.moved, False), exc

    def pipe(self) -> tuple[int, int]:
        if self._pipe is None:
            self._pipe = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            with contextlib.suppress(OSError):
                fcntl.fcntl(self._pipe[1], fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        return self._pipe


class _Piece:
    """One bounded run of the relay, in a worker thread."""

    def __init__(self, sink: Sink, source: int, target: int, count: int | None) -> None:
        self.sink = sink
        self.source = source
        self.target = target
        self.count = count
        self.moved = 0
        self.ended = False
        self.out, self.into = sink.pipe()

    def run(self, stop: threading.Event) -> Step:
        deadline = time.monotonic() + PIECE_SECONDS
        poller = select.poll()
        while not self._done() and not stop.is_set():
            progress = self._fill() | self._drain()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not progress and not self._done():
                self._wait(poller, left)
        return Step(self.moved, self.ended and self.sink._held == 0)

    def _done(self) -> bool:
        if self.ended:
            return self.sink._held == 0
        return self.count is not None and self.moved >= self.count

    def _wanted(self) -> int:
        room = PIPE_BYTES - self.sink._held
        if self.count is not None:
            room = min(room, self.count - self.moved - self.sink._held)
        return 0 if self.ended else room

    def _fill(self) -> bool:
        wanted = self._wanted()
        if wanted <= 0:
            return False
        try:
            got = os.splice(self.source, self.into, wanted, flags=_FLAGS)
        except BlockingIOError:
            return False
        except OSError as exc:
            raise SourceFailed(str(exc)) from exc
        self.ended = got == 0
        self.sink._held += got
        self.sink._source_seen = time.monotonic()
        return True

    def _drain(self) -> bool:
        if not self.sink._held:
            return False
        try:
            sent = os.splice(self.out, self.target, self.sink._held, flags=_FLAGS)
        except BlockingIOError:
            return False
        except OSError as exc:
            raise ClientGone(str(exc)) from exc
        self.sink._held -= sent
        self.moved += sent
        return sent > 0

    def _wait(self, poller: select.poll, seconds: float) -> None:
        """Until the socket the relay waits on is ready, ``seconds`` at most (a tenth,
        so that a stop is seen soon). Bytes in the pipe go out before more are read
        (the back end's socket buffers meanwhile): waiting on both would spin on a
        readable source while the pipe is full."""
        for fd in (self.source, self.target):
            with contextlib.suppress(KeyError):
                poller.unregister(fd)
        if self.sink._held:
            poller.register(self.target, select.POLLOUT)
            self.sink._source_seen = time.monotonic()  # waiting on the client, not the source
        else:
            poller.register(self.source, select.POLLIN)
        poller.poll(min(seconds, 0.1) * 1000)


async def _in_thread(call: Callable[..., T], *args: Any) -> T:
    """``call(*args, stop)`` in a worker thread. Cancelled, it is told to stop and
    waited for: it must be done with the descriptors before their owner closes them
    (a number closed and reused meanwhile would be another connection's)."""
    stop = threading.Event()
    work = asyncio.get_running_loop().run_in_executor(_POOL, functools.partial(call, *args, stop))
    try:
        return await asyncio.shield(work)
    except BaseException:
        stop.set()
        await asyncio.wait([work])
        raise


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
