"""SimpleHttp: Manifold's own HTTP downloader, streaming a URL into a private folder.

Redirects are followed (at most ``MAX_REDIRECTS``); the file's name comes from
``Content-Disposition`` when it has one, else from the URL's path, else from the
host, made safe to store (``names``). A failed or cancelled download deletes what it
wrote. A dropped connection is resumed with a ``Range`` request where the server
allows it. The ``offline_download_max_size`` setting (bytes, 0: no limit) stops a
download that grows past it.

No SSRF: unless the ``offline_download_allow_private`` setting is on, every
connection, redirects included, is checked on the address actually connected to
(after name resolution, by the connection backend itself), and loopback, private,
link-local, multicast and reserved addresses are refused, and so is an IPv6
address that embeds such an IPv4 address (``addresses``). No proxy from the
environment is used, so the check sees the real destination.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from email.message import Message
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import httpcore
import httpx

from manifold.concurrency import DOWNLOAD_POOL, run_in, start_in
from manifold.policy.addresses import is_public
from manifold.services.admin.settings import SettingsService
from manifold.services.offline.names import clean_name
from manifold.services.offline.tools import ToolError

MAX_REDIRECTS = 10
RESUMES = 5
TIMEOUT = httpx.Timeout(30.0, read=120.0)

PROGRESS_BYTES = 4 << 20

Resolver = Callable[[str, int], list[str]]


def private_allowed(settings: SettingsService) -> Callable[[], bool]:
    """The admin's ``offline_download_allow_private`` setting, read at each connection."""
    return lambda: settings.get_bool("offline_download_allow_private")


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class GuardedBackend(httpcore.NetworkBackend):
    """Connects only to addresses the policy allows: the check is on the resolved
    address that is then connected to, so a name that resolves (or re-resolves) to
    a private address is refused as surely as the address itself."""

    def __init__(self, allow_private: Callable[[], bool], resolver: Resolver) -> None:
        self._inner = httpcore.SyncBackend()
        self._allow_private = allow_private
        self._resolve = resolver

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self._resolve(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        address = _pick(host, addresses, self._allow_private())
        return self._inner.connect_tcp(address, port, timeout, local_address, socket_options)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("no unix sockets")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _pick(host: str, addresses: list[str], allow_private: bool) -> str:
    """The address to connect to: refused unless every address ``host`` resolved to is
    public (or private ones are allowed)."""
    if not addresses:
        raise httpcore.ConnectError(f"cannot resolve {host}")
    if not allow_private and not all(is_public(a) for a in addresses):
        raise RefusedAddress(host)
    return addresses[0]


class RefusedAddress(httpcore.ConnectError):
    def __init__(self, host: str) -> None:
        super().__init__(
            f"{host} is a loopback, private or link-local address; "
            "downloads from such addresses are off (offline_download_allow_private)"
        )


def guarded_client(
    allow_private: Callable[[], bool], resolver: Resolver = system_resolver
) -> httpx.Client:
    transport = httpx.HTTPTransport()
    transport._pool = httpcore.ConnectionPool(
        network_backend=GuardedBackend(allow_private, resolver)
    )
    return httpx.Client(
        transport=transport, timeout=TIMEOUT, follow_redirects=False, trust_env=False
    )


def file_name(response: httpx.Response, url: str) -> str:
    """AList's rule: the Content-Disposition name, else the URL path's base name, else
    the host with dots as underscores; then made safe to store (``names.clean_name``)."""
    header = response.headers.get("content-disposition", "")
    name = ""
    if header:
        message = Message()
        message["content-disposition"] = header
        name = message.get_filename() or ""
    if not name:
        parts = urlsplit(url)
        name = unquote(parts.path.rsplit("/", 1)[-1]) or (parts.hostname or "").replace(".", "_")
    return clean_name(name)


Progress = Callable[[int, int], None]  # (bytes so far, total or 0)


async def download(
    url: str,
    folder: str,
    max_size: int,
    progress: Progress,
    allow_private: Callable[[], bool],
    resolver: Resolver | None = None,
) -> str:
    """Fetch ``url`` into ``folder``; returns the file's path. Raises ``ToolError``.

    The transfer runs in a worker thread with a blocking client: reading the socket
    and writing the file there is several times faster than through the event loop
    (one thread hop per chunk), and the loop stays free. Progress comes back to the
    loop at most every ``PROGRESS_BYTES``; cancelling stops the thread at its next chunk.
    """
    loop = asyncio.get_running_loop()
    stop = threading.Event()

    def report(done: int, total: int) -> None:
        loop.call_soon_threadsafe(progress, done, total)

    def run() -> str:
        with guarded_client(allow_private, resolver or system_resolver) as client:
            return download_blocking(client, url, folder, max_size, report, stop)

    future = start_in(DOWNLOAD_POOL, run)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        stop.set()
        future.add_done_callback(_settled)  # its end ("cancelled") goes unread
        raise


def _settled(future: asyncio.Future[str]) -> None:
    if not future.cancelled():
        future.exception()


def download_blocking(
    client: httpx.Client,
    url: str,
    folder: str,
    max_size: int,
    progress: Progress,
    stop: threading.Event,
) -> str:
    """``download``'s body, in the calling thread."""
    response, final_url = _open(client, url, {})
    try:
        if response.status_code >= 400:
            raise ToolError(f"http status code {response.status_code}")
        name = file_name(response, final_url)
        path = os.path.join(folder, name)
        total = _length(response)
        if max_size and total > max_size:
            raise ToolError(_too_large(max_size))
        try:
            return _write(client, response, final_url, path, max_size, progress, stop)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)  # nothing of a failed download stays behind
            raise
    except httpx.HTTPError as exc:
        raise ToolError(f"failed to download {url}: {exc}") from None
    except OSError as exc:  # its text would show the server's folders
        raise ToolError(f"failed to store the download: {exc.strerror or 'error'}") from None
    finally:
        response.close()


