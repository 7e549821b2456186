"""How the HTTP server runs: uvicorn's options, and a request head of bounded size.

``uvicorn_config`` is the one place the options live, so ``manifold server`` and the
tests that run a real server start the same thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from manifold import splice
from manifold.api.asgi import Headers
from manifold.config import Config
from manifold.http_writes import ANSWERS, HeadHeld

MAX_HEADERS = 100
MAX_HEADER_LINE = 16 << 10  # a File-Path of 4 KiB of UTF-8, percent-escaped, fits
MAX_HEAD = 64 << 10  # request line and every header together
# A request whose head or body sends nothing for this long is dropped (nginx's
# client_header_timeout and client_body_timeout). Time spent waiting for the
# application to take the body in does not count.
REQUEST_IDLE_SECONDS = 60.0
# New container objects between two collections of the youngest generation
# (Python's default is 700).
YOUNG_COLLECTION_EVERY = 10_000


def tune_collector() -> None:
    """Set the garbage collector for a long-running server, before it starts.

    What the process made while starting (modules, the app, its routes) lives until
    it ends: ``gc.freeze`` takes it out of every later collection, which otherwise
    walks all of it on each full collection. A listing of 100,000 entries makes some
    200,000 objects that all survive; with the default threshold that is hundreds of
    young collections and a full one or two, about a fifth of a cold scan's time.
    Cycles still get collected, after 10,000 new objects rather than 700 (at 50,000
    the middle generation grows big enough that collecting it costs 0.1 s).
    """
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, oldest)


def uvicorn_config(app: Any, config: Config, **overrides: Any) -> uvicorn.Config:
    """The server's options; ``overrides`` are for tests (a socket, no lifespan).

    uvicorn's own proxy-header handling is off: it would rewrite the client address
    from ``X-Forwarded-For`` for any loopback peer, before ``trusted_proxies`` is asked.
    """
    options: dict[str, Any] = {
        "host": config.address,
        "port": config.port,
        "loop": "uvloop",
        "http": BoundedHttpTools,
        "log_level": config.log_level,
        "access_log": False,
        "server_header": False,
        "proxy_headers": False,
        # On SIGTERM: stop accepting, give requests under way (downloads, uploads) this
        # long to end, then cancel what is left and run the lifespan's shutdown.
        "timeout_graceful_shutdown": max(config.shutdown_seconds, 0),
    }
    if config.log_format == "json":
        options["log_config"] = None  # uvicorn's records go to the root's JSON handler
    return uvicorn.Config(app, **(options | overrides))


class HeadTooLarge(Exception):
    """The request head passed a limit; raised inside the parser to stop it."""


class BoundedHttpTools(HttpToolsProtocol):
    """httptools keeps a request head of any size; this one answers 431 past the limits.

    The bytes of a head are counted as they arrive, before the parser has seen a whole
    line, so a header that never ends is stopped as surely as a flood of short ones.
    """

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        # The application's answers that need no ASGI call (``ManifoldApp.quick``).
        self._quick: Callable[[str, Headers], bytes | None] | None = getattr(
            self.app, "quick", None
        )
        self._refused = False
        self._start_head()
        # Receiving a request from the first moment: a client that connects and sends
        # nothing holds a connection as surely as one that stops half-way.
        self._receiving = True
        self._last_data = self.loop.time()
        self._watchdog: asyncio.TimerHandle | None = None
        self._watch(REQUEST_IDLE_SECONDS)
        self._answered_at = self._last_data  # when the last response was complete
        # Plain HTTP: a response may splice its body into the socket (``ClientSocket``).
        self._plain = splice.usable() and not any(
            transport.get_extra_info(name) is not None for name in ("sslcontext", "ssl_object")
        )

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._watchdog, self.timeout_keep_alive_task):
            if timer is not None:
                timer.cancel()
        self._watchdog = self.timeout_keep_alive_task = None
        super().connection_lost(exc)

    def _watch(self, delay: float) -> None:
        self._watchdog = self.loop.call_later(delay, self._check_idle)

    def _check_idle(self) -> None:
        """Close a connection whose request has sent nothing for ``REQUEST_IDLE_SECONDS``."""
        self._watchdog = None
        if self.transport.is_closing():
            return
        now = self.loop.time()
        if not self._receiving or self.flow.read_paused:
            # Between requests (uvicorn's keep-alive timeout applies), or the
            # application has not taken in what came: the client is not the one idle.
            self._last_data = now
        elif now - self._last_data >= REQUEST_IDLE_SECONDS:
            self.transport.close()
            return
        self._watch(max(self._last_data + REQUEST_IDLE_SECONDS - now, 0.05))

    # uvicorn's keep-alive timeout, kept with one timer per idle spell instead of one
    # per response: uvicorn cancels its timer on every request and arms a new one after
    # every response, which cost a tenth of a quick answer. Here the timer, once armed,
    # stays; when it fires it looks whether the connection has been idle all along.

    def _unset_keepalive_if_required(self) -> None:
        """uvicorn calls this on every piece of data: the timer stays (see above)."""

    def on_response_complete(self) -> None:
        """uvicorn's, but the keep-alive timer is armed only if none is."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._answered_at = self.loop.time()
        self.flow.resume_reading()
        if self.pipeline:  # requests that came while this one was answered
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self.timeout_keep_alive_task is None:
            self._keep_alive_in(self.timeout_keep_alive)

    def _keep_alive_in(self, delay: float) -> None:
        self.timeout_keep_alive_task = self.loop.call_later(delay, self._keep_alive_due)

    def _keep_alive_due(self) -> None:
        """Close the connection if it has been idle ``timeout_keep_alive`` seconds since
        its last response; a request under way arms the timer again when it is answered."""
        self.timeout_keep_alive_task = None
        cycle = self.cycle
        if self._receiving or self.pipeline or (cycle is not None and not cycle.response_complete):
            return
        left = self._answered_at + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self._keep_alive_in(left)
        else:
            self.timeout_keep_alive_handler()

    def _start_head(self) -> None:
        self._reading_head = True
        self._head_bytes = 0  # as received, counted before the parser sees a whole line
        self._head_size = 0  # as parsed: the URL and every header line
        self._head_lines = 0

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._last_data = self.loop.time()
        self._receiving = self._receiving or self._reading_head
        if self._reading_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._reading_head and self._head_bytes > MAX_HEAD and not self._refused:
            self._refuse()

    # The two callbacks below do uvicorn's work themselves (kept as its own: the URL
    # gathered, header names lower-cased, ``Expect: 100-continue`` noted) rather than
    # calling it: they run for every request, and the call cost more than that work.

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_lines += 1
        size = len(name) + len(value)
        self._head_size += size + 4  # ``_count``, here without the call
        if self._head_lines > MAX_HEADERS or size > MAX_HEADER_LINE or self._head_size > MAX_HEAD:
            self._stop()
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        self.headers.append((name, value))

    def _count(self, size: int) -> None:
        self._head_size += size
        if self._head_size > MAX_HEAD:
            self._stop()

    def _stop(self) -> None:
        self._refused = True
        raise HeadTooLarge()

    def on_message_begin(self) -> None:
        # uvicorn builds the request's scope here; it is built once the head is read,
        # and only for a request the quick path does not answer (``_scoped``).
        self.url = b""
        self.expect_100_continue = False
        self.headers = []

    def _scoped(self) -> None:
        """uvicorn's scope for the request whose head was just read."""
        url, headers, expect = self.url, self.headers, self.expect_100_continue
        super().on_message_begin()
        self.url, self.headers, self.expect_100_continue = url, headers, expect
        self.scope["headers"] = headers

    def on_headers_complete(self) -> None:
        self._reading_head = False
        if self._answered_quickly():
            return
        self._scoped()
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before and self.scope["method"] != "HEAD":
            self.cycle.transport = HeadHeld(self.transport, self.loop)
            if self._plain:
                extensions: dict[str, Any] = self.scope.setdefault("extensions", {})
                extensions[splice.EXTENSION] = ClientSocket(self.cycle, self.transport)

    def _answered_quickly(self) -> bool:
        """Answer a plain GET the application can answer at once (``quick``) here,
        without the task, request cycle and ASGI messages of every other request:
        for the smallest answers those cost more than the answer itself.

        Only between responses on a kept-alive HTTP/1.1 connection (the first
        request of a connection goes the usual way), with nothing pipelined or
        unsent, and for a path as sent (no escapes): the rest is uvicorn's.
        """
        cycle, parser = self.cycle, self.parser
        if self._quick is None or cycle is None or not cycle.response_complete:
            return False
        if self.pipeline or self.flow.write_paused or self.expect_100_continue:
            return False
        if parser.get_method() != b"GET" or parser.get_http_version() != "1.1":
            return False
        if parser.should_upgrade():
            return False
        raw_path = self.url.partition(b"?")[0]
        if not parser.should_keep_alive() or not _plain_path(raw_path):
            return False
        body = self._quick(self.root_path + raw_path.decode("ascii"), self.headers)
        if body is None:
            return False
        self.transport.write(ANSWERS.of(self.server_state.default_headers, body))
        self.on_response_complete()
        return True

    def on_message_complete(self) -> None:
        self._receiving = False
        if self.cycle is None or not self.cycle.response_complete:  # else nothing to do
            super().on_message_complete()
        # What follows on a kept-alive connection is the next request's head.
        self._start_head()

    def send_400_response(self, msg: str) -> None:
        # The parser reports a callback's exception as a malformed request.
        if self._refused:
            self._refuse()
        else:
            super().send_400_response(msg)

    def _refuse(self) -> None:
        self._refused = True
        body = b"Request Header Fields Too Large"
        head = b"content-type: text/plain\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        self.transport.write(STATUS_LINE[431] + head % len(body) + body)
        self.transport.close()


