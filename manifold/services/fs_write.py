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
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from manifold.drivers.base import validate_name
from manifold.errors import (
    BadRequest,
    FileExists,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    StorageNotFound,
)
from manifold.models import Obj, Perm
from manifold.services import access, patterns
from manifold.services.auth import Caller
from manifold.services.events import TreeEvents
from manifold.services.fs import FsService
from manifold.services.metas import MetaService
from manifold.services.storages import Mounted, StorageService
from manifold.services.walk import TreeWalker
from manifold.vfs.paths import clean_path, is_sub_path, split_path
from manifold.vfs.storage_ops import StorageOps

if TYPE_CHECKING:
    from manifold.services.tasks import Task, TaskService

CONFLICT_POLICIES = ("cancel", "skip", "overwrite")


@dataclass(slots=True)
class Place:
    """A virtual path resolved onto the storage that holds it."""

    path: str
    mounted: Mounted
    sub_path: str

    @property
    def ops(self) -> StorageOps:
        return self.mounted.require_ops()

    @property
    def mount_path(self) -> str:
        return self.mounted.storage.mount_path


def copy_task_name(src: Place, dst_folder: Place) -> str:
    return (
        f"copy [{src.mount_path}]({src.sub_path}) to [{dst_folder.mount_path}]"
        f"({dst_folder.sub_path})"
    )


class FsWriter:
    def __init__(
        self,
        fs: FsService,
        storages: StorageService,
        metas: MetaService,
        events: TreeEvents,
    ) -> None:
        self._fs = fs
        self._storages = storages
        self._metas = metas
        self.events = events
        self.walker = TreeWalker(fs, metas)
        self.tasks: TaskService | None = None

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
        resolved = self._storages.resolve(path)
        if resolved is None:
            if not self._storages.has_storages():
                raise StorageNotFound("storage not found; please add a storage first")
            raise StorageNotFound(f"failed get storage: storage not found; rawPath: {path}")
        return Place(path, resolved.target, resolved.sub_path)

    async def exists(self, place: Place) -> Obj | None:
        try:
            return await place.ops.get(place.sub_path)
        except ObjectNotFound:
            return None

    # --- operations ---------------------------------------------------------------

    async def mkdir(self, caller: Caller, path: str, password: str = "") -> Obj:
        full = self._fs.resolve(caller, path)
        parent, _ = split_path(full)
        self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        if not self.can_write_in(caller, parent):
            raise PermissionDenied()
        place = self.place(full)
        for name in place.sub_path.split("/"):
            if name:
                validate_name(name)  # missing parents are made too, existing ones checked alike
        obj = await place.ops.make_dir(place.sub_path)
        await self.events.created(full, obj)
        return obj

    async def rename(
        self, caller: Caller, path: str, name: str, overwrite: bool, password: str = ""
    ) -> Obj:
        self.require(caller, Perm.RENAME)
        full = self._fs.resolve(caller, path)
        self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        parent, _ = split_path(full)
        dst = await self.child(caller, parent, name, password)
        place = self._not_root(self.place(full), "rename")
        await self.walker.guard_whole(caller, full, password)
        if dst != full:
            await self._clear_way(self.place(dst), name, overwrite)
        obj = await place.ops.rename(place.sub_path, name)
        if dst != full:
            await self.events.moved(full, dst)
        return obj

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
        for src, dst, new in checked:
            place = self._not_root(self.place(src), "rename")
            await place.ops.rename(place.sub_path, new)
            await self.events.moved(src, dst)

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
            place, dst_place = self.place(src), self.place(dst_folder)
            self._not_root(place, "move")
            if place.mounted is not dst_place.mounted:
                raise ServerError("can't move files between two storages, try to copy")
            name = split_path(src)[1]
            if overwrite:
                await self._clear_way(self.place(f"{dst_folder}/{name}"), name, True)
            await place.ops.move(place.sub_path, dst_place.sub_path)
            await self.events.moved(src, clean_path(f"{dst_folder}/{name}"))

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
            name = split_path(src)[1]
            if await self.exists(place) is None:
                raise ObjectNotFound(f"failed get src [{src}] file: object not found")
            if overwrite:
                await self._clear_way(self.place(f"{dst_folder}/{name}"), name, True)
            same = place.mounted is dst_place.mounted
            if same and "copy" in place.ops.driver.capabilities():
                obj = await place.ops.copy(place.sub_path, dst_place.sub_path)
                await self.events.created(clean_path(f"{dst_folder}/{name}"), obj)
            else:
                tasks.append(await self.submit_copy(caller, src, dst_folder, password))
        return tasks

    async def submit_copy(
        self, caller: Caller | None, src: str, dst_folder: str, password: str = ""
    ) -> Task:
        """A copy task; it walks ``src`` as its creator with ``password``, as the request did."""
        if self.tasks is None:
            raise ServerError("tasks are not available")
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
            place = self.place(full)
            try:
                await place.ops.remove(place.sub_path)  # refuses a storage's root itself
            except ObjectNotFound:
                continue  # already gone: the caller's wish holds
            await self.events.removed(full)

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
            place = self.place(path)
            if place.sub_path == "/":
                continue  # a storage's root is the storage page's business
            await place.ops.remove(place.sub_path)
            await self.events.removed(path)
            removed.add(path)

    async def recursive_move(
        self, caller: Caller, src_dir: str, dst_dir: str, policy: str, password: str = ""
    ) -> int:
        """Move every file below ``src_dir`` flat into ``dst_dir``; the number moved."""
        self.require(caller, Perm.MOVE)
        src_folder = await self.folder(caller, src_dir, password)
        dst_folder = await self.folder(caller, dst_dir, password)
        src_place, dst_place = self.place(src_folder), self.place(dst_folder)
        if src_place.mounted is not dst_place.mounted:
            raise ServerError("can't move files between two storages, try to copy")
        files = [
            entry.path
            async for entry, _ in self.walker.walk(caller, src_folder, password)
            if not entry.obj.is_dir
            and split_path(entry.path)[0] != dst_folder
            and self.place(entry.path).mounted is src_place.mounted
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
            place = self.place(path)
            await place.ops.move(place.sub_path, dst_place.sub_path)
            await self.events.moved(path, clean_path(f"{dst_folder}/{split_path(path)[1]}"))
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
        parent, name = split_path(place.sub_path)
        try:
            obj = await place.ops.put(parent, name, stream, size, modified, overwrite=overwrite)
        except ObjectExists as exc:
            raise FileExists() from exc
        await self.events.created(place.path, obj)
        return obj

    async def upload_target(
        self, caller: Caller, path: str, password: str, overwrite: bool
    ) -> tuple[Place, str]:
        """Where an upload to ``path`` goes, after every check an upload needs."""
        full = self._fs.resolve(caller, path)
        parent, name = split_path(full)
        validate_name(name)
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

    async def _clear_way(self, place: Place, name: str, overwrite: bool) -> None:
        existing = await self.exists(place)
        if existing is None:
            return
        if not overwrite:
            raise FileExists(name)
        await place.ops.remove(place.sub_path)
        await self.events.removed(place.path)

    @staticmethod
    def _not_root(place: Place, action: str) -> Place:
        if place.sub_path == "/":
            raise ServerError(f"can't {action} a storage's root folder; edit the storage instead")
        return place
