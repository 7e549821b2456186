"""What the server shares with every driver it mounts, handed over before ``init``.

A driver never imports the services for a shared resource, and owns only its own
protocol's connections (an SFTP session, an FTP control connection). HTTP is shared:
every storage that speaks HTTP (WebDav, AList V3) draws on one connection pool, with a
second one for the storages whose admin turned TLS verification off. So is the most
entries one folder's listing may hold (the server's ``max_listing_entries``), which a
back end's listing is refused past rather than held in memory however big it grows.
And so is what a driver needs to write this server's own ``/d`` links (Strm): the
site's URL and the sign such a link carries.
So are helpers that outlive any one storage (the one rclone process every Rclone
storage talks to): made on first use by ``shared``, closed with the pools.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

import httpx

from manifold.drivers.transport import AiohttpTransport

# Connections kept open to all HTTP back ends together, and idle ones kept per pool.
HTTP_CONNECTIONS = 200
HTTP_KEEPALIVE = 50
# Seconds to connect, and to wait for any one read or write: a back end that stops
# answering fails a call instead of holding it.
HTTP_CONNECT_SECONDS = 10.0
HTTP_IO_SECONDS = 60.0
# Entries one listing may hold unless the server says otherwise: as many as the list
# cache holds over all storages (``vfs.storage_ops.LIST_CACHE_OBJECTS``).
MAX_LISTING_ENTRIES = 500_000

# The sign a ``/d`` link of a path in the server's tree carries: the one ``/d`` asks of
# that path (its storage signs, a password covers it, ``sign_all``), or one in any case
# when the flag says so; "" when none is asked.
DownloadSign = Callable[[str, bool], str]


def _no_sign(path: str, always: bool) -> str:
    return ""


def answer_limits(seconds: float = HTTP_IO_SECONDS) -> httpx.Timeout:
    """A request's time limits when its answer may take ``seconds`` to come (a long
    request watched with ``progress.waited``); by default the pool's own."""
    return httpx.Timeout(seconds, connect=HTTP_CONNECT_SECONDS)


class Closeable(Protocol):
    async def aclose(self) -> None: ...


SharedT = TypeVar("SharedT", bound=Closeable)


class Resources:
    """Shared HTTP connection pools; the server closes them when it stops.

    A driver built outside a server (a driver's own tests) gets a ``Resources`` of its
    own, so it runs the same code either way.
    """

    def __init__(self, max_listing_entries: int = MAX_LISTING_ENTRIES) -> None:
        self._clients: dict[bool, httpx.AsyncClient] = {}
        # A listing longer than this is refused (``helpers.gathered``).
        self.max_listing_entries = max_listing_entries
        # The server's: its ``site_url`` and its signer's rule (see ``DownloadSign``).
        self.site_url = ""
        self.download_sign: DownloadSign = _no_sign
        # The server's pool for fetching links, which follows a redirect only where the
        # server's rule allows; None outside a server (a driver's own tests).
        self.links: httpx.AsyncClient | None = None
        # The server's data folder, where a helper keeps its files; None for a driver
        # built outside a server (a helper then picks a temporary folder).
        self.data_dir: Path | None = None
        self._shared: dict[str, Closeable] = {}

    def shared(self, key: str, make: Callable[[], SharedT]) -> SharedT:
        """The helper kept under ``key``, made by ``make`` on first use; every storage
        of this server gets the same one, and ``aclose`` closes it."""
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = make()
        return found  # type: ignore[return-value]

    def http(self, *, verify: bool = True) -> httpx.AsyncClient:
        """The pool for HTTP back ends; ``verify=False`` only for a storage whose
        admin chose to skip certificate checks (an explicit, unsafe option)."""
        client = self._clients.get(verify)
        if client is None:
            limits = httpx.Limits(
                max_connections=HTTP_CONNECTIONS, max_keepalive_connections=HTTP_KEEPALIVE
            )
            client = httpx.AsyncClient(
                verify=verify,
                transport=AiohttpTransport(verify=verify, limits=limits),
                follow_redirects=False,
                trust_env=False,
                timeout=answer_limits(),
                limits=limits,
            )
            self._clients[verify] = client
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()
        helpers, self._shared = list(self._shared.values()), {}
        for helper in helpers:
            await helper.aclose()
