"""Work that moves bytes as tasks: copies between storages, and uploads run as tasks.

Both stream: a file's bytes go from the source link to the destination's ``put``
in bounded chunks, never whole into memory, and the destination's ``put`` renames
the file into place only when every byte has arrived, so a cancelled or failed task
leaves no partial file behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from manifold.concurrency import DISK_POOL, run_in
from manifold.config import make_private
from manifold.drivers.helpers import check_size
from manifold.errors import (
    FileExists,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
)
from manifold.localfs import stale_entries
from manifold.models import Obj, Perm, User
from manifold.paths import split_path
from manifold.services.auth.service import Caller
from manifold.services.fs.streams import CHUNK, file_stream
from manifold.services.fs.tree import FileTree, copy_task_name, refuse_too_deep
from manifold.services.fs.write import GuardedWriter
from manifold.services.runner import LEFTOVER_SECONDS, TaskContext, TaskService

SPOOL_PREFIX = "upload-"
# An upload task run where its spooled body is not (its instance stopped, with a data
# folder of its own) cannot go on: the body was only ever there.
UPLOAD_GONE = "the uploaded data is gone: its instance stopped; upload again"


class Transfers:
    """Runs the ``copy`` and ``upload`` task kinds over the file services."""

    def __init__(self, writer: GuardedWriter, temp_dir: Path) -> None:
        self._tree: FileTree = writer.tree
        self._writer = writer
        self._temp_dir = temp_dir

    async def start(self, tasks: TaskService, alone: bool = False) -> None:
        """Make the spool folder; drop bodies spooled before a restart that no upload
        task will send (one that is still to run, here or on another instance sharing
        the data folder, sends its body). Unless ``alone`` on the data folder, one
        still young may be another process's upload being spooled, and stays."""
        kept = await tasks.files_in_use("upload", "spool")
        await run_in(DISK_POOL, self._drop_spooled, kept, 0.0 if alone else LEFTOVER_SECONDS)

    def _drop_spooled(self, kept: set[str], idle: float) -> None:
        self._temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        make_private(self._temp_dir)
        for entry in stale_entries(self._temp_dir, SPOOL_PREFIX, kept, idle):
            _unlink(str(entry))

    def register(self, tasks: TaskService) -> None:
        copy_check = self._writer.task_recheck(Perm.COPY, "src", "dst_dir", with_password=True)
        tasks.register(
            "copy",
            self.run_copy,
            max_retry=2,
            threads_setting="copy_task_threads_num",
            recheck=copy_check,
        )
        tasks.register(
            "upload",
            self.run_upload,
            max_retry=0,
            threads_setting="upload_task_threads_num",
            recheck=self._recheck_upload,
        )

    async def _recheck_upload(self, user: User, payload: dict[str, Any]) -> None:
        """What ``upload_target`` checks: the path, and writing into its folder."""
        path = str(payload["path"])
        folder = split_path(path)[0]
        check = self._writer.task_recheck(None, "path", with_password=True)
        await check(user, payload)
        if not self._writer.can_write_in(Caller(user, ""), folder):
            raise PermissionDenied()

    async def run_copy(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        """One level of a copy between storages: a file is streamed, a folder is made
        and a child task spawned for each entry the creator may reach in it."""
        src, dst_dir = str(payload["src"]), str(payload["dst_dir"])
        password = str(payload.get("password", ""))
        overwrite = payload.get("overwrite") is True
        ctx.set_status("getting src object")
        obj, _ = await self._tree.lookup(src)
        if obj.is_dir:
            depth = int(payload.get("depth", 0))
            await self._copy_folder(ctx, src, dst_dir, password, depth, overwrite)
            return
        ctx.set_status("")
        ctx.set_total(obj.size)
        await self.stream_file(ctx, src, dst_dir, overwrite)

    async def stream_file(
        self, ctx: TaskContext, src: str, dst_dir: str, overwrite: bool, name: str = ""
    ) -> Obj:
        """Stream one file into ``dst_dir`` (under ``name`` or its own), its bytes
        counted into the task's progress: a copy task's file, and each file a move
        task carries to another storage. Whole at its name when this returns."""
        try:
            return await self._tree.copy_file(
                src, dst_dir, lambda stream: _counted(stream, ctx), name, overwrite
            )
        except ObjectExists:
            raise FileExists(name or split_path(src)[1]) from None

    async def _copy_folder(
        self,
        ctx: TaskContext,
        src: str,
        dst_dir: str,
        password: str,
        depth: int,
        overwrite: bool,
    ) -> None:
        """``depth``: how far below the folder the user copied this one is; a task per
        level puts no limit on the stack, but each level looks its whole path up."""
        if await self._tree.is_itself(src, f"{dst_dir}/{split_path(src)[1]}"):
            return  # a folder copied onto itself is there already
        refuse_too_deep(depth)
        _, target = await self._tree.copy_folder_level(src, dst_dir)
        ctx.set_status("src object is dir, listing objs")
        caller = Caller(ctx.creator, "") if ctx.creator is not None else None
        visit = await self._writer.walker.visit(caller, src, password)
        into = self._tree.place(target)
        for entry in visit.entries:
            title = copy_task_name(self._tree.place(entry.path), into)
            payload: dict[str, Any] = {"src": entry.path, "dst_dir": target, "depth": depth + 1}
            if password:
                payload["password"] = password
            if overwrite:
                payload["overwrite"] = True
            await ctx.spawn("copy", title, payload, entry.obj.size)
        status = "src object is dir, added all copy tasks of objs"
        left = self._tree.left_out(src)
        if left:  # entries no listing shows (``vfs.names``) are not copied: say so
            status += f"; {left} entries left out for their names"
        ctx.set_status(status)

    async def spool(self, stream: AsyncIterator[bytes], size: int | None) -> tuple[str, int]:
        """Store an upload body in the data folder, for an upload task to send on.

        Returns the file and its byte count (which ``size``, when given, must equal).
        """
        path = str(self._temp_dir / f"{SPOOL_PREFIX}{secrets.token_hex(12)}")
        file = await run_in(DISK_POOL, _create_private, path)
        written = 0
        batch = bytearray()
        try:
            async for data in stream:
                written += len(data)
                batch += data
                if len(batch) >= CHUNK:  # fewer, larger writes: one thread hop a MiB
                    await run_in(DISK_POOL, file.write, bytes(batch))
                    batch.clear()
            await run_in(DISK_POOL, file.write, bytes(batch))
            check_size(written, size)
        except BaseException:
            file.close()
            _unlink(path)
            raise
        file.close()
        return path, written

    async def run_upload(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        spooled, path = str(payload["spool"]), str(payload["path"])
        if not await run_in(DISK_POOL, os.path.exists, spooled):
            raise ObjectNotFound(UPLOAD_GONE)
        try:
            size = int(payload["size"])
            ctx.set_status("uploading")
            ctx.set_total(size)
            modified = payload.get("modified")
            when = datetime.fromtimestamp(modified, tz=UTC) if modified is not None else None
            stream = _counted(file_stream(spooled), ctx)
            overwrite = bool(payload.get("overwrite", True))
            await self._writer.store(self._writer.place(path), stream, size, when, overwrite)
        finally:
            _unlink(spooled)


async def _counted(stream: AsyncIterator[bytes], ctx: TaskContext) -> AsyncIterator[bytes]:
    async for data in stream:
        ctx.add_done(len(data))
        yield data


def _create_private(path: str) -> IO[bytes]:
    # Upload bodies are the users' files: readable by the server's account alone.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb")


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
