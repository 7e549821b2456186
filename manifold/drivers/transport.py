"""httpx's client API over aiohttp's connections: the transport of every shared HTTP pool.

httpx's own transport parses a response in pure Python, 64 KiB at a time, and costs
about a CPU second per gigabyte relayed; aiohttp parses in C and hands over whatever
has arrived, in pieces of up to ``READ_BUFFER`` bytes, for a quarter of that. Callers
keep httpx's API (auth flows, redirects, cookies and decoding stay httpx's, above the
transport) and its exceptions: aiohttp's are translated here, at the edge, into the
httpx classes the drivers' error tables already match::

    ConnectionTimeoutError                    -> ConnectTimeout
    ServerTimeoutError (a read)               -> ReadTimeout
    ClientConnectorError (TLS errors too)     -> ConnectError
    ServerDisconnectedError, ClientPayloadError -> RemoteProtocolError
    NonHttpUrlClientError, InvalidURL         -> UnsupportedProtocol
    ClientOSError                             -> ReadError
    any other ClientError                     -> NetworkError

A session belongs to one event loop; it is made on the first request in a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import weakref
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx
from yarl import URL

# What aiohttp keeps read ahead of the consumer on each connection (it pauses reading
# at twice this): the largest piece a body is handed over in.
READ_BUFFER = 1 << 20
# Headers aiohttp would add on its own; httpx has already set the ones it wants.
_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
# Framing is aiohttp's to write: it chunks a body of unknown length itself.
_FRAMING = frozenset({"transfer-encoding"})


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport sending each request through one pooled aiohttp session."""

    def __init__(self, *, verify: bool = True, limits: httpx.Limits | None = None) -> None:
        self._ssl: ssl.SSLContext | bool = httpx.create_ssl_context(verify=verify)
        if not verify:
            self._ssl = False
        limits = limits or httpx.Limits()
        self._limit = limits.max_connections or 0
        self._keepalive = limits.keepalive_expiry or 5.0
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _current(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = self._connector()
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                read_bufsize=READ_BUFFER,
                cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=_AUTO_HEADERS,
                trust_env=False,
            )
            self._loop = loop
            # A client dropped without being closed (a driver whose init failed) takes
            # its connections with it, as httpx's own pool does.
            weakref.finalize(self, _abandon, self._session, loop)
        return self._session

    def _connector(self) -> aiohttp.BaseConnector:
        return aiohttp.TCPConnector(
            ssl=self._ssl, limit=self._limit, keepalive_timeout=self._keepalive
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._current()
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in request.headers.raw
            if k.lower().decode("latin-1") not in _FRAMING
        ]
        body = _Outgoing(request)
        with _translated(request, body):
            response = await session.request(
                request.method,
                _target(request.url),
                headers=headers,
                data=body.data(),
                allow_redirects=False,
                timeout=_timeout(request),
            )
        return httpx.Response(
            response.status,
            headers=list(response.raw_headers),
            stream=_Body(response, request),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": _reason(response)},
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed and self._loop is _running_loop():
            await session.close()


class _Body(httpx.AsyncByteStream):
    """A response's body as aiohttp hands it over; closing it early drops the connection
    (one half read cannot carry the next request)."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _translated(self._request):
            async for data in self._response.content.iter_any():
                yield data

    async def aclose(self) -> None:
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()


def _reason(response: aiohttp.ClientResponse) -> bytes:
    return (response.reason or "").encode("latin-1", "replace")


def _target(url: httpx.URL) -> URL:
    """The URL as httpx sends it: escaped as given (a signed URL's signature covers
    its exact text), and without credentials (httpx made them an auth header)."""
    if url.userinfo:
        url = url.copy_with(username=None, password=None)
    return URL(str(url), encoded=True)


class _Outgoing:
    """A request's body as aiohttp sends it. An error of the caller's own stream is
    kept, to be raised as it was rather than as aiohttp's "failed to send"."""

    def __init__(self, request: httpx.Request) -> None:
        self._request = request
        self.failure: BaseException | None = None

    def data(self) -> bytes | AsyncIterator[bytes] | None:
        try:
            return self._request.content or None
        except httpx.RequestNotRead:
            return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        stream = self._request.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        try:
            async for data in stream:
                yield data
        except Exception as exc:
            self.failure = exc
            raise


def _timeout(request: httpx.Request) -> aiohttp.ClientTimeout:
    limits = request.extensions.get("timeout", {})
    connect, pool = limits.get("connect"), limits.get("pool")
    waited = None if connect is None or pool is None else connect + pool
    return aiohttp.ClientTimeout(
        total=None, connect=waited, sock_connect=connect, sock_read=limits.get("read")
    )


_CLOSING: set[asyncio.Task[None]] = set()


def _abandon(session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop) -> None:
    """Close a pool nobody closed, on its own loop while that runs (else forget it)."""
    if session.closed:
        return
    if loop.is_running() and _running_loop() is loop:
        closing = loop.create_task(session.close())
        _CLOSING.add(closing)
        closing.add_done_callback(_CLOSING.discard)
    else:
        session.detach()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    with contextlib.suppress(RuntimeError):
        return asyncio.get_running_loop()
    return None


# Most specific first: the first class an exception is an instance of decides.
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.NonHttpUrlClientError, httpx.UnsupportedProtocol),
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.ClientOSError, httpx.ReadError),
    (aiohttp.ClientError, httpx.NetworkError),
)


@contextlib.contextmanager
def _translated(request: httpx.Request, body: _Outgoing | None = None) -> Iterator[None]:
    try:
        yield
    except aiohttp.ClientError as exc:
        if body is not None and body.failure is not None:
            raise body.failure from None
        mapped = next(new for old, new in _ERRORS if isinstance(exc, old))
        raise mapped(str(exc) or type(exc).__name__, request=request) from exc
