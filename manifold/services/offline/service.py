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
download bit; URLs other than http, https, magnet and ftp are refused; SimpleHttp
refuses private addresses unless allowed (``simple_http``); a tool that stops
answering fails the task after ``STATUS_FAILURES`` polls instead of waiting forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from manifold.config import make_private
from manifold.drivers.base import FileSource
from manifold.errors import BadRequest, NotAFolder, PermissionDenied, ServerError
from manifold.models import Perm, Task
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.service import Caller
from manifold.services.fs.write import FsWriter
from manifold.services.offline import simple_http
from manifold.services.offline.aria2 import Aria2
from manifold.services.offline.qbittorrent import QBittorrent
from manifold.services.offline.tools import Tool, ToolError
from manifold.services.offline.transmission import Transmission
from manifold.tasks.service import TaskContext, TaskService
from manifold.vfs.paths import clean_path

log = logging.getLogger("manifold.offline")

SIMPLE_HTTP = "SimpleHttp"
SCHEMES = ("http", "https", "magnet", "ftp")
DELETE_ON_SUCCESS = "delete_on_upload_succeed"
DELETE_ON_FAILURE = "delete_on_upload_failed"
DELETE_ALWAYS = "delete_always"
STATUS_FAILURES = 5
FOLDER = "offline"


