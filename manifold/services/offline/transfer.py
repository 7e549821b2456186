"""``offline_download_transfer`` tasks: a downloaded entry stored into its target folder.

A folder becomes a folder in the target and a task per entry; a file is stored
whole, renamed into place only once complete. An existing name is never replaced
(AList overwrites it): the file goes to the first free one of ``name (1).ext``,
``name (2).ext``, ..., a name taken meanwhile moving it on a number. The delete
policy decides whether the downloaded copy is deleted afterwards, as in AList.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from manifold.concurrency import DISK_POOL, run_in
from manifold.drivers.base import FileSource
from manifold.errors import FileExists, ObjectExists, ServerError
from manifold.paths import clean_path
from manifold.services.fs.write import GuardedWriter
from manifold.services.offline.folders import DownloadFolders
from manifold.services.offline.names import clean_name, numbered
from manifold.services.runner import TaskContext

KIND = "offline_download_transfer"
DELETE_ON_SUCCESS = "delete_on_upload_succeed"
DELETE_ON_FAILURE = "delete_on_upload_failed"
DELETE_ALWAYS = "delete_always"
FREE_NAME_TRIES = 100


class Transfers:
    def __init__(self, writer: GuardedWriter, folders: DownloadFolders) -> None:
        self._writer = writer
        self._folders = folders

    async def spawn(self, ctx: TaskContext, folder: str, dst_dir: str, policy: str) -> None:
        """A transfer task for each entry of ``folder`` into ``dst_dir``."""
        into = self._writer.place(dst_dir)
        entries = sorted(await run_in(DISK_POOL, os.listdir, folder))
        for entry in entries:
            source = os.path.join(folder, entry)
            if entry.startswith(".") and entry.endswith((".aria2", ".part")):
                continue  # a tool's own control file
            await ctx.spawn(
                KIND,
                f"transfer []({self._folders.shown(source)}) to "
                f"[{into.mount_path}]({into.sub_path})",
                {"file": source, "name": clean_name(entry), "dst_dir": dst_dir, "policy": policy},
            )
        if not entries:
            await run_in(DISK_POOL, self._folders.prune, folder)

    async def run(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        try:
            await self._transfer(ctx, payload)
        except BaseException as exc:
            raise self._folders.without_paths(exc) from None

    async def _transfer(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        file, name = str(payload["file"]), str(payload["name"])
        dst_dir, policy = str(payload["dst_dir"]), str(payload.get("policy", ""))
        if not self._folders.inside(file):
            raise ServerError("the downloaded file is outside the download folder")
        ctx.set_status("getting src object")
        if not await run_in(DISK_POOL, os.path.exists, file):
            raise ServerError("the downloaded file is gone")
        if await run_in(DISK_POOL, os.path.isdir, file):
            await self._transfer_folder(ctx, file, name, dst_dir, policy)
            return
        try:
            stat = await run_in(DISK_POOL, os.stat, file)
            ctx.set_status("")
            ctx.set_total(stat.st_size)
            # A Local target on the same file system links the file instead of copying it.
            await self._store_new(dst_dir, name, lambda: FileSource(file, ctx.add_done), stat)
        except BaseException:
            if policy in (DELETE_ON_FAILURE, DELETE_ALWAYS) and ctx.last_attempt:
                await run_in(DISK_POOL, self._folders.discard_file, file)
            raise
        if policy in (DELETE_ON_SUCCESS, DELETE_ALWAYS):
            await run_in(DISK_POOL, self._folders.discard_file, file)

    async def _store_new(
        self, dst_dir: str, name: str, source: Callable[[], FileSource], stat: os.stat_result
    ) -> None:
        modified = datetime.fromtimestamp(stat.st_mtime, tz=UTC)
        number = 0
        while True:
            target, number = await self._free_name(dst_dir, name, number)
            try:
                place = self._writer.place(target)
                await self._writer.store(place, source(), stat.st_size, modified, False)
                return
            except FileExists:
                number += 1  # taken since it was looked at: the next one

    async def _free_name(self, dst_dir: str, name: str, start: int = 0) -> tuple[str, int]:
        """The first of ``name``, ``name (1)``, ... from ``start`` that ``dst_dir`` lacks."""
        for number in range(start, FREE_NAME_TRIES):
            target = clean_path(f"{dst_dir}/{numbered(name, number)}")
            if await self._writer.exists(self._writer.place(target)) is None:
                return target, number
        last = FREE_NAME_TRIES - 1
        raise ObjectExists(f"[{name}] and each of its numbered names up to ({last}) exist")

    async def _transfer_folder(
        self, ctx: TaskContext, folder: str, name: str, dst_dir: str, policy: str
    ) -> None:
        ctx.set_status("src object is dir, listing objs")
        target, _ = await self._free_name(dst_dir, name)
        await self._writer.tree.make_dir(target)
        await self.spawn(ctx, folder, target, policy)
        ctx.set_status("src object is dir, added all transfer tasks of files")