def _write(
    client: httpx.Client,
    response: httpx.Response,
    url: str,
    path: str,
    max_size: int,
    progress: Progress,
    stop: threading.Event,
) -> str:
    """The body of ``response`` into ``path``, resumed from ``url`` with a ``Range``
    request when the connection drops."""
    total = _length(response)
    written = reported = resumes = 0
    try:
        with open(path, "wb") as out:
            while True:
                try:
                    for data in response.iter_raw():
                        if stop.is_set():
                            raise ToolError("the download was cancelled")
                        written += len(data)
                        if max_size and written > max_size:
                            raise ToolError(_too_large(max_size))
                        out.write(data)
                        if written - reported >= PROGRESS_BYTES:
                            reported = written
                            progress(written, total)
                    if total and written < total:
                        raise httpx.RemoteProtocolError("the connection closed early")
                    break
                except (httpx.ReadError, httpx.RemoteProtocolError, httpx.ReadTimeout):
                    resumes += 1
                    if resumes > RESUMES:
                        raise ToolError("the connection dropped too often") from None
                    response.close()
                    response, _ = _open(client, url, {"Range": f"bytes={written}-"})
                    if response.status_code == 200:  # no ranges here: start again
                        out.seek(0)
                        out.truncate()
                        written = 0
                    elif response.status_code != 206:
                        raise ToolError(f"http status code {response.status_code}") from None
    finally:
        response.close()
    progress(written, total)
    return path


def _open(client: httpx.Client, url: str, headers: dict[str, str]) -> tuple[httpx.Response, str]:
    # The body is written as it comes: no content coding (gzip would be stored as is).
    headers = {"Accept-Encoding": "identity", **headers}
    for _ in range(MAX_REDIRECTS + 1):
        _check_scheme(url)
        try:
            response = client.send(client.build_request("GET", url, headers=headers), stream=True)
        except httpx.HTTPError as exc:
            raise _connect_error(url, exc) from None
        if response.is_redirect and "location" in response.headers:
            response.close()
            url = urljoin(url, response.headers["location"])
            continue
        return response, url
    raise ToolError("too many redirects")


TORRENT_LIMIT = 16 << 20


async def fetch_torrent(url: str, allow_private: Callable[[], bool]) -> bytes:
    """The torrent file at ``url`` (at most ``TORRENT_LIMIT`` bytes), through the same
    guard as a download."""

    def run() -> bytes:
        with guarded_client(allow_private) as client:
            response, _ = _open(client, url, {})
            try:
                if response.status_code >= 400:
                    raise ToolError(f"http status code {response.status_code}")
                body = bytearray()
                for data in response.iter_raw():
                    body += data
                    if len(body) > TORRENT_LIMIT:
                        raise ToolError(f"{url} is larger than {TORRENT_LIMIT} bytes")
                return bytes(body)
            except httpx.HTTPError as exc:
                raise ToolError(f"failed to download {url}: {exc}") from None
            finally:
                response.close()

    return await run_in(DOWNLOAD_POOL, run)


def _check_scheme(url: str) -> None:
    scheme = urlsplit(url).scheme
    if scheme not in ("http", "https"):
        raise ToolError(f"redirected to an unsupported URL scheme: {scheme}")


def _connect_error(url: str, exc: httpx.HTTPError) -> ToolError:
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, RefusedAddress):
        return ToolError(str(cause))
    return ToolError(f"failed to download {url}: {exc}")


def _length(response: httpx.Response) -> int:
    try:
        return max(0, int(response.headers.get("content-length", "0")))
    except ValueError:
        return 0


def _too_large(limit: int) -> str:
    return f"the file is larger than the limit of {limit} bytes (offline_download_max_size)"