class OfflineService:
    def __init__(
        self,
        settings: SettingsService,
        writer: FsWriter,
        temp_dir: Path,
        tools: list[Tool] | None = None,
    ) -> None:
        self._settings = settings
        self._writer = writer
        self._root = temp_dir / FOLDER
        self.tools: dict[str, Tool] = {
            tool.name: tool for tool in (tools if tools is not None else builtin_tools(settings))
        }
        self.poll_seconds = 2.0
        self._starting: asyncio.Task[None] | None = None

    # -- life ---------------------------------------------------------------------------

    async def start(self, tasks: TaskService) -> None:
        await asyncio.to_thread(self._prepare, _has_undone(tasks))
        # The tools are asked in the background: one that is down must not hold up the start.
        self._starting = asyncio.create_task(self._init_all())

    def _prepare(self, keep: bool) -> None:
        if not keep and self._root.exists():
            shutil.rmtree(self._root, ignore_errors=True)  # AList's CleanTempDir

    def _new_folder(self, tool_name: str) -> str:
        """A private folder of its own for one download (made when first needed)."""
        if not self._root.exists():
            self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
            make_private(self._root)
        folder = self._root / _safe(tool_name) / uuid.uuid4().hex
        folder.mkdir(mode=0o700, parents=True)
        return str(folder)

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
            self.run_transfer,
            max_retry=2,
            threads_setting="offline_download_transfer_task_threads_num",
            recheck=self._writer.task_recheck(Perm.OFFLINE_DOWNLOAD, write_into="dst_dir"),
        )

    def ready(self) -> list[str]:
        """The tools a download can use now, sorted as AList sorts them (byte order)."""
        return sorted([SIMPLE_HTTP, *(n for n, t in self.tools.items() if t.ready)])

    # -- settings endpoints ---------------------------------------------------------------

    async def configure(self, name: str, values: list[tuple[str, str]]) -> str:
        """Set a tool's settings and connect with them; when the tool does not answer or
        refuses them, the previous settings are put back (AList keeps the broken ones)."""
        tool = self.tools[name]
        previous = [(key, self._settings.get(key)) for key, _ in values]
        await self._settings.save(values)
        try:
            return await tool.init()
        except ToolError:
            await self._settings.save(previous)
            with contextlib.suppress(ToolError):
                await tool.init()  # back to how it was, working or not
            raise

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
        await self._tool(tool_name)  # a tool that is not ready is asked again
        tasks = []
        for url in urls:
            _check_url(url, tool_name)
            payload = {"url": url, "dst_dir": target, "tool": tool_name, "policy": delete_policy}
            name = f"download {url} to ({target})"
            tasks.append(
                await self._writer.tasks.submit("offline_download", name, caller.user, payload)
            )
        return tasks

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
        if not folder or not await asyncio.to_thread(os.path.isdir, folder):
            folder = await asyncio.to_thread(self._new_folder, tool_name)
            await ctx.save_payload(folder=folder)
        if tool_name == SIMPLE_HTTP:
            await self._fetch(ctx, url, folder)
        else:
            tool = await self._tool(tool_name)
            assert tool is not None
            await self._through_tool(ctx, tool, payload, url, folder)
        ctx.set_status("offline download completed, maybe transferring")
        await self._spawn_transfers(
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
        await simple_http.download(url, folder, limit, progress, allowed)

    async def _through_tool(
        self, ctx: TaskContext, tool: Tool, payload: dict[str, Any], url: str, folder: str
    ) -> None:
        ident = str(payload.get("ident") or "")
        if ident:
            try:
                await tool.status(ident)
            except ToolError:
                ident = ""  # the tool forgot it (restarted without a session): start again
        added = not ident
        if added:
            ident = await tool.add(url, folder, f"manifold-{ctx.task_id}")
        try:
            if added:  # a cancel while the id is being stored still removes the download
                await ctx.save_payload(ident=ident)
            await self._follow(ctx, tool, ident)
        except asyncio.CancelledError:
            if not ctx.shutting_down:  # a restart leaves it downloading for the retry
                await asyncio.shield(_quietly_remove(tool, ident))
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

    async def _spawn_transfers(
        self, ctx: TaskContext, folder: str, dst_dir: str, policy: str
    ) -> None:
        into = self._writer.place(dst_dir)
        for entry in sorted(await asyncio.to_thread(os.listdir, folder)):
            source = os.path.join(folder, entry)
            if entry.startswith(".") and entry.endswith((".aria2", ".part")):
                continue  # a tool's own control file
            shown = source.removeprefix(str(self._root))
            await ctx.spawn(
                "offline_download_transfer",
                f"transfer []({shown}) to [{into.mount_path}]({into.sub_path})",
                {"file": source, "name": entry, "dst_dir": dst_dir, "policy": policy},
            )

    # -- transferring -----------------------------------------------------------------

    async def run_transfer(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        file, name = str(payload["file"]), str(payload["name"])
        dst_dir, policy = str(payload["dst_dir"]), str(payload.get("policy", ""))
        if not _inside(file, self._root):
            raise ServerError("the downloaded file is outside the download folder")
        ctx.set_status("getting src object")
        if not await asyncio.to_thread(os.path.exists, file):
            raise ServerError("the downloaded file is gone")
        if await asyncio.to_thread(os.path.isdir, file):
            await self._transfer_folder(ctx, file, name, dst_dir, policy)
            return
        try:
            stat = await asyncio.to_thread(os.stat, file)
            ctx.set_status("")
            ctx.set_total(stat.st_size)
            target = clean_path(f"{dst_dir}/{name}")
            modified = datetime.fromtimestamp(stat.st_mtime, tz=UTC)
            # A Local target on the same file system links the file instead of copying it.
            source = FileSource(file, ctx.add_done)
            await self._writer.store(
                self._writer.place(target), source, stat.st_size, modified, True
            )
        except BaseException:
            if policy in (DELETE_ON_FAILURE, DELETE_ALWAYS) and ctx.last_attempt:
                await asyncio.to_thread(_unlink, file)
            raise
        if policy in (DELETE_ON_SUCCESS, DELETE_ALWAYS):
            await asyncio.to_thread(_unlink, file)

    async def _transfer_folder(
        self, ctx: TaskContext, folder: str, name: str, dst_dir: str, policy: str
    ) -> None:
        ctx.set_status("src object is dir, listing objs")
        target = clean_path(f"{dst_dir}/{name}")
        if await self._writer.exists(self._writer.place(target)) is None:
            await self._writer.tree.make_dir(target)
        into = self._writer.place(target)
        for entry in sorted(await asyncio.to_thread(os.listdir, folder)):
            source = os.path.join(folder, entry)
            shown = source.removeprefix(str(self._root))
            await ctx.spawn(
                "offline_download_transfer",
                f"transfer []({shown}) to [{into.mount_path}]({into.sub_path})",
                {"file": source, "name": entry, "dst_dir": target, "policy": policy},
            )
        ctx.set_status("src object is dir, added all transfer tasks of files")


def builtin_tools(settings: SettingsService) -> list[Tool]:
    return [Aria2(settings), QBittorrent(settings), Transmission(settings)]


def _check_url(url: str, tool: str) -> None:
    scheme = urlsplit(url).scheme.lower()
    allowed = ("http", "https") if tool == SIMPLE_HTTP else SCHEMES
    if scheme not in allowed:
        shown = ", ".join(allowed)
        raise BadRequest(f"url scheme {scheme or '(none)'} is not allowed for {tool}: use {shown}")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _inside(path: str, root: Path) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real.startswith(base + os.sep)


def _has_undone(tasks: TaskService) -> bool:
    return tasks.unfinished(("offline_download", "offline_download_transfer"))


async def _quietly_remove(tool: Tool, ident: str) -> None:
    try:
        await tool.remove(ident)
    except Exception as exc:
        log.info("could not remove download %s from %s: %s", ident, tool.name, exc)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
