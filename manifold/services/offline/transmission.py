"""Transmission over its RPC interface (JSON over HTTP POST, with the session id
handshake: a request without ``X-Transmission-Session-Id`` is answered 409 with
the id to send).

As in AList, an http(s) URL is fetched by Manifold and handed to Transmission as
the torrent's content (so Transmission needs no route to where the torrent is); a
magnet goes as it is. That fetch goes through SimpleHttp's guard: the same refusal
of private addresses, the same size check (a torrent file is small).
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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
SESSION_HEADER = "X-Transmission-Session-Id"
# The oldest RPC version with every call and field used here (Transmission 2.80).
RPC_VERSION = 15
FIELDS = ["hashString", "name", "status", "percentDone", "sizeWhenDone", "leftUntilDone",
          "totalSize", "error", "errorString"]  # fmt: skip
VERSION_FIELDS = ["version", "rpc-version", "rpc-version-minimum"]
STOPPED = 0
SEEDING = (5, 6)  # queued to seed, seeding


class Transmission:
    name = "Transmission"

    def __init__(self, settings: SettingsService) -> None:
        self._settings = settings
        self._allow_private = simple_http.private_allowed(settings)
        self._ready = False
        self._session = ""

    @property
    def ready(self) -> bool:
        return self._ready

    def seed_minutes(self) -> int:
        return self._settings.get_int("transmission_seedtime", 0)

    async def init(self) -> str:
        self._ready = False
        try:
            answer = await self._call("session-get", {"fields": VERSION_FIELDS})
        except ToolError as exc:
            raise ToolError(f"failed get transmission version: {exc.message}") from None
        remote = int(answer.get("rpc-version") or 0)
        minimum = int(answer.get("rpc-version-minimum") or 0)
        if remote < RPC_VERSION or minimum > RPC_VERSION + 100:
            raise ToolError(
                f"remote transmission RPC version (v{remote}) is incompatible with the "
                f"transmission library (v{RPC_VERSION}): remote needs at least v{minimum}"
            )
        self._ready = True
        return "ok"

    async def add(self, url: str, folder: str, tag: str) -> str:
        arguments: dict[str, Any] = {"download-dir": folder, "paused": False}
        if urlsplit(url).scheme.lower() in ("http", "https"):
            torrent = await simple_http.fetch_torrent(url, self._allow_private)
            arguments["metainfo"] = base64.b64encode(torrent).decode()
        else:
            arguments["filename"] = url
        answer = await self._call("torrent-add", arguments)
        added = answer.get("torrent-added") or answer.get("torrent-duplicate") or {}
        ident = str(added.get("hashString", "")) if isinstance(added, dict) else ""
        if not ident:
            raise ToolError("Transmission did not add the torrent")
        return ident

    async def status(self, ident: str) -> ToolStatus:
        answer = await self._call("torrent-get", {"ids": [ident], "fields": FIELDS})
        torrents = answer.get("torrents") or []
        if not torrents:
            raise ToolError(f"Transmission does not know the download {ident}")
        torrent = torrents[0]
        name = str(torrent.get("name", ""))
        size = int(torrent.get("sizeWhenDone") or torrent.get("totalSize") or 0)
        progress = float(torrent.get("percentDone") or 0) * 100
        if int(torrent.get("error") or 0) and torrent.get("errorString"):
            error = f"failed to download {ident}, error: {torrent['errorString']}"
            return ToolStatus(False, progress, size, error, name)
        left = int(torrent.get("leftUntilDone") or 0)
        state = int(torrent.get("status") or 0)
        complete = size > 0 and left == 0 and progress >= 100
        if complete or state in SEEDING:
            return ToolStatus(True, 100.0, size, "", name)
        if state == STOPPED:  # stopped by a restart of Transmission: a task wants it running
            await self._call("torrent-start", {"ids": [ident]})
        return ToolStatus(False, progress, size, "", name)

    async def remove(self, ident: str) -> None:
        await self._call("torrent-remove", {"ids": [ident], "delete-local-data": False})

    async def _call(self, method: str, arguments: dict[str, Any]) -> dict[str, Any]:
        uri = self._settings.get("transmission_uri")
        parts = split_url(uri)
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ToolError(f"invalid transmission uri: {shown_url(uri)}")
        auth = None
        if parts.username is not None:
            auth = httpx.BasicAuth(parts.username, parts.password or "")
            netloc = parts.netloc.rsplit("@", 1)[-1]
            uri = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        body = {"method": method, "arguments": arguments}
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False, auth=auth) as client:
                for _ in range(2):
                    response = await client.post(uri, json=body, headers=self._headers())
                    if response.status_code != 409:
                        break
                    self._session = response.headers.get(SESSION_HEADER, "")
        except httpx.HTTPError as exc:
            self._ready = False
            raise ToolUnreachable(f"Transmission is unreachable: {type(exc).__name__}") from None
        if response.status_code == 401:
            raise ToolError("Transmission refused the user name or password")
        try:
            answer = response.json()
        except ValueError:
            raise ToolError(f"Transmission answered HTTP {response.status_code}") from None
        if not isinstance(answer, dict) or answer.get("result") != "success":
            result = answer.get("result") if isinstance(answer, dict) else None
            raise ToolError(f"Transmission: {result or 'not an RPC answer'}")
        arguments_out = answer.get("arguments") or {}
        return arguments_out if isinstance(arguments_out, dict) else {}

    def _headers(self) -> dict[str, str]:
        return {SESSION_HEADER: self._session} if self._session else {}
