"""qBittorrent over its WebUI API (v2), logged in with the user and password written
in the URL (``http://user:pass@host:port/``), as AList configures it.

As with Transmission, a torrent at an http(s) URL is fetched by Manifold (through
SimpleHttp's guard against private addresses) and uploaded to qBittorrent, so a
URL that fails answers at once with its reason; a magnet goes as it is.

Each download is added with a tag unique to its task and found again by that tag,
so the task's id for it is the tag itself: it stays valid across restarts of
Manifold and of qBittorrent (which keeps its torrents), and a torrent fetched from
an http URL is found once qBittorrent has it, whatever its hash turns out to be.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from manifold.services.admin.settings import SettingsService
from manifold.services.offline import simple_http
from manifold.services.offline.tools import (
    ToolError,
    ToolStatus,
    ToolUnreachable,
    shown_url,
    split_url,
)

TIMEOUT = httpx.Timeout(10.0)
# qBittorrent's states for a torrent that has every byte (it may go on seeding).
DONE = {"uploading", "pausedUP", "stoppedUP", "queuedUP", "stalledUP", "forcedUP", "checkingUP"}
FAILED = {"error", "missingFiles", "unknown"}
PAUSED = {"pausedDL", "stoppedDL"}
# How long a just-added torrent may be missing from the list (qBittorrent adds in the
# background) before it counts as forgotten.
APPEAR_SECONDS = 30.0


class QBittorrent:
    name = "qBittorrent"

    def __init__(self, settings: SettingsService) -> None:
        self._settings = settings
        self._allow_private = simple_http.private_allowed(settings)
        self._ready = False
        self._client: httpx.AsyncClient | None = None
        self._base = ""
        self._added: dict[str, float] = {}  # tag → when it was added (monotonic)

    @property
    def ready(self) -> bool:
        return self._ready

    def seed_minutes(self) -> int:
        return self._settings.get_int("qbittorrent_seedtime", 0)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def init(self) -> str:
        self._ready = False
        await self.close()
        url = self._settings.get("qbittorrent_url")
        parts = split_url(url)
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ToolError(f"failed to login into qBittorrent webui with url: {shown_url(url)}")
        netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        if ":" in parts.hostname:  # an IPv6 literal keeps its brackets
            netloc = f"[{parts.hostname}]" + (f":{parts.port}" if parts.port else "")
        self._base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self._client = httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)
        if not await self._version_ok():
            form = {
                "username": unquote(parts.username or ""),
                "password": unquote(parts.password or ""),
            }
            try:
                answer = await self._client.post(self._api("auth/login"), data=form)
            except httpx.HTTPError as exc:
                raise ToolError(
                    f"failed to login into qBittorrent webui with url: {shown_url(url)}: "
                    f"qBittorrent is unreachable: {type(exc).__name__}"
                ) from None
            if not answer.text.startswith("Ok"):
                raise ToolError(
                    f"failed to login into qBittorrent webui with url: {shown_url(url)}"
                )
            if not await self._version_ok():
                raise ToolError("unauthorized qbittorrent url")
        self._ready = True
        return "ok"

    async def add(self, url: str, folder: str, tag: str) -> str:
        form = {"savepath": folder, "tags": tag, "autoTMM": "false", "paused": "false",
                "stopped": "false"}  # fmt: skip
        files = None
        if urlsplit(url).scheme.lower() in ("http", "https"):
            torrent = await simple_http.fetch_torrent(url, self._allow_private)
            files = {"torrents": ("download.torrent", torrent, "application/x-bittorrent")}
        else:
            form["urls"] = url
        answer = await self._request("POST", "torrents/add", data=form, files=files)
        if not answer.text.startswith("Ok"):
            raise ToolError(f"qBittorrent refused the download: {answer.text.strip()[:200]}")
        self._added[tag] = time.monotonic()
        return tag

    async def status(self, ident: str) -> ToolStatus:
        torrent = await self._find(ident)
        if torrent is None:
            added = self._added.get(ident)
            if added is not None and time.monotonic() - added < APPEAR_SECONDS:
                return ToolStatus(False)  # qBittorrent is still fetching the torrent
            raise ToolError(f"qBittorrent does not know the download {ident}")
        self._added.pop(ident, None)
        state = str(torrent.get("state", ""))
        total = int(torrent.get("total_size") or torrent.get("size") or 0)
        progress = float(torrent.get("progress") or 0) * 100
        name = str(torrent.get("name", ""))
        if state in DONE:
            return ToolStatus(True, 100.0, total, "", name)
        if state in FAILED:
            error = f"failed to download {ident}, error: qBittorrent state {state}"
            return ToolStatus(False, progress, total, error, name)
        if state in PAUSED:  # paused by hand or by a restart: a task wants it running
            hashes = {"hashes": str(torrent.get("hash", ""))}
            with contextlib.suppress(ToolError):  # 4.x names it resume, 5.x start
                await self._request("POST", "torrents/resume", data=hashes)
            with contextlib.suppress(ToolError):
                await self._request("POST", "torrents/start", data=hashes)
        return ToolStatus(False, progress, total, "", name)

    async def remove(self, ident: str) -> None:
        self._added.pop(ident, None)
        torrent = await self._find(ident)
        if torrent is None:
            return
        form = {"hashes": str(torrent.get("hash", "")), "deleteFiles": "false"}
        await self._request("POST", "torrents/delete", data=form)

    async def _find(self, tag: str) -> dict[str, Any] | None:
        answer = await self._request("GET", "torrents/info", params={"tag": tag})
        try:
            torrents = answer.json()
        except ValueError:
            raise ToolError("qBittorrent answered something that is not JSON") from None
        for torrent in torrents if isinstance(torrents, list) else []:
            tags = [t.strip() for t in str(torrent.get("tags", "")).split(",")]
            if tag in tags:
                return dict(torrent)
        return None

    async def _version_ok(self) -> bool:
        assert self._client is not None
        try:
            answer = await self._client.post(self._api("app/version"))
        except httpx.HTTPError:
            return False
        return answer.status_code == 200

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        if self._client is None:
            raise ToolError("qBittorrent is not set up")
        for attempt in range(2):
            try:
                answer = await self._client.request(method, self._api(path), **kwargs)
            except httpx.HTTPError as exc:
                self._ready = False
                raise ToolUnreachable(f"qBittorrent is unreachable: {type(exc).__name__}") from None
            if answer.status_code != 403 or attempt:
                break
            await self.init()  # the session expired (qBittorrent restarted): log in again
        if answer.status_code != 200:
            raise ToolError(f"qBittorrent answered HTTP {answer.status_code}")
        return answer

    def _api(self, path: str) -> str:
        return f"{self._base}/api/v2/{path}"
