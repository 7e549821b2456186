"""Where a link fetched by this server may be redirected: the rule every proxied fetch
follows (``/p``, ``/d`` of a storage that must proxy, copies and reads of URL links).

A storage's link points at its own host (WebDav's address, S3's endpoint, the AList
V3 remote's ``raw_url``). Its answer may redirect, and a redirect is followed only to
that same origin (scheme, host and port): a back end answering ``302 Location:
http://127.0.0.1:<port>/secret`` would otherwise make this server fetch an internal
service and hand its body to the user. With the admin's ``link_redirect_public``
setting a redirect may also lead to another host, but only one whose every address is
public, as the offline downloader judges addresses (``policy.addresses``). Other
schemes (``file://``) are never followed.

``LinkClient`` is the HTTP pool that fetches links; its ``send`` (which ``stream`` and
``request`` go through) follows redirects itself, hop by hop, under this rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from manifold.drivers.transport import AiohttpTransport
from manifold.errors import ServerError
from manifold.policy.addresses import public_host

SETTING = "link_redirect_public"
MAX_REDIRECTS = 10
FETCH_TIMEOUT = httpx.Timeout(30.0, read=300.0)


class RedirectRefused(ServerError):
    """A link's answer redirected where this server does not follow."""

    def __init__(self, target: httpx.URL) -> None:
        super().__init__(
            f"the storage redirected the download to another host ({target.host}), which "
            f"this server does not follow (setting {SETTING}: public hosts only)"
        )


def _never() -> bool:
    return False


def origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port (the default one filled in) of ``url``."""
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host.lower(), port


async def allowed(start: httpx.URL, target: httpx.URL, elsewhere: bool) -> bool:
    """Whether a fetch that began at ``start`` may be redirected to ``target``."""
    if target.scheme not in ("http", "https"):
        return False
    if origin(target) == origin(start):
        return True
    return elsewhere and await public_host(target.host)


class LinkClient(httpx.AsyncClient):
    """The pool that fetches links, following redirects only as this module allows;
    ``elsewhere`` says, at each redirect, whether the admin allows public other hosts.
    ``unverified`` is its sibling for the links that skip certificate checks."""

    def __init__(self, *, elsewhere: Callable[[], bool] = _never, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.elsewhere = elsewhere
        self._unverified: LinkClient | None = None

    def unverified(self) -> LinkClient:
        """The pool, under the same rule, for links whose storage skips certificate
        checks (``Link.verify`` False); made on first use, closed with this one."""
        if self._unverified is None:
            self._unverified = link_pool(verify=False, elsewhere=self.elsewhere)
        return self._unverified

    async def aclose(self) -> None:
        sibling, self._unverified = self._unverified, None
        if sibling is not None:
            await sibling.aclose()
        await super().aclose()

    async def send(
        self,
        request: httpx.Request,
        *,
        stream: bool = False,
        auth: Any = httpx.USE_CLIENT_DEFAULT,
        follow_redirects: Any = httpx.USE_CLIENT_DEFAULT,
    ) -> httpx.Response:
        """httpx's ``send``, each redirect judged by ``allowed`` before it is followed."""
        follow = follow_redirects
        if follow is httpx.USE_CLIENT_DEFAULT:
            follow = self.follow_redirects
        start = request.url
        response = await super().send(request, stream=stream, auth=auth, follow_redirects=False)
        for _ in range(MAX_REDIRECTS):
            if not (follow and response.has_redirect_location):
                return response
            request = self._next(request, response)
            await response.aclose()
            if not await allowed(start, request.url, self.elsewhere()):
                raise RedirectRefused(request.url)
            response = await super().send(request, stream=stream, auth=auth, follow_redirects=False)
        if follow and response.has_redirect_location:
            await response.aclose()
            raise httpx.TooManyRedirects("too many redirects", request=request)
        return response

    def _next(self, request: httpx.Request, response: httpx.Response) -> httpx.Request:
        """The request a redirect asks for, as httpx builds it, but without a body for
        a fetch (httpx hands the old, empty stream on, which goes out chunked)."""
        built = self._build_redirect_request(request, response)
        if built.method not in ("GET", "HEAD"):
            return built
        return httpx.Request(
            built.method, built.url, headers=built.headers, extensions=built.extensions
        )


def link_pool(*, verify: bool = True, elsewhere: Callable[[], bool] = _never) -> LinkClient:
    """A pool fetching links (``verify`` False: without certificate checks)."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=40)
    return LinkClient(
        elsewhere=elsewhere,
        verify=verify,
        follow_redirects=True,
        timeout=FETCH_TIMEOUT,
        limits=limits,
        transport=AiohttpTransport(verify=verify, limits=limits),
    )
