"""The file tree, write side, in virtual paths: every change with its permission check.

Each entry point takes an explicit caller and client-supplied paths and names. A
path is joined onto the caller's base path (which refuses any escape); a name must
be one path segment (no ``/``, ``\\``, ``..`` or NUL), and the joined path is
checked again. Then the permission bit, the meta rules (password, write) and the
storage are checked once, here, before any storage is asked to change.

Changes made here are told to ``TreeEvents`` (the search index listens); listings
cached per storage are patched by ``StorageOps`` itself.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator
from datetime import datetime

from manifold.errors import (
    BadRequest,
    FileExists,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
)
from manifold.models import Obj, Perm, Task
from manifold.paths import clean_path, is_sub_path, split_path, validate_name
from manifold.services.admin.metas import MetaService
from manifold.services.auth.service import Caller
from manifold.services.fs import access, patterns
from manifold.services.fs.read import FsService
from manifold.services.fs.tree import FileTree, Place, copy_task_name
from manifold.services.fs.walk import TreeWalker
from manifold.services.runner import TaskService

CONFLICT_POLICIES = ("cancel", "skip", "overwrite")


class FsWriter:
    def __init__(self, fs: FsService, metas: MetaService, tasks: TaskService) -> None:
        self._fs = fs
        self.tree: FileTree = fs.tree
        self._metas = metas
        self.walker = TreeWalker(fs, metas)
        self.tasks = tasks

    # --- checks -------------------------------------------------------------------

    async def folder(self, caller: Caller, path: str, password: str = "") -> str:
        """The full path of a folder the caller names, after the access check."""
        full = self._fs.resolve(caller, path)
        self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        return full

    async def child(self, caller: Caller, folder: str, name: str, password: str = "") -> str:
        """``folder/name`` for a client-supplied ``name`` that must be one segment."""
        validate_name(name)
        full = clean_path(f"{folder}/{name}")
        if split_path(full) != (folder, name) or not is_sub_path(caller.user.base_path, full):
            raise PermissionDenied()
        self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        return full

    @staticmethod
    def require(caller: Caller, perm: Perm) -> None:
        if not caller.user.can(perm):
            raise PermissionDenied()

    def can_write_in(self, caller: Caller, folder: str) -> bool:
        """The user's write bit, or a meta that lets anyone write in ``folder``."""
        return access.can_write(caller.user, self._metas.nearest(folder), folder)

    def place(self, path: str) -> Place:
        return self.tree.place(path)

    async def exists(self, place: Place) -> Obj | None:
        return await self.tree.exists(place)

    # --- operations ---------------------------------------------------------------

    async def mkdir(self, caller: Caller, path: str, password: str = "") -> Obj:
        full = self._fs.resolve(caller, path)
        parent, _ = split_path(full)
        # The folder written in is checked as a remove checks it: a password without
        # p_sub, or a hide rule, guards the folder's contents against writes too.
        self._fs.check_access(caller, parent, password)
        self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        if not self.can_write_in(caller, parent):
            raise PermissionDenied()
        return await self.tree.make_dir(full)

    async def rename(
        self, caller: Caller, path: str, name: str, overwrite: bool, password: str = ""
    ) -> Obj:
        self.require(caller, Perm.RENAME)
        full = self._fs.resolve(caller, path)
        parent, _ = split_path(full)
        self._fs.check_access(caller, parent, password)  # as in mkdir
        self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        dst = await self.child(caller, parent, name, password)
        self.tree.refuse_root(self.place(full), "rename")
        await self.walker.guard_whole(caller, full, password)
        if dst != full:
            await self._clear_way(self.place(dst), name, overwrite)
        return await self.tree.rename(full, name)

    async def batch_rename(
        self,
        caller: Caller,
        src_dir: str,
        pairs: builtins.list[tuple[str, str]],
        password: str = "",
    ) -> None:
        self.require(caller, Perm.RENAME)
        folder = await self.folder(caller, src_dir, password)
        checked = [
            (
                await self.child(caller, folder, old, password),
                await self.child(caller, folder, new, password),
                new,
            )
            for old, new in pairs
            if old and new
        ]
        for src, _, _ in checked:
            await self.walker.guard_whole(caller, src, password)
        for src, _, new in checked:
            await self.tree.rename(src, new)

    async def regex_rename(
        self, caller: Caller, src_dir: str, pattern: str, template: str, password: str = ""
    ) -> None:
        self.require(caller, Perm.RENAME)
        folder = await self.folder(caller, src_dir, password)
        try:
            regex = await asyncio.to_thread(patterns.Pattern, pattern)
        except patterns.PatternError as exc:
            raise ServerError(str(exc)) from None
        replacement = patterns.Template(template, regex)
        # Only names the caller can reach are matched; every new name is worked out (and
        # a too long one refused) before any rename.
        visit = await self.walker.visit(caller, folder, password, refresh=False)
        names = [entry.obj.name for entry in visit.entries]
        pairs = await asyncio.to_thread(patterns.renames, regex, replacement, names)
        await self.batch_rename(caller, src_dir, pairs, password)

    async def move(
        self,
        caller: Caller,
        src_dir: str,
        dst_dir: str,
        names: builtins.list[str],
        overwrite: bool,
        password: str = "",
    ) -> None:
        self.require(caller, Perm.MOVE)
        pairs = await self._pairs(caller, src_dir, dst_dir, names, overwrite, password)
        for src, dst_folder in pairs:
            place = self.tree.refuse_root(self.place(src), "move")
            if not place.same_storage(self.place(dst_folder)):
                raise ServerError.across_storages()
            name = split_path(src)[1]
            if overwrite:
                await self._clear_way(self.place(f"{dst_folder}/{name}"), name, True)
            await self.tree.move(src, dst_folder)

    async def copy(
        self,
        caller: Caller,
        src_dir: str,
        dst_dir: str,
        names: builtins.list[str],
        overwrite: bool,
        password: str = "",
    ) -> builtins.list[Task]:
        """Copy within a storage at once; across storages as one copy task per name."""
        self.require(caller, Perm.COPY)
        pairs = await self._pairs(caller, src_dir, dst_dir, names, overwrite, password)
        tasks: builtins.list[Task] = []
        for src, dst_folder in pairs:
            place, dst_place = self.place(src), self.place(dst_folder)
            await self._ready_to_copy(src, dst_folder, overwrite)
            if self.tree.copies_natively(place, dst_place):
                await self.tree.copy(src, dst_folder)
            else:
                tasks.append(await self.submit_copy(caller, src, dst_folder, password))
        return tasks

    async def copy_now(
        self, caller: Caller, src: str, dst_dir: str, overwrite: bool, password: str = ""
    ) -> Obj:
        """Copy one path into ``dst_dir`` and return once the copy is whole, across
        storages too (the protocol servers answer a copy only when it is done)."""
        self.require(caller, Perm.COPY)
        src_dir, name = split_path(clean_path(src))
        [(full, dst_folder)] = await self._pairs(
            caller, src_dir, dst_dir, [name], overwrite, password
        )
        await self._ready_to_copy(full, dst_folder, overwrite)
        return await self.tree.copy(full, dst_folder)

    async def submit_copy(
        self, caller: Caller | None, src: str, dst_folder: str, password: str = ""
    ) -> Task:
        """A copy task; it walks ``src`` as its creator with ``password``, as the request did."""
        creator = caller.user if caller is not None else None
        name = copy_task_name(self.place(src), self.place(dst_folder))
        payload = {"src": src, "dst_dir": dst_folder}
        if password:
            payload["password"] = password
        return await self.tasks.submit("copy", name, creator, payload)

    async def remove(
        self, caller: Caller, dir: str, names: builtins.list[str], password: str = ""
    ) -> None:
        self.require(caller, Perm.REMOVE)
        if not names:
            raise BadRequest("Empty file names")
        folder = await self.folder(caller, dir, password)
        targets = [await self.child(caller, folder, name, password) for name in names]
        for full in targets:
            await self.walker.guard_whole(caller, full, password)
        for full in targets:
            try:
                await self.tree.remove(full)
            except ObjectNotFound:
                continue  # already gone: the caller's wish holds

    async def remove_empty_directory(
        self, caller: Caller, src_dir: str, password: str = ""
    ) -> None:
        """Remove every empty folder below ``src_dir`` that the caller may reach.

        A withheld entry counts as content, so the folder holding it stays; the walk
        lists ancestors before descendants, so going through it backwards meets each
        folder after everything inside it.
        """
        self.require(caller, Perm.REMOVE)
        folder = await self.folder(caller, src_dir, password)
        folders = [
            (entry.path, visit)
            async for entry, visit in self.walker.walk(caller, folder, password)
            if visit is not None
        ]
        removed: set[str] = set()
        for path, visit in reversed(folders):
            if visit.withheld or any(e.path not in removed for e in visit.entries):
                continue
            if self.place(path).is_root:
                continue  # a storage's root is the storage page's business
            await self.tree.remove(path)
            removed.add(path)

    async def recursive_move(
        self, caller: Caller, src_dir: str, dst_dir: str, policy: str, password: str = ""
    ) -> int:
        """Move every file below ``src_dir`` flat into ``dst_dir``; the number moved."""
        self.require(caller, Perm.MOVE)
        src_folder = await self.folder(caller, src_dir, password)
        dst_folder = await self.folder(caller, dst_dir, password)
        src_place = self.place(src_folder)
        if not src_place.same_storage(self.place(dst_folder)):
            raise ServerError.across_storages()
        files = [
            entry.path
            async for entry, _ in self.walker.walk(caller, src_folder, password)
            if not entry.obj.is_dir
            and split_path(entry.path)[0] != dst_folder
            and self.place(entry.path).same_storage(src_place)
        ]
        taken = {o.name for o in (await self._fs.list_path(dst_folder, refresh=True))[0]}
        moves: builtins.list[str] = []
        for path in files:
            name = split_path(path)[1]
            if name in taken:
                if policy == "cancel":
                    raise FileExists(name)
                if policy == "skip":
                    continue
                # "overwrite" and any other policy replace, as AList does.
                await self._clear_way(self.place(f"{dst_folder}/{name}"), name, True)
            taken.add(name)
            moves.append(path)
        for path in moves:
            await self.tree.move(path, dst_folder)
        return len(moves)

    async def put(
        self,
        caller: Caller,
        path: str,
        password: str,
        stream: AsyncIterator[bytes],
        size: int | None,
        modified: datetime | None,
        overwrite: bool,
    ) -> Obj:
        """Store an upload at ``path``; nothing appears there until every byte has arrived."""
        place, _ = await self.upload_target(caller, path, password, overwrite)
        return await self.store(place, stream, size, modified, overwrite)

    async def store(
        self,
        place: Place,
        stream: AsyncIterator[bytes],
        size: int | None,
        modified: datetime | None,
        overwrite: bool,
    ) -> Obj:
        """Put an upload at a checked place; without ``overwrite`` a name taken
        meanwhile (by a racing upload) is refused as ``upload_target`` refuses it."""
        try:
            return await self.tree.put(place.path, stream, size, modified, overwrite=overwrite)
        except ObjectExists as exc:
            raise FileExists() from exc

    async def upload_target(
        self, caller: Caller, path: str, password: str, overwrite: bool
    ) -> tuple[Place, str]:
        """Where an upload to ``path`` goes, after every check an upload needs."""
        full = self._fs.resolve(caller, path)
        parent, name = split_path(full)
        validate_name(name)
        if not access.can_access(caller.user, self._metas.nearest(parent), parent, password):
            raise PermissionDenied()  # as in mkdir
        if not access.can_access(caller.user, self._metas.nearest(parent), full, password):
            raise PermissionDenied()
        if not self.can_write_in(caller, parent):
            raise PermissionDenied()
        await self._fs.confine(caller, full)
        place = self.place(full)
        if place.sub_path == "/":
            raise PermissionDenied()
        existing = await self.exists(place)
        if existing is not None and (existing.is_dir or not overwrite):
            raise FileExists()
        return place, name

    # --- helpers ------------------------------------------------------------------

    async def _pairs(
        self,
        caller: Caller,
        src_dir: str,
        dst_dir: str,
        names: builtins.list[str],
        overwrite: bool,
        password: str,
    ) -> builtins.list[tuple[str, str]]:
        """Checked (source path, destination folder) pairs; clashes refused up front."""
        if not names:
            raise BadRequest("Empty file names")
        src_folder = await self.folder(caller, src_dir, password)
        dst_folder = await self.folder(caller, dst_dir, password)
        pairs = []
        for name in names:
            src = await self.child(caller, src_folder, name, password)
            await self.child(caller, dst_folder, name, password)
            await self.walker.guard_whole(caller, src, password)
            pairs.append((src, dst_folder))
        if not overwrite:
            for name in names:
                if await self.exists(self.place(f"{dst_folder}/{name}")) is not None:
                    raise FileExists(name)
        return pairs

    async def _ready_to_copy(self, src: str, dst_folder: str, overwrite: bool) -> None:
        """The source is there, and with ``overwrite`` its namesake in the target is gone."""
        if await self.exists(self.place(src)) is None:
            raise ObjectNotFound(f"failed get src [{src}] file: object not found")
        if overwrite:
            name = split_path(src)[1]
            await self._clear_way(self.place(f"{dst_folder}/{name}"), name, True)

    async def _clear_way(self, place: Place, name: str, overwrite: bool) -> None:
        existing = await self.exists(place)
        if existing is None:
            return
        if not overwrite:
            raise FileExists(name)
        await self.tree.remove(place.path)
