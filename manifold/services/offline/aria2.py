"""aria2 over its JSON-RPC interface (HTTP POST), with the RPC secret as its token.

A torrent or magnet first downloads its metadata as one download, which aria2 then
"follows by" the real one: the status of a download is that of the last one in
that chain.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import httpx

from manifold.services.admin.settings import SettingsService
from manifold.services.offline.tools import ToolError, ToolStatus, ToolUnreachable, split_url

TIMEOUT = httpx.Timeout(4.0)
# States of a download aria2 has not stopped yet, and how long a removal waits for it.
BUSY = ("active", "waiting", "paused")
STOP_POLLS = 50
STATUS_KEYS = ["gid", "status", "totalLength", "completedLength", "errorMessage", "followedBy",
               "bittorrent", "files", "seeder"]  # fmt: skip


class Aria2:
    name = "aria2"

    def __init__(self, settings: SettingsService) -> None:
        self._settings = settings
        self._ready = False
        self._next_id = 0

    @property
    def ready(self) -> bool:
        return self._ready

    def seed_minutes(self) -> int:
        return 0

    async def init(self) -> str:
        self._ready = False
        parts = split_url(self._settings.get("aria2_uri"))
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ToolError("failed to init aria2 client: invalid parameter")
        try:
            answer = await self._call("aria2.getVersion")
        except ToolError as exc:
            raise ToolError(f"failed get aria2 version: {exc.message}") from None
        version = str(answer.get("version", "")) if isinstance(answer, dict) else ""
        self._ready = True
        return f"aria2 version: {version}"

    async def add(self, url: str, folder: str, tag: str) -> str:
        gid = await self._call("aria2.addUri", [url], {"dir": folder})
        return str(gid)

    async def status(self, ident: str) -> ToolStatus:
        gid = ident
        for _ in range(8):  # metadata → torrent → ...: a short chain
            info = await self._call("aria2.tellStatus", gid, STATUS_KEYS)
            followed = info.get("followedBy") or []
            if not followed:
                break
            gid = str(followed[0])
        total = int(info.get("totalLength") or 0)
        done = int(info.get("completedLength") or 0)
        progress = done * 100 / total if total else 0.0
        state = info.get("status", "")
        name = _name(info)
        if state == "complete" or (state == "active" and info.get("seeder") == "true"):
            return ToolStatus(True, 100.0, total, "", name)
        if state == "error":
            reason = info.get("errorMessage") or "unknown error"
            return ToolStatus(False, progress, total, f"failed to download {gid}, error: {reason}")
        if state == "removed":
            return ToolStatus(False, progress, total, f"failed to download {gid}, error: removed")
        return ToolStatus(False, progress, total, "", name)

    async def remove(self, ident: str) -> None:
        """Every download of the chain (metadata, then the torrent) is stopped, and
        once aria2 has stopped it, forgotten."""
        for gid in await self._chain(ident):
            await _quiet(self._call("aria2.forceRemove", gid))  # already stopped: fine
            for _ in range(STOP_POLLS):
                info = await _quiet(self._call("aria2.tellStatus", gid, ["status"]))
                if not isinstance(info, dict) or info.get("status") not in BUSY:
                    break
                await asyncio.sleep(0.1)
            await _quiet(self._call("aria2.removeDownloadResult", gid))

    async def _chain(self, ident: str) -> list[str]:
        gids = [ident]
        for _ in range(8):
            info = await _quiet(self._call("aria2.tellStatus", gids[-1], ["followedBy"]))
            followed = info.get("followedBy") if isinstance(info, dict) else None
            if not followed:
                break
            gids.append(str(followed[0]))
        return gids

    async def _call(self, method: str, *params: Any) -> Any:
        uri = self._settings.get("aria2_uri")
        secret = self._settings.get("aria2_secret")
        self._next_id += 1
        sent = [f"token:{secret}", *params] if secret else list(params)
        body = {"jsonrpc": "2.0", "method": method, "params": sent, "id": self._next_id}
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
                response = await client.post(uri, json=body)
        except httpx.HTTPError as exc:
            raise ToolUnreachable(f"aria2 is unreachable: {type(exc).__name__}") from None
        try:
            answer = response.json()
        except ValueError:
            raise ToolError(f"aria2 answered HTTP {response.status_code}") from None
        if not isinstance(answer, dict):
            raise ToolError("aria2 answered something that is not JSON-RPC")
        if "error" in answer:
            error = answer["error"] or {}
            raise ToolError(
                str(error.get("message", "error")) if isinstance(error, dict) else "error"
            )
        return answer.get("result")


async def _quiet(call: Awaitable[Any]) -> Any:
    """The call's answer, or None when aria2 refused it (a download it no longer has);
    an aria2 that does not answer still raises ``ToolUnreachable``."""
    try:
        return await call
    except ToolUnreachable:
        raise
    except ToolError:
        return None


def _name(info: dict[str, Any]) -> str:
    torrent = info.get("bittorrent") or {}
    named = (torrent.get("info") or {}).get("name") if isinstance(torrent, dict) else None
    if named:
        return str(named)
    files = info.get("files") or []
    if files and isinstance(files[0], dict):
        path = str(files[0].get("path", ""))
        return path.rsplit("/", 1)[-1]
    return ""
