"""Offline downloads: a URL, magnet or torrent fetched by a tool into a private
folder, then moved into any storage by transfer tasks.

``offline_download`` tasks run the tool (SimpleHttp in this process; aria2,
qBittorrent and Transmission over their RPC APIs), polling its progress; each
entry of the finished folder becomes an ``offline_download_transfer`` task that
stores it into the target folder (a folder spawns a task per entry), file by file,
each renamed into place only once whole. The delete policy decides what happens to
each downloaded file after its transfer, as in AList.

The tool's id for a download is kept in the task, so a retry (after a restart of
Manifold or of the tool too) picks the same download up, or starts it again when
the tool no longer knows it. Cancelling a task removes the download from the tool.

Differences from AList, each deliberate: the target folder needs write permission
(and its folder password, via the same checks as an upload), not only the offline
download bit; URLs other than http, https, magnet and ftp are refused, and so is a
request of more than ``MAX_URLS``; SimpleHttp refuses private addresses unless
allowed (``simple_http``), and a URL whose host is private is refused at submit
(``addresses``); a tool that stops answering fails the task after
``STATUS_FAILURES`` polls instead of waiting forever; nothing of a download stays in
the data folder (``folders``); an existing name is never replaced (``transfer``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from manifold.concurrency import DISK_POOL, run_in
from manifold.errors import (
    BadRequest,
    NotAFolder,
    PermissionDenied,
    ServerError,
)
from manifold.localfs import discard_tree
from manifold.models import Perm, Task, TaskState
from manifold.policy import addresses
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.service import Caller
from manifold.services.fs.write import GuardedWriter
from manifold.services.offline import simple_http
from manifold.services.offline.aria2 import Aria2
from manifold.services.offline.folders import DownloadFolders
from manifold.services.offline.qbittorrent import QBittorrent
from manifold.services.offline.tools import Tool, ToolError, ToolUnreachable
from manifold.services.offline.transfer import Transfers
from manifold.services.offline.transmission import Transmission
from manifold.services.runner import TaskContext, TaskService

log = logging.getLogger("manifold.offline")

SIMPLE_HTTP = "SimpleHttp"
SCHEMES = ("http", "https", "magnet", "ftp")
STATUS_FAILURES = 5
MAX_URLS = 100
# How long a tool may take to drop a removed download before its folder goes anyway.
FORGET_SECONDS = 10.0
FOLDER = "offline"


class OfflineService:
    def __init__(
        self,
        settings: SettingsService,
        writer: GuardedWriter,
        temp_dir: Path,
        tools: list[Tool] | None = None,
    ) -> None:
        self._settings = settings
        self._writer = writer
        self._folders = DownloadFolders(temp_dir / FOLDER)
        self._transfers = Transfers(writer, self._folders)
        self.tools: dict[str, Tool] = {
            tool.name: tool for tool in (tools if tools is not None else builtin_tools(settings))
        }
        self.poll_seconds = 2.0
        self._starting: asyncio.Task[None] | None = None

    # -- life ---------------------------------------------------------------------------

    async def start(self, tasks: TaskService) -> None:
        kinds = ("offline_download", "offline_download_transfer")
        needed = self._needed(await tasks.of_kinds(kinds))
        await run_in(DISK_POOL, self._folders.sweep, needed)
        # The tools are asked in the background: one that is down must not hold up the start.
        self._starting = asyncio.create_task(self._init_all())

    def _needed(self, tasks: list[Task]) -> set[Path]:
        """The download folders a task may still use: a tool's download that a retry
        follows on (the tool keeps downloading into it), and the files of transfers
        not done yet. SimpleHttp starts again on a retry, so its folders are kept only
        while its task runs (on another instance sharing this data folder)."""
        needed: set[Path] = set()
        for task in tasks:
            if task.state in (TaskState.SUCCEEDED, TaskState.CANCELED):
                continue
            if task.kind == "offline_download_transfer":
                place = str(task.payload.get("file") or "")
            elif task.payload.get("tool") != SIMPLE_HTTP or task.state == TaskState.RUNNING:
                place = str(task.payload.get("folder") or "")
            else:
                continue
            folder = self._folders.owner(place) if place else None
            if folder is not None:
                needed.add(folder)
        return needed

    async def _init_all(self) -> None:
        for tool in self.tools.values():
            try:
                await tool.init()
            except Exception as exc:
                log.info("offline download tool %s is not available: %s", tool.name, exc)

    async def stop(self) -> None:
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._starting
        for tool in self.tools.values():
            close = getattr(tool, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    def register(self, tasks: TaskService) -> None:
        tasks.register(
            "offline_download",
            self.run_download,
            max_retry=1,
            threads_setting="offline_download_task_threads_num",
            recheck=self._writer.task_recheck(Perm.OFFLINE_DOWNLOAD, write_into="dst_dir"),
        )
        tasks.register(
            "offline_download_transfer",
            self._transfers.run,
            max_retry=2,
            threads_setting="offline_download_transfer_task_threads_num",
            recheck=self._writer.task_recheck(Perm.OFFLINE_DOWNLOAD, write_into="dst_dir"),
        )

    def ready(self) -> list[str]:
        """The tools a download can use now, sorted as AList sorts them (byte order)."""
        return sorted([SIMPLE_HTTP, *(n for n, t in self.tools.items() if t.ready)])

    # -- settings endpoints ---------------------------------------------------------------

    async def configure(self, name: str, values: list[tuple[str, str]]) -> str:
        """Save a tool's settings, then connect with them, as AList does: the values
        typed are kept whether or not the tool answers, and the tool's error is the
        answer (the tool is then not ready until a save that works)."""
        await self._settings.save(values)
        return await self.tools[name].init()

    # -- adding ---------------------------------------------------------------------------

    async def add(
        self, caller: Caller, urls: list[str], path: str, tool_name: str, delete_policy: str
    ) -> list[Task]:
        if not caller.user.can(Perm.OFFLINE_DOWNLOAD):
            raise PermissionDenied()
        target = await self._writer.folder(caller, path)
        place = self._writer.place(target)
        if not self._writer.can_write_in(caller, target):
            raise PermissionDenied()
        found = await self._writer.exists(place)
        if found is not None and not found.is_dir:
            raise NotAFolder()
        if len(urls) > MAX_URLS:
            raise BadRequest(f"too many urls: at most {MAX_URLS} in one request")
        for url in urls:
            _check_url(url, tool_name)
        await self._check_hosts(urls, tool_name)
        await self._tool(tool_name)  # a tool that is not ready is asked again
        named = [
            (
                f"download {url} to ({target})",
                {"url": url, "dst_dir": target, "tool": tool_name, "policy": delete_policy},
            )
            for url in urls
        ]
        return await self._writer.tasks.submit_many("offline_download", caller.user, named)

    async def _check_hosts(self, urls: list[str], tool_name: str) -> None:
        """Refuse at once what the download would refuse when it connects: a URL whose
        host is private while ``offline_download_allow_private`` is off. aria2 fetches
        URLs itself, without Manifold's guard, so its URLs are not judged here."""
        if tool_name == "aria2" or self._settings.get_bool(addresses.SETTING):
            return
        hosts = {
            urlsplit(url).hostname or ""
            for url in urls
            if urlsplit(url).scheme.lower() in ("http", "https")
        }
        hosts.discard("")
        ordered = sorted(hosts)
        refused = await asyncio.gather(*(addresses.refused_host(h) for h in ordered))
        for host, no in zip(ordered, refused, strict=True):
            if no:
                raise BadRequest(
                    f"{host} is a loopback, private or link-local address; downloads from "
                    f"such addresses are off: turn on {addresses.SETTING} (Settings, Traffic)"
                )

    async def _tool(self, name: str) -> Tool | None:
        if name == SIMPLE_HTTP:
            return None
        tool = self.tools.get(name)
        if tool is None:
            raise ServerError(f"failed get tool: tool {name} not found")
        if not tool.ready:
            try:
                await tool.init()
            except ToolError as exc:
                raise ServerError(f"failed init tool {name}: {exc.message}") from None
        return tool

    # -- downloading ----------------------------------------------------------------------

    async def run_download(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        url, tool_name = str(payload["url"]), str(payload["tool"])
        folder = str(payload.get("folder") or "")
        try:
            if folder and tool_name == SIMPLE_HTTP:
                await _discard_folder(folder)  # a run cut short (on any instance) left it
            if not folder or not await run_in(DISK_POOL, os.path.isdir, folder):
                # A tool's download that went into a folder this instance cannot see
                # (another's data folder) starts again here.
                folder = await run_in(DISK_POOL, self._folders.new, tool_name)
                await ctx.save_payload(folder=folder, ident="")
            if tool_name == SIMPLE_HTTP:
                await self._fetch(ctx, url, folder)
            else:
                tool = await self._tool(tool_name)
                assert tool is not None
                await self._through_tool(ctx, tool, payload, url, folder)
        except BaseException as exc:
            raise self._folders.without_paths(exc) from None
        ctx.set_status("offline download completed, maybe transferring")
        await self._transfers.spawn(
            ctx, folder, str(payload["dst_dir"]), str(payload.get("policy", ""))
        )
        ctx.set_progress(100)

    async def _fetch(self, ctx: TaskContext, url: str, folder: str) -> None:
        ctx.set_status(f"[{SIMPLE_HTTP}]: downloading")
        limit = self._settings.get_int("offline_download_max_size", 0)

        def progress(done: int, total: int) -> None:
            if total:
                ctx.set_total(total)
                ctx.set_progress(done * 100 / total)

        allowed = simple_http.private_allowed(self._settings)
        try:
            await simple_http.download(url, folder, limit, progress, allowed)
        except BaseException:
            # Nothing of a download that did not finish stays, whatever ended it: a stop
            # too (a retry starts again; the sweep at start removes what a crash left).
            await asyncio.shield(_discard_folder(folder))
            raise

    async def _through_tool(
        self, ctx: TaskContext, tool: Tool, payload: dict[str, Any], url: str, folder: str
    ) -> None:
        ident = str(payload.get("ident") or "")
        if ident:
            try:
                await tool.status(ident)
            except ToolUnreachable:
                raise  # it may still have the download: keep its folder for a retry
            except ToolError:
                ident = ""  # the tool forgot it (restarted without a session): start again
        try:
            if not ident:  # a cancel while the id is being stored still removes the download
                ident = await tool.add(url, folder, f"manifold-{ctx.task_id}")
                await ctx.save_payload(ident=ident)
            await self._follow(ctx, tool, ident)
        except BaseException:
            # A stop leaves it downloading for the retry after the restart. Otherwise the
            # tool lets go of it first, so that it writes nothing into the folder after;
            # a tool that does not answer may still download there, for a retry.
            if not ctx.shutting_down and (not ident or await asyncio.shield(_forget(tool, ident))):
                await asyncio.shield(_discard_folder(folder))
            raise
        minutes = tool.seed_minutes()
        if minutes > 0:
            ctx.set_status("offline download completed, waiting for seeding")
            # Seeding goes on while the files are transferred; they are read, not moved.
            asyncio.get_running_loop().call_later(
                minutes * 60, lambda: asyncio.ensure_future(_quietly_remove(tool, ident))
            )
        else:
            await _quietly_remove(tool, ident)

    async def _follow(self, ctx: TaskContext, tool: Tool, ident: str) -> None:
        failures = 0
        while True:
            try:
                status = await tool.status(ident)
            except ToolError as exc:
                failures += 1
                if failures > STATUS_FAILURES:
                    raise ToolError(
                        f"failed to get status of {ident}, retried {failures - 1} times: "
                        f"{exc.message}"
                    ) from None
                await asyncio.sleep(self.poll_seconds)
                continue
            failures = 0
            if status.error:
                raise ToolError(status.error)
            if status.total_bytes:
                ctx.set_total(status.total_bytes)
            ctx.set_progress(status.progress)
            ctx.set_status(f"[{tool.name}]: {'completed' if status.done else 'downloading'}")
            if status.done:
                return
            await asyncio.sleep(self.poll_seconds)


def builtin_tools(settings: SettingsService) -> list[Tool]:
    return [Aria2(settings), QBittorrent(settings), Transmission(settings)]


def _check_url(url: str, tool: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as exc:
        raise BadRequest(f"invalid url {url[:200]!r}: {exc}") from None
    scheme = parts.scheme.lower()
    allowed = ("http", "https") if tool == SIMPLE_HTTP else SCHEMES
    if scheme not in allowed:
        shown = ", ".join(allowed)
        raise BadRequest(f"url scheme {scheme or '(none)'} is not allowed for {tool}: use {shown}")


async def _forget(tool: Tool, ident: str) -> bool:
    """Remove the download from the tool and wait (a while) until the tool no longer
    knows it; whether it did, so nothing more is written into the download's folder."""
    try:
        await tool.remove(ident)
    except ToolUnreachable:
        return False
    except ToolError as exc:
        log.info("could not remove download %s from %s: %s", ident, tool.name, exc)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FORGET_SECONDS
    while loop.time() < deadline:
        try:
            await tool.status(ident)
        except ToolUnreachable:
            return False
        except ToolError:
            return True
        await asyncio.sleep(0.1)
    return True  # known still, but stopped: the folder goes anyway


async def _discard_folder(folder: str) -> None:
    await run_in(DISK_POOL, discard_tree, folder)


async def _quietly_remove(tool: Tool, ident: str) -> None:
    try:
        await tool.remove(ident)
    except Exception as exc:
        log.info("could not remove download %s from %s: %s", ident, tool.name, exc)