class ClientSocket:
    """One response's client connection as ``manifold.splice`` may write to it: only
    once the head is on the wire and nothing else waits to be sent, only for a body
    of a known length (no chunked framing to add), only while the client is there."""

    __slots__ = ("_cycle", "_transport")

    def __init__(self, cycle: Any, transport: asyncio.Transport) -> None:
        self._cycle = cycle
        self._transport = transport

    def descriptor(self) -> int | None:
        cycle, transport = self._cycle, self._transport
        # Closing: the client went, or the server answered something itself (a bad
        # request pipelined behind this one) and ends the connection after that answer.
        if cycle.disconnected or transport.is_closing():
            raise splice.ClientGone("the connection is closed")
        if not cycle.response_started or cycle.chunked_encoding:
            return None
        if isinstance(cycle.transport, HeadHeld):
            cycle.transport.flush()
        if transport.get_write_buffer_size():
            return None
        sock = transport.get_extra_info("socket")
        return None if sock is None else os.dup(sock.fileno())

    def sent(self, count: int) -> None:
        # uvicorn checks the body against Content-Length; these bytes count toward it.
        self._cycle.expected_content_length -= count

    def broken(self) -> None:
        self._cycle.disconnected = True  # gone: uvicorn sends nothing more, nor complains
        self._transport.close()


