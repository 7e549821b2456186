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

import builtins
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from manifold.concurrency import CPU_POOL, run_in
from manifold.drivers.base import NativeParts, Upload
from manifold.errors import (
    BadRequest,
    FileExists,
    ManifoldError,
    NameTooLong,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    ParentNotFound,
    PermissionDenied,
    ServerError,
)
from manifold.models import Obj, Perm, Task, TaskState, User
from manifold.paths import (
    MAX_NAME_BYTES,
    clean_path,
    has_unsafe_chars,
    is_sub_path,
    name_bytes,
    split_path,
    validate_name,
    validate_new_name,
)
from manifold.policy import access, patterns
from manifold.services.admin.metas import MetaService
from manifold.services.auth.service import Caller
from manifold.services.fs import rules
from manifold.services.fs.read import GuardedReader
from manifold.services.fs.rules import Replace
from manifold.services.fs.tree import FileTree, Place, copy_task_name, move_task_name
from manifold.services.fs.walk import TreeWalker
from manifold.services.runner import Recheck, TaskService

CONFLICT_POLICIES = ("cancel", "skip", "overwrite")


class GuardedWriter:
    """Changes for a caller in AList's request shapes, each after its checks."""

    def __init__(self, fs: GuardedReader, metas: MetaService, tasks: TaskService) -> None:
        self._fs = fs
        self.tree: FileTree = fs.tree
        self._metas = metas
        self.walker = TreeWalker(fs, metas)
        self.tasks = tasks

    # --- checks -------------------------------------------------------------------

    async def folder(self, caller: Caller, path: str, password: str = "") -> str:
        """The full path of a folder the caller names, after the access check."""
        full = self._fs.resolve(caller, path)
        await self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        return full

    async def child(self, caller: Caller, folder: str, name: str, password: str = "") -> str:
        """``folder/name`` for a client-supplied ``name`` that must be one segment."""
        validate_name(name)
        full = clean_path(f"{folder}/{name}")
        if split_path(full) != (folder, name) or not is_sub_path(caller.base, full):
            raise PermissionDenied()
        await self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        return full

    @staticmethod
    def require(caller: Caller, perm: Perm) -> None:
        if not caller.user.can(perm):
            raise PermissionDenied()

    def can_write_in(self, caller: Caller, folder: str) -> bool:
        """The user's write bit, or a meta that lets anyone write in ``folder``."""
        return access.can_write(caller.user, self._metas.nearest(folder), folder)

    async def check_change(self, caller: Caller, path: str, password: str = "") -> None:
        """Refuse a change of the object at ``path`` itself that leaves its bytes and
        name alone (WebDAV's dead properties, a lock) unless the caller may write
        there: as a write into its folder is checked, by the write bit or a meta."""
        await self._writable(caller, self._fs.resolve(caller, path), password)

    async def _writable(self, caller: Caller, full: str, password: str) -> None:
        """Refuse a write at ``full`` unless the caller may reach it and its folder
        (a password without p_sub, or a hide rule, guards a folder's contents against
        writes too) and may write in that folder."""
        parent, _ = split_path(full)
        await self._fs.check_access(caller, parent, password)
        await self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        if not self.can_write_in(caller, parent):
            raise PermissionDenied()

    def place(self, path: str) -> Place:
        return self.tree.place(path)

    async def exists(self, place: Place) -> Obj | None:
        return await self.tree.exists(place)

    async def require_parent(self, full: str) -> None:
        """``ParentNotFound`` unless the folder holding ``full`` exists: a protocol's
        strict write never makes missing folders on the way, as the JSON API does."""
        parent = split_path(full)[0]
        try:
            obj, _ = await self.tree.lookup(parent)
        except ManifoldError as exc:
            if isinstance(exc, ObjectNotFound):  # StorageNotFound is no subclass
                raise ParentNotFound() from exc
            raise
        if not obj.is_dir:
            raise ParentNotFound()

    # --- operations ---------------------------------------------------------------

    async def mkdir(
        self, caller: Caller, path: str, password: str = "", *, strict: bool = False
    ) -> Obj:
        """Make the folder ``path`` and any missing parents; an existing folder is
        fine. ``strict`` (a protocol's MKCOL, MKD): ``ObjectExists`` for a taken path,
        ``ParentNotFound`` for a missing parent."""
        full = self._fs.resolve(caller, path)
        await self._writable(caller, full, password)
        await self._refuse_unsafe_new(full)
        if strict:
            if await self.tree.exists(self.place(full)) is not None:
                raise ObjectExists()
            await self.require_parent(full)
        return await self.tree.make_dir(full)

    async def rename(
        self, caller: Caller, path: str, name: str, overwrite: bool, password: str = ""
    ) -> Obj | Task:
        """Rename at once; a folder of a storage that moves folders key by key (S3) as a
        move task, which is returned once submitted."""
        self.require(caller, Perm.RENAME)
        full = self._fs.resolve(caller, path)
        parent, old_name = split_path(full)
        await self._fs.check_access(caller, parent, password)  # as in mkdir
        await self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        if name != old_name:
            validate_new_name(name)
        dst = await self.child(caller, parent, name, password)
        self.tree.refuse_root(self.place(full), "rename")
        await self.walker.guard_whole(caller, full, password)
        await self._decide(caller, full, dst, Replace.of(overwrite), password)
        if dst != full and not await self.tree.moves_at_once(full, parent):
            return await self._move_task(caller, full, dst, password, overwrite)
        return await self.tree.rename_to(full, dst, overwrite)

    async def move_to(
        self,
        caller: Caller,
        src: str,
        dst: str,
        replace: Replace,
        password: str = "",
        *,
        strict: bool = False,
    ) -> Obj:
        """Give ``src`` the full path ``dst`` (a protocol's MOVE): the move bit to change
        folders, the rename bit to change names, and what stands at ``dst`` replaced
        only as ``replace`` and the rule book allow. What a move task does (to another
        storage; a folder of S3) runs as one, and this returns once it has ended.
        ``strict``: ``ParentNotFound`` when the folder of ``dst`` is missing."""
        full, target = await self._ends(caller, src, dst, password)
        if strict:
            await self.require_parent(target)
        (src_dir, name), (dst_dir, new_name) = split_path(full), split_path(target)
        if src_dir != dst_dir:
            self.require(caller, Perm.MOVE)
        if name != new_name:
            self.require(caller, Perm.RENAME)
        self.tree.refuse_root(self.place(full), "move" if src_dir != dst_dir else "rename")
        itself, existing = await self._decide(caller, full, target, replace, password)
        overwrite = existing is not None
        if itself or await self.tree.moves_at_once(full, dst_dir):
            return await self.tree.rename_to(full, target, overwrite)
        task = await self._move_task(caller, full, target, password, overwrite)
        ended = await self.tasks.wait_done(task.id)
        if ended.state != TaskState.SUCCEEDED:
            raise ServerError(ended.error or "the move did not finish")
        return (await self.tree.lookup(target))[0]

    async def copy_to(
        self,
        caller: Caller,
        src: str,
        dst: str,
        replace: Replace,
        password: str = "",
        *,
        strict: bool = False,
        shallow: bool = False,
        source: Caller | None = None,
    ) -> Obj:
        """Copy ``src`` to the full path ``dst`` and return the copy once it is whole,
        replacing what stands there only as ``replace`` and the rule book allow;
        ``strict``: ``ParentNotFound`` when the folder of ``dst`` is missing;
        ``shallow``: a folder is copied without its contents; ``source``: the same
        user held in another root, that ``src`` is named in."""
        self.require(caller, Perm.COPY)
        if source is not None and source.user != caller.user:
            raise PermissionDenied()
        full, target = await self._ends(caller, src, dst, password, source)
        if strict:
            await self.require_parent(target)
        self.tree.refuse_root(self.place(full), "copy")
        itself, existing = await self._decide(caller, full, target, replace, password)
        if itself:
            return (await self.tree.lookup(full))[0]
        if shallow and (await self.tree.lookup(full))[0].is_dir:
            if existing is not None:
                await self.tree.remove(target)
            return await self.tree.make_dir(target)
        return await self.tree.copy_to(full, target, existing is not None)

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
                await self.child(
                    caller, folder, new if new == old else validate_new_name(new), password
                ),
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
            regex = await run_in(CPU_POOL, patterns.Pattern, pattern)
        except patterns.PatternError as exc:
            raise ServerError(str(exc)) from None
        replacement = patterns.Template(template, regex)
        # Only names the caller can reach are matched; every new name is worked out (and
        # a too long one refused) before any rename.
        visit = await self.walker.visit(caller, folder, password, refresh=False)
        names = [entry.obj.name for entry in visit.entries]
        pairs = await run_in(CPU_POOL, patterns.renames, regex, replacement, names)
        await self.batch_rename(caller, src_dir, pairs, password)

    async def move(
        self,
        caller: Caller,
        src_dir: str,
        dst_dir: str,
        names: builtins.list[str],
        overwrite: bool,
        password: str = "",
    ) -> builtins.list[Task]:
        """Move within a storage at once; to another storage, and a folder of a storage
        that moves folders key by key (S3), as one move task per name."""
        self.require(caller, Perm.MOVE)
        replace = Replace.of(overwrite)
        pairs = await self._pairs(caller, src_dir, dst_dir, names, replace, password)
        for src, _ in pairs:
            self.tree.refuse_root(self.place(src), "move")
        tasks: builtins.list[Task] = []
        # Every name is checked before the first moves: none lands in itself.
        for src, dst in await self._targets(pairs):
            if await self.tree.moves_at_once(src, split_path(dst)[0]):
                await self.tree.rename_to(src, dst, overwrite)
                continue
            tasks.append(await self._move_task(caller, src, dst, password, overwrite))
        return tasks

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
        merge = Replace(files=overwrite, merge=overwrite)
        pairs = await self._pairs(caller, src_dir, dst_dir, names, merge, password)
        for src, _ in pairs:
            self.tree.refuse_root(self.place(src), "copy")
            await self._source_exists(src)
        tasks: builtins.list[Task] = []
        for src, dst in await self._targets(pairs):
            dst_folder = split_path(dst)[0]
            # A folder copied onto a folder merges into it (a copy task's way: each
            # level made if missing, each file put over its namesake).
            existing = await self.exists(self.place(dst)) if overwrite else None
            merging = existing is not None and existing.is_dir
            native = self.tree.copies_natively(self.place(src), self.place(dst_folder))
            if native and not merging:
                await self.tree.copy_to(src, dst, overwrite)
                continue
            if overwrite and not merging:
                await self._clear_for_task(src, dst)
            tasks.append(await self.submit_copy(caller, src, dst_folder, password, overwrite))
        return tasks

    async def copy_now(
        self, caller: Caller, src: str, dst_dir: str, overwrite: bool, password: str = ""
    ) -> Obj:
        """Copy one path into ``dst_dir`` and return once the copy is whole, across
        storages too (the protocol servers answer a copy only when it is done)."""
        self.require(caller, Perm.COPY)
        src_dir, name = split_path(clean_path(src))
        [(full, dst_folder)] = await self._pairs(
            caller, src_dir, dst_dir, [name], Replace.of(overwrite), password
        )
        self.tree.refuse_root(self.place(full), "copy")
        await self._source_exists(full)
        return await self.tree.copy_to(full, clean_path(f"{dst_folder}/{name}"), overwrite)

    async def submit_copy(
        self,
        caller: Caller | None,
        src: str,
        dst_folder: str,
        password: str = "",
        overwrite: bool = False,
    ) -> Task:
        """A copy task; it walks ``src`` as its creator with ``password``, as the request
        did, and replaces files at the destination only when the request asked it to
        (a file made there meanwhile, before a late start or a retry, is kept)."""
        creator = caller.user if caller is not None else None
        name = copy_task_name(self.place(src), self.place(dst_folder))
        payload: dict[str, Any] = {"src": src, "dst_dir": dst_folder}
        if password:
            payload["password"] = password
        if overwrite:
            payload["overwrite"] = True
        return await self.tasks.submit("copy", name, creator, payload)

    async def submit_move(
        self,
        caller: Caller | None,
        src: str,
        dst: str,
        password: str = "",
        overwrite: bool = False,
    ) -> Task:
        """A move task of ``src`` to the full path ``dst``; it walks ``src`` as its
        creator with ``password``, and replaces files only when asked to, as a copy
        task does."""
        creator = caller.user if caller is not None else None
        dst_folder, name = split_path(dst)
        title = move_task_name(self.place(src), self.place(dst_folder), name)
        payload: dict[str, Any] = {"src": src, "dst_dir": dst_folder}
        if name != split_path(src)[1]:
            payload["name"] = name
        if password:
            payload["password"] = password
        if overwrite:
            payload["overwrite"] = True
        return await self.tasks.submit("move", title, creator, payload)

    async def remove(
        self,
        caller: Caller,
        dir: str,
        names: builtins.list[str],
        password: str = "",
        *,
        strict: bool = False,
    ) -> None:
        """Remove ``names`` from ``dir``; a missing one is skipped (AList's way), or
        with ``strict`` refused as ``ObjectNotFound`` before anything is removed."""
        self.require(caller, Perm.REMOVE)
        if not names:
            raise BadRequest("Empty file names")
        folder = await self.folder(caller, dir, password)
        targets = [await self.child(caller, folder, name, password) for name in names]
        if strict:
            for full in targets:
                if await self.exists(self.place(full)) is None:
                    raise ObjectNotFound()
        for full in targets:
            await self.walker.guard_whole(caller, full, password, links=False)
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
            if self.tree.left_out(path):
                continue  # entries left out of its listing for their names are content
            if self.place(path).is_root:
                continue  # a storage's root is the storage page's business
            await self.tree.remove(path)
            removed.add(path)

    async def recursive_move(
        self, caller: Caller, src_dir: str, dst_dir: str, policy: str, password: str = ""
    ) -> tuple[int, builtins.list[Task]]:
        """Move every file below ``src_dir`` flat into ``dst_dir``: the number moved,
        and, into another storage, the move task of each (none moved yet)."""
        self.require(caller, Perm.MOVE)
        src_folder = await self.folder(caller, src_dir, password)
        dst_folder = await self.folder(caller, dst_dir, password)
        src_place = self.place(src_folder)
        files = [
            entry.path
            async for entry, _ in self.walker.walk(caller, src_folder, password)
            if not entry.obj.is_dir
            and split_path(entry.path)[0] != dst_folder
            and self.place(entry.path).same_storage(src_place)
        ]
        present = (await self._fs.list_path(dst_folder, refresh=True))[0]
        taken = {o.name for o in present}
        folders = {o.name for o in present if o.is_dir}
        # A file that a clash would replace goes only as the rule book lets it go.
        kept = {o.name for o in present if not rules.may_replace(caller.user, o)}
        withheld = {
            name for name in taken if not self._may_enter(caller, dst_folder, name, password)
        }
        # Every clash is decided before the first move; a name moved earlier in this
        # request counts as taken. "overwrite" and any other policy replace a file, as
        # AList does; a folder is never replaced by a file (AList's rename fails there).
        # A name withheld from the caller is never touched: the file stays where it is.
        moves: builtins.list[str] = []
        for path in files:
            name = split_path(path)[1]
            if name in withheld:
                continue
            if name in taken:
                if policy == "skip":
                    continue
                if policy == "cancel" or name in folders:
                    raise FileExists(name)
                if name in kept:
                    raise PermissionDenied()
            taken.add(name)
            moves.append(path)
        pairs = [(path, clean_path(f"{dst_folder}/{split_path(path)[1]}")) for path in moves]
        if not src_place.same_storage(self.place(dst_folder)):
            # A name free now is kept free for the task's file only where clashes replace.
            replace = policy not in ("cancel", "skip")
            return 0, [await self.submit_move(caller, *pair, password, replace) for pair in pairs]
        for path, dst in pairs:
            await self.tree.rename_to(path, dst, replace=True)
        return len(moves), []

    async def put(
        self,
        caller: Caller,
        path: str,
        password: str,
        stream: AsyncIterator[bytes],
        size: int | None,
        modified: datetime | None,
        overwrite: bool,
        *,
        strict: bool = False,
        native: NativeParts | None = None,
    ) -> Obj:
        """Store an upload at ``path``; nothing appears there until every byte has
        arrived. ``strict``: ``ParentNotFound`` under a missing folder. ``native``:
        the bytes are the parts of the storage's own multipart upload."""
        place, _ = await self.upload_target(caller, path, password, overwrite, strict=strict)
        return await self.store(place, stream, size, modified, overwrite, native)

    async def direct_upload(
        self, caller: Caller, path: str, password: str, size: int, overwrite: bool
    ) -> dict[str, Any]:
        """How a browser uploads ``path`` straight to its storage (a signed URL for that
        one object), after every check ``put`` makes; ``NotSupported`` where the
        storage takes no direct uploads."""
        place, _ = await self.upload_target(caller, path, password, overwrite)
        if not place.ops.direct_upload_tools():
            raise NotSupported("not implement")
        folder = split_path(place.path)[0]
        if split_path(place.sub_path)[0] != "/":
            await self.tree.make_dir(folder)  # as a put makes the folders on its way
        return await place.ops.direct_upload_info(place.sub_path, size)

    async def store(
        self,
        place: Place,
        stream: AsyncIterator[bytes],
        size: int | None,
        modified: datetime | None,
        overwrite: bool,
        native: NativeParts | None = None,
    ) -> Obj:
        """Put an upload at a checked place; without ``overwrite`` a name taken
        meanwhile (by a racing upload) is refused as ``upload_target`` refuses it."""
        try:
            folder, name = split_path(place.path)
            upload = Upload(name, stream, size, modified, overwrite, native=native)
            return await self.tree.put(folder, upload)
        except ObjectExists as exc:
            raise FileExists() from exc

    async def upload_target(
        self, caller: Caller, path: str, password: str, overwrite: bool, *, strict: bool = False
    ) -> tuple[Place, str]:
        """Where an upload to ``path`` goes, after every check an upload needs."""
        full = self._fs.resolve(caller, path)
        parent, name = split_path(full)
        validate_new_name(name)
        await self._refuse_unsafe_new(parent)  # the folders a put makes on its way
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
        if strict:
            await self.require_parent(full)
        try:
            await rules.destination(self.tree, caller.user, full, Replace.of(overwrite), None)
        except FileExists:
            raise FileExists() from None  # AList's put says only "file exists"
        return place, name

    # --- tasks run again: the checks their request passed, for the user as they are now

    async def recheck_path(self, caller: Caller, full: str, password: str = "") -> None:
        """What ``folder`` and ``child`` check, for a path already joined to a base path."""
        if not is_sub_path(caller.base, full):
            raise PermissionDenied()
        await self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)

    def task_recheck(
        self,
        perm: Perm | None,
        *paths: str,
        write_into: str = "",
        with_password: bool = False,
        unlock_with: str = "",
    ) -> Recheck:
        """A task kind's re-check (``TaskService.register``): the creator still has
        ``perm``, may reach the payload's ``paths`` and may write into ``write_into``
        (with the folder password the payload keeps, ``with_password``; or, for
        ``write_into`` alone, the one it keeps under the key ``unlock_with``, where
        ``password`` is something else, as an extraction's archive password)."""

        async def check(user: User, payload: dict[str, Any]) -> None:
            caller = Caller(user, "")
            if perm is not None:
                self.require(caller, perm)
            password = str(payload.get("password", "")) if with_password else ""
            for key in paths:
                await self.recheck_path(caller, str(payload[key]), password)
            if write_into:
                folder = str(payload[write_into])
                if unlock_with:
                    password = str(payload.get(unlock_with, ""))
                await self.recheck_path(caller, folder, password)
                if not self.can_write_in(caller, folder):
                    raise PermissionDenied()

        return check

    # --- helpers ------------------------------------------------------------------

    async def _pairs(
        self,
        caller: Caller,
        src_dir: str,
        dst_dir: str,
        names: builtins.list[str],
        replace: Replace,
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
            dst = await self.child(caller, dst_folder, name, password)
            await self.walker.guard_whole(caller, src, password, self._carries_links(src, dst))
            pairs.append((src, dst_folder))
        # Every name is decided before the first changes (AList: taken names first).
        for src, _ in pairs:
            dst = clean_path(f"{dst_folder}/{split_path(src)[1]}")
            if not replace.files and await self.exists(self.place(dst)) is not None:
                await self.tree.is_itself(src, dst)  # an overlap answers as such
                raise FileExists(split_path(dst)[1])
        for src, _ in pairs:
            dst = clean_path(f"{dst_folder}/{split_path(src)[1]}")
            await self._decide(caller, src, dst, replace, password)
        return pairs

    async def _ends(
        self, caller: Caller, src: str, dst: str, password: str, source: Caller | None = None
    ) -> tuple[str, str]:
        """The checked full paths of a source (named by ``source``, else ``caller``) and
        of the new path it is to have."""
        reader = source or caller
        src_dir, name = split_path(clean_path(src))
        dst_dir, new_name = split_path(clean_path(dst))
        full = await self.child(
            reader, await self.folder(reader, src_dir, password), name, password
        )
        dst_folder = await self.folder(caller, dst_dir, password)
        if new_name != name:
            validate_new_name(new_name)
        target = await self.child(caller, dst_folder, new_name, password)
        await self.walker.guard_whole(reader, full, password, self._carries_links(full, target))
        return full, target

    def _carries_links(self, src: str, dst: str) -> bool:
        """Whether moving or copying ``src`` to ``dst`` takes its links along as links:
        within one storage its driver does it; between two the bytes are walked, and a
        walk never follows a link out."""
        return self.place(src).same_storage(self.place(dst))

    async def _targets(
        self, pairs: builtins.list[tuple[str, str]]
    ) -> builtins.list[tuple[str, str]]:
        """(source, destination path) of each pair, leaving out the sources that are their
        own destination; ``ServerError`` for any that would land inside itself."""
        targets = []
        for src, dst_folder in pairs:
            dst = clean_path(f"{dst_folder}/{split_path(src)[1]}")
            if not await self.tree.is_itself(src, dst):
                targets.append((src, dst))
        return targets

    async def _refuse_unsafe_new(self, full: str) -> None:
        """``validate_new_name`` for each segment of ``full`` it would refuse (a control
        character, over ``MAX_NAME_BYTES`` bytes) that does not exist yet: each folder a
        ``mkdir -p`` or an upload would make. A long name a back end holds (S3 keeps
        longer ones) stays usable."""
        segments = full.split("/")
        for depth, segment in enumerate(segments):
            if segment and (has_unsafe_chars(segment) or name_bytes(segment) > MAX_NAME_BYTES):
                place = self.tree.find("/".join(segments[: depth + 1]))
                if place is not None and await self._missing(place):
                    validate_new_name(segment)

    async def _missing(self, place: Place) -> bool:
        """Whether nothing is at ``place``: a back end that cannot even look the name up
        (a file system's "name too long") holds nothing there."""
        try:
            return await self.exists(place) is None
        except NameTooLong:
            return True

    async def _clear_for_task(self, src: str, dst: str) -> None:
        """Make way for a copy task to ``dst`` (a different object: ``_targets`` dropped
        the source itself). A file over a file is left to the task, whose ``put``
        replaces it only once the copy is whole; a folder on either side goes first."""
        existing = await self.exists(self.place(dst))
        if existing is None:
            return
        source = await self.exists(self.place(src))
        if existing.is_dir or (source is not None and source.is_dir):
            await self.tree.refuse_holding(dst, src)
            await self.tree.remove(dst)

    async def _move_task(
        self, caller: Caller, src: str, dst: str, password: str, overwrite: bool
    ) -> Task:
        """A move task for a checked ``src``, after making way as a copy task's does."""
        await self._source_exists(src)
        if overwrite:
            await self._clear_for_task(src, dst)
        return await self.submit_move(caller, src, dst, password, overwrite)

    async def _source_exists(self, src: str) -> Obj:
        found = await self.exists(self.place(src))
        if found is None:
            raise ObjectNotFound(f"failed get src [{src}] file: object not found")
        return found

    async def _decide(
        self, caller: Caller, src: str, dst: str, replace: Replace, password: str
    ) -> tuple[bool, Obj | None]:
        """The rule book's answer for putting ``src`` at ``dst``: whether ``dst`` is the
        source itself, and what stands there to be replaced. A folder that is to go must
        be removable whole by the caller, as a remove checks it."""
        if await self.tree.is_itself(src, dst):
            return True, None
        source = await self._source_exists(src)
        existing = await rules.destination(self.tree, caller.user, dst, replace, source)
        if existing is not None:
            await self.walker.guard_whole(caller, dst, password, links=False)
        return False, existing

    def _may_enter(self, caller: Caller, folder: str, name: str, password: str) -> bool:
        """Whether the caller may reach ``folder/name`` (its hide rules and passwords)."""
        path = clean_path(f"{folder}/{name}")
        return access.can_access(caller.user, self._metas.nearest(path), path, password)
