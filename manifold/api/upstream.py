"""A URL link streamed through this server: AList's transparent proxy for ``/p``.

The upstream request carries the client's method and headers (less those the
caller filtered out) and the body comes back chunk by chunk as it arrives, never
held whole. Upstream status and headers are passed on, less hop-by-hop headers
and ``Set-Cookie`` (AList drops it too). Failures before the first byte raise
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
_DROPPED = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"set-cookie",
    }
)


async def open_upstream(
    client: LinkClient,
    method: str,
    url: str,
    headers: Sequence[tuple[str, str]],
    idle_timeout: float = 0.0,
) -> Upstream:
    """Send the request through the server's pooled ``client`` and wait for the
    upstream's status line and headers; ``idle_timeout`` (the link's, when its storage
    sets one) bounds each wait for a byte, of the headers and of the body. Redirects
    are followed only where the link pool allows (``services.fs.redirects``): the
    storage's own host, or with the admin's consent a public one; anywhere else
    raises ``RedirectRefused``."""
    limits = TIMEOUT if idle_timeout <= 0 else httpx.Timeout(idle_timeout, connect=30.0)
    try:
        request = client.build_request(method, url, headers=list(headers), timeout=limits)
        response = await client.send(request, stream=True, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise TemporaryFailure(f"failed to proxy: {type(exc).__name__}: {exc}") from exc
    if response.status_code >= 400:
        await response.aclose()
        raise UpstreamStatus(response.status_code)
    return Upstream(response)


class Upstream(Response):
    """The response relaying one opened upstream response; it closes it when done."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__()
        self._response = response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = self._response
        try:
            headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _DROPPED]
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
