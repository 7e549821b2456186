"""Moves that take a while, as ``move`` tasks (OpenList's kind): into another storage,
and folders of a storage that cannot move one in a single step (no ``FOLDER_MOVE``:
S3, which copies every key).

A move task moves one source, a file or a folder, into ``dst_dir`` (under ``name``
when the request renamed it). It first lists the source as its creator may reach it,
so that its progress counts the bytes of the whole move, then takes one file at a
time: the file is copied (into another storage streamed as a copy task streams it,
inside one storage by the storage itself) and its source removed only once the copy
is whole at its final name. Folders go last, deepest first, and only when nothing is
left in them: a file that failed, an entry withheld from the creator, a link, or a
storage mounted below stays at the source with its folder. A cancel stops inside or
between files: the file under way leaves nothing at the destination (an aborted put
leaves nothing), and every source not moved yet stays where it was.

Links (on Local) are left where they are: moving the bytes they show file by file
would remove the files they point at, which were never asked to move.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from manifold.errors import (
    FileExists,
    ManifoldError,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
)
from manifold.models import Obj, Perm, User
from manifold.paths import child_path, clean_path, split_path
from manifold.services.auth.service import Caller
from manifold.services.fs import placing
from manifold.services.fs.transfers import Transfers
from manifold.services.fs.tree import FileTree, Place, refuse_too_deep
from manifold.services.fs.walk import Entry
from manifold.services.fs.write import GuardedWriter
from manifold.services.runner import TaskContext, TaskService

# Files a move inside one storage has under way at once (S3 copies on the store).
SERVER_SIDE_WIDTH = 8


class MoveFailed(ServerError):
    """One file of a move task failed: it stays at its source, and the task names it."""

    @classmethod
    def at(cls, path: str, exc: ManifoldError) -> MoveFailed:
        return cls(f"failed to move [{path}]: {exc.message}")


@dataclass(slots=True)
class _Plan:
    """What a move task found to move: folders (source, target) parents first, files
    (source, target folder, object), and how many entries it leaves behind."""

    folders: builtins.list[tuple[str, str]] = field(default_factory=list)
    files: builtins.list[tuple[str, str, Obj]] = field(default_factory=list)
    kept: int = 0


class Moves:
    """Runs the ``move`` task kind over the file services."""

    def __init__(self, writer: GuardedWriter, transfers: Transfers) -> None:
        self._tree: FileTree = writer.tree
        self._writer = writer
        self._transfers = transfers

    def register(self, tasks: TaskService) -> None:
        tasks.register(
            "move",
            self.run_move,
            max_retry=2,
            threads_setting="move_task_threads_num",
            recheck=self._recheck,
        )

    async def _recheck(self, user: User, payload: dict[str, Any]) -> None:
        """What the request checked: the move bit to change folders, the rename bit to
        change the name, and both paths reachable."""
        check = self._writer.task_recheck(None, "src", "dst_dir", with_password=True)
        await check(user, payload)
        src_dir, name = split_path(str(payload["src"]))
        caller = Caller(user, "")
        if src_dir != payload["dst_dir"]:
            self._writer.require(caller, Perm.MOVE)
        if payload.get("name", name) != name:
            self._writer.require(caller, Perm.RENAME)

    async def run_move(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        src, dst_dir = str(payload["src"]), str(payload["dst_dir"])
        target = clean_path(f"{dst_dir}/{payload.get('name') or split_path(src)[1]}")
        overwrite = payload.get("overwrite") is True
        ctx.set_status("getting src object")
        obj, _ = await self._tree.lookup(src)
        if await self._tree.is_itself(src, target):
            return  # moved there already (a retry after the last step)
        if not obj.is_dir:
            ctx.set_total(obj.size)
            ctx.set_status("uploading")
            await self._move_file(ctx, src, target, obj, None, overwrite)
            ctx.set_status("")  # done: no step is under way any more
            return
        ctx.set_status("src object is dir, listing objs")
        plan = await self._plan(ctx, src, target, str(payload.get("password", "")))
        await self._move_folder(ctx, plan, overwrite)
        ctx.set_status(f"{plan.kept} entries stay at the source" if plan.kept else "")

    async def _move_folder(self, ctx: TaskContext, plan: _Plan, overwrite: bool) -> None:
        """Make the target folders, move every file, remove the emptied folders."""
        total = sum(obj.size for _, _, obj in plan.files)
        ctx.set_total(total)
        made = {folder: await self._tree.make_dir(folder) for _, folder in plan.folders}
        moved = 0

        async def step(path: str, into: str, item: Obj) -> None:
            nonlocal moved
            target = child_path(into, item.name)
            await self._move_file(ctx, path, target, item, made[into], overwrite)
            moved += 1
            ctx.set_status(f"moved {moved} of {len(plan.files)} files")
            if total == 0:  # empty files: progress counts them instead
                ctx.set_progress(moved * 100 / len(plan.files))

        (src, target), *_ = plan.folders
        # Inside one storage no byte passes through here: several files at once.
        inside = self._tree.place(src).same_storage(self._tree.place(target))
        await _each(plan.files, step, SERVER_SIDE_WIDTH if inside else 1)
        await self._remove_emptied([path for path, _ in plan.folders])

    async def _plan(self, ctx: TaskContext, src: str, target: str, password: str) -> _Plan:
        """Every file and folder of ``src`` the move takes: what the creator may reach,
        of the source's own storage, that no link leads elsewhere."""
        caller = Caller(ctx.creator, "") if ctx.creator is not None else None
        home = self._tree.place(src)
        plan = _Plan()
        pending = [(src, target, 0)]
        while pending:
            folder, into, depth = pending.pop()
            refuse_too_deep(depth)
            plan.folders.append((folder, into))
            visit = await self._writer.walker.visit(caller, folder, password)
            moved = await self._unlinked(folder, visit.entries, home)
            # Entries left out of the listing for their names stay too (``vfs.names``).
            plan.kept += len(visit.entries) - len(moved) + self._tree.left_out(folder)
            for entry in moved:
                if entry.obj.is_dir:
                    pending.append((entry.path, child_path(into, entry.obj.name), depth + 1))
                else:
                    plan.files.append((entry.path, into, entry.obj))
        return plan

    async def _unlinked(
        self, folder: str, entries: builtins.list[Entry], home: Place
    ) -> builtins.list[Entry]:
        """Those of ``entries`` held by the storage of the source itself (not a storage
        mounted below it) at their own place (no link leads elsewhere)."""
        real = await self._real(folder)
        kept = []
        for entry in entries:
            if not self._tree.place(entry.path).same_storage(home):
                continue
            if real is not None and await self._real(entry.path) == child_path(
                real, entry.obj.name
            ):
                kept.append(entry)
        return kept

    async def _real(self, path: str) -> str | None:
        """Where ``path`` really is, Aliases and links followed; None when links lead
        out of its storage."""
        for _ in range(placing.MAX_HOPS):
            place = self._tree.place(path)
            driver = place.ops.driver
            try:
                if not isinstance(driver, placing.Forwarding):
                    return await self._tree.real_path_of(path)
                inner = await driver.backing_path(place.sub_path)
            except PermissionDenied:
                return None
            if inner is None:
                return clean_path(path)
            path = inner
        return None

    async def _move_file(
        self,
        ctx: TaskContext,
        path: str,
        target: str,
        obj: Obj,
        folder: Obj | None,
        overwrite: bool,
    ) -> None:
        """Copy one file to ``target`` (into ``folder``, when made by this task), then
        remove its source; a failure names the file."""
        into, name = split_path(target)
        try:
            if self._tree.place(path).same_storage(self._tree.place(into)):
                await self._relocate(path, target, obj, folder, overwrite)
                ctx.add_done(obj.size)
                return
            await self._stream(ctx, path, into, overwrite, name)
        except ManifoldError as exc:
            raise MoveFailed.at(path, exc) from exc

    async def _stream(
        self, ctx: TaskContext, path: str, into: str, overwrite: bool, name: str
    ) -> None:
        """Into another storage (one file at a time): stream the file, then remove it."""
        before = ctx.done_bytes
        try:
            await self._transfers.stream_file(ctx, path, into, overwrite, name)
        except ManifoldError:
            # Progress counts what moved: the bytes of a file that stays at its
            # source are taken back, so a failed move shows what it reached.
            ctx.add_done(before - ctx.done_bytes)
            raise
        # The copy is whole: its source goes even when a cancel comes now, so a
        # retry never meets the file on both sides.
        await asyncio.shield(self._tree.remove(path))

    async def _relocate(
        self, path: str, target: str, obj: Obj, folder: Obj | None, overwrite: bool
    ) -> None:
        """Inside one storage: the storage's own move of a file (S3: a copy, then the
        source deleted), with a taken name replaced only when asked."""
        into, name = split_path(target)
        try:
            if folder is not None and name == obj.name:
                await self._tree.move_listed(path, obj, into, folder)
            else:
                await self._tree.rename_to(path, target, overwrite)
        except ObjectExists:
            if not overwrite:
                raise FileExists(name) from None
            await self._tree.rename_to(path, target, replace=True)

    async def _remove_emptied(self, folders: builtins.list[str]) -> None:
        """Remove the source folders left empty, deepest first; one holding entries
        its listing leaves out for their names is not empty and stays."""
        for folder in reversed(folders):
            try:
                left, _ = await self._tree.listing(folder, refresh=True)
                if not left and not self._tree.left_out(folder):
                    await self._tree.remove(folder)
            except ObjectNotFound:
                continue  # a folder of keys alone goes with its last key (S3)


async def _each(
    items: builtins.list[tuple[str, str, Obj]],
    step: Callable[[str, str, Obj], Awaitable[None]],
    width: int,
) -> None:
    """``step`` of every item in order, ``width`` at once, stopping at the first
    failure. With more than one at once (moves on the server, each a copy and a
    delete), a step once begun is let finish even when the task is cancelled, so no
    file is left copied with its source still there."""
    pending = iter(items)

    async def worker() -> None:
        for item in pending:
            if width == 1:
                await step(*item)
            else:
                await asyncio.shield(step(*item))

    workers = [asyncio.ensure_future(worker()) for _ in range(min(width, len(items)))]
    try:
        await asyncio.gather(*workers)
    finally:
        for job in workers:
            job.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