def _plain_path(raw: bytes) -> bool:
    """A request target that is an origin-form path needing no decoding."""
    return raw[:1] == b"/" and raw.isascii() and b"%" not in raw and b"#" not in raw


class Listener:
    """A second server in the running loop, on a port of its own (the S3 server's).

    The socket is bound here, so a taken port fails the start with ``OSError`` instead
    of uvicorn's exit; signals stay with the main server, which stops this one.
    ``chores`` runs beside it while it serves (the S3 server's sweep of idle uploads)
    and is cancelled when it stops.
    """

    def __init__(
        self,
        app: Any,
        config: Config,
        port: int,
        chores: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._app = app
        self._config = config
        self._socket = _bound(config.address, port)
        self._server = _Beside(
            uvicorn_config(app, config, port=port, lifespan="off", log_level="warning")
        )
        self._task: asyncio.Task[None] | None = None
        self._chores = chores
        self._chore: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        while not self._server.started and not self._task.done():  # noqa: ASYNC110 - uvicorn offers no event
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()
        if self._chores is not None:
            self._chore = asyncio.ensure_future(self._chores())

    async def stop(self) -> None:
        if self._chore is not None:
            self._chore.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._chore
        self._server.should_exit = True
        if self._task is not None:
            await self._task
        self._socket.close()


class _Beside(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bound_socket(address: str, port: int, shared_port: bool = False) -> socket.socket:
    """A socket bound to ``address:port`` that child processes may inherit; with
    ``shared_port``, one of several that each listen on the port, the kernel handing
    every new connection to one of them (``SO_REUSEPORT``)."""
    return _bound(address, port, shared_port)


def _bound(address: str, port: int, shared_port: bool = False) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((address, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
