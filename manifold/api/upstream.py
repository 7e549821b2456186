"""A URL link streamed through this server: AList's transparent proxy for ``/p``.

The upstream request carries the client's method and headers (less those the
caller filtered out) and the body comes back chunk by chunk as it arrives, never
held whole. The upstream's status is passed on, and of its headers only what the
client needs to read and revalidate the body (``_KEPT``): the answer is this
server's, with its own date and the headers the caller adds (AList's
``attachment`` disposition), never the back end's cookies, CORS, caching or server
name, nor a second ``date``. Failures before the first byte raise
``manifold.errors`` classes so the route can answer an error; after it the
connection is cut, so the client sees a short body rather than a wrong one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import httpx
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from manifold.errors import TemporaryFailure, UpstreamStatus
from manifold.services.fs.redirects import LinkClient

TIMEOUT = httpx.Timeout(60.0, connect=30.0)
# What an answer keeps of the upstream's headers: the body's length, range, type and
# encoding (the body is relayed as it came), and what revalidates it.
_KEPT = frozenset(
    {
        b"accept-ranges",
        b"content-encoding",
        b"content-length",
        b"content-range",
        b"content-type",
        b"etag",
        b"last-modified",
    }
)


async def open_upstream(
    client: LinkClient,
    method: str,
    url: str,
    headers: Sequence[tuple[str, str]],
    idle_timeout: float = 0.0,
    own: Sequence[tuple[str, str]] = (),
) -> Upstream:
    """Send the request through the server's pooled ``client`` and wait for the
    upstream's status line and headers; ``idle_timeout`` (the link's, when its storage
    sets one) bounds each wait for a byte, of the headers and of the body. Redirects
    are followed only where the link pool allows (``services.fs.redirects``): the
    storage's own host, or with the admin's consent a public one; anywhere else
    raises ``RedirectRefused``. ``own`` are the headers the answer adds to those it keeps."""
    limits = TIMEOUT if idle_timeout <= 0 else httpx.Timeout(idle_timeout, connect=30.0)
    try:
        request = client.build_request(method, url, headers=list(headers), timeout=limits)
        response = await client.send(request, stream=True, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise TemporaryFailure(f"failed to proxy: {type(exc).__name__}: {exc}") from exc
    if response.status_code >= 400:
        await response.aclose()
        raise UpstreamStatus(response.status_code)
    return Upstream(response, own)


class Upstream(Response):
    """The response relaying one opened upstream response; it closes it when done."""

    def __init__(self, response: httpx.Response, own: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__()
        self._response = response
        self._own = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in own]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = self._response
        try:
            kept = [(k, v) for k, v in response.headers.raw if k.lower() in _KEPT]
            headers = kept + self._own
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": headers}
            )
            if scope["method"] == "HEAD" or await self._relay(receive, send):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    async def _relay(self, receive: Receive, send: Send) -> bool:
        """Pass the body on; False when the client left first (nothing more is sent).

        An upstream failure midway propagates, so the server cuts the connection.
        """
        gone = asyncio.ensure_future(_disconnect(receive))
        try:
            async for chunk in self._response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if gone.done():
                    return False
            return True
        finally:
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
