"""The one unchecked file tree: virtual paths in, driver calls out.

Every operation on the tree, from any front end, ends here after its permission
check, and so do the drivers that serve other mounts (Alias, as in AList where
Alias calls the fs layer directly). The tree owns what must be written once:

* resolving a virtual path to the storage holding it (``place``), with one
  vocabulary of errors in AList's texts;
* refusing to rename, move, copy or remove a storage's root (``refuse_root``);
* telling ``TreeEvents`` after each change (the search index listens);
* copying: within a storage by the driver when it can, across storages by
  streaming one file (``copy_file``) and making one folder level at a time, which
  both the synchronous copy and the copy task drive.

No user permission is checked here: callers pass paths they already allowed.
Listings cached per storage are patched by ``StorageOps`` itself.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from manifold.drivers.base import FOLDER_MOVE, Upload
from manifold.errors import (
    ManifoldError,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    StorageNotFound,
)
from manifold.models import DiskUsage, Link, LinkArgs, Obj
from manifold.paths import child_path, clean_path, split_path, validate_name
from manifold.services.admin.storages import Mounted, StorageService
from manifold.services.fs import placing
from manifold.services.fs.events import TreeEvents
from manifold.services.fs.parking import ParkingJournal
from manifold.services.fs.redirects import LinkClient
from manifold.services.fs.streams import link_stream, open_range
from manifold.vfs.memo import DerivedMemo
from manifold.vfs.storage_ops import StorageOps

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Merged lists (real entries plus virtual mount folders) kept at once, in objects.
_MERGED_BUDGET = 200_000
# How many folder levels below the copied folder a copy between storages goes (as deep
# as a walk goes).
COPY_DEPTH = 256

Stream = AsyncIterator[bytes]


@dataclass(frozen=True, slots=True)
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

    @property
    def is_root(self) -> bool:
        return self.sub_path == "/"

    def same_storage(self, other: Place) -> bool:
        return self.mounted is other.mounted


class CopyTooDeep(ServerError):
    """A copy between storages past ``COPY_DEPTH`` levels: each level costs a lookup of
    its whole path on both sides, so a tree that deep is refused rather than copied."""

    default_message = f"copy too deep: more than {COPY_DEPTH} folder levels between storages"


def refuse_too_deep(depth: int) -> None:
    """``CopyTooDeep`` for a folder ``depth`` levels below the folder being copied."""
    if depth > COPY_DEPTH:
        raise CopyTooDeep()


def copy_task_name(src: Place, dst_folder: Place) -> str:
    return (
        f"copy [{src.mount_path}]({src.sub_path}) to [{dst_folder.mount_path}]"
        f"({dst_folder.sub_path})"
    )


def move_task_name(src: Place, dst_folder: Place, name: str = "") -> str:
    """OpenList's name for a move task; a rename on the way adds the new name."""
    title = (
        f"move [{src.mount_path}]({src.sub_path}) to [{dst_folder.mount_path}]"
        f"({dst_folder.sub_path})"
    )
    return f"{title} as {name}" if name and name != split_path(src.path)[1] else title


class FileTree:
    """The unchecked tree: callers (the ``Guarded*`` services, Alias) allowed the paths."""

    def __init__(
        self,
        storages: StorageService,
        events: TreeEvents | None = None,
        http: LinkClient | None = None,
    ) -> None:
        self._storages = storages
        self.events = events or TreeEvents()
        self._http = http
        self._merged: DerivedMemo[builtins.list[Obj]] = DerivedMemo(_MERGED_BUDGET)
        # What ``placing`` parks is recorded here (by the container: in the database).
        self.parkings = ParkingJournal()

    # --- resolution ---------------------------------------------------------------

    def find(self, path: str) -> Place | None:
        """The storage holding ``path``, or None where no storage does (virtual folders).

        A storage still starting is found too (its loading placeholder): its paths
        answer ``storage not init: loading``, never through a parent mount or as
        "storage not found"; the others answer as usual meanwhile.
        """
        resolved = self._storages.resolve(path)
        if resolved is None:
            return None
        return Place(path, resolved.target, resolved.sub_path)

    async def ready(self, path: str) -> None:
        """Wait while the storage holding ``path`` is starting (background work only:
        a request is answered at once)."""
        await self._storages.ready(path)

    def place(self, path: str) -> Place:
        """The storage holding ``path``; AList's "storage not found" errors otherwise."""
        found = self.find(path)
        if found is None:
            raise self.missing(path)
        return found

    def missing(self, path: str) -> StorageNotFound:
        if not self._storages.has_storages():
            return StorageNotFound.none_added()
        return StorageNotFound.at(path)

    @staticmethod
    def refuse_root(place: Place, action: str) -> Place:
        """Renaming, moving, copying or removing a whole storage is the storage page's job."""
        if place.is_root:
            if action == "remove":
                raise ServerError.root_removal()
            raise ServerError.root_change(action)
        return place

    # --- reads ----------------------------------------------------------------------

    async def listing(self, path: str, refresh: bool = False) -> tuple[builtins.list[Obj], str]:
        """Entries of a virtual folder (the storage's, then virtual mount folders) and
        the name of the driver serving it. The list is shared: never change it."""
        found = self.find(path)
        names = tuple(self._storages.virtual_children(path))
        if found is None:
            if not names:
                raise self.missing(path)
            return [self._virtual(path, name) for name in names], "unknown"
        objs = await found.ops.list(found.sub_path, refresh)
        if names:
            objs = self._merged.derive(
                ("merged", path, names), objs, lambda: self._merge(path, objs, names), len
            )
        return objs, found.mounted.storage.driver

    async def lookup(self, path: str) -> tuple[Obj, str]:
        """The object at ``path`` and the name of the driver serving it."""
        found = self.find(path)
        if found is not None:
            try:
                obj = await found.ops.get(found.sub_path)
            except ObjectNotFound:
                if not self._storages.virtual_children(path):
                    raise
            else:
                if found.is_root:
                    obj = replace(obj, name=split_path(path)[1])
                return obj, found.mounted.storage.driver
        if path == "/":
            # AList's root with no storage at "/": named "root", of the zero time.
            return Obj(name="root", size=0, is_dir=True, modified=_EPOCH), "unknown"
        if self._storages.virtual_children(path):
            parent, name = split_path(path)
            return self._virtual(parent, name), "unknown"
        raise self.missing(path)

    def left_out(self, path: str) -> int:
        """How many entries of the folder ``path`` its last listing left out for their
        names (``vfs.names``): a folder holding any is not empty, whatever it lists."""
        found = self.find(path)
        return 0 if found is None else found.ops.left_out(found.sub_path)

    async def exists(self, place: Place) -> Obj | None:
        try:
            return await place.ops.get(place.sub_path)
        except ObjectNotFound:
            return None

    def pool_for(self, link: Link) -> LinkClient | None:
        """The pool that fetches ``link``'s URL: the server's own, or its sibling without
        certificate checks for a link of a storage whose admin turned them off
        (``Link.verify``); None for a tree built without a pool (a read then makes its
        own client). Both follow redirects only as ``redirects`` allows."""
        if self._http is None or link.verify:
            return self._http
        return self._http.unverified()

    async def link(self, path: str, args: LinkArgs) -> tuple[Obj, Link, str]:
        """How to fetch the bytes of the file at ``path``."""
        place = self.place(path)
        obj, link = await place.ops.link(place.sub_path, args)
        return obj, link, place.mounted.storage.driver

    async def other(self, path: str, method: str, data: Any) -> Any:
        place = self.place(path)
        return await place.ops.other(place.sub_path, method, data)

    async def space(self, path: str) -> DiskUsage:
        """The space of the storage holding ``path`` (``StorageOps.space``); a folder
        that only holds mount points belongs to no storage and has none."""
        place = self.find(path)
        if place is None:
            raise NotSupported("no storage holds this folder")
        return await place.ops.space()

    def _virtual(self, folder: str, name: str) -> Obj:
        """A folder that exists because storages are mounted below it."""
        modified = self._storages.modified_below(clean_path(f"{folder}/{name}"))
        return Obj(name=name, size=0, is_dir=True, modified=modified or _EPOCH)

    def _merge(
        self, path: str, objs: builtins.list[Obj], virtual: tuple[str, ...]
    ) -> builtins.list[Obj]:
        """Real entries, then virtual folders; a real entry hides a virtual namesake."""
        taken = {o.name for o in objs}
        return objs + [self._virtual(path, name) for name in virtual if name not in taken]

    # --- writes ---------------------------------------------------------------------

    async def make_dir(self, path: str) -> Obj:
        """Create folder ``path`` and any missing parents; an existing folder is fine."""
        place = self.place(path)
        for name in place.sub_path.split("/"):
            if name:
                validate_name(name)
        obj = await place.ops.make_dir(place.sub_path)
        await self.events.created(path, obj)
        return obj

    async def rename(self, path: str, new_name: str) -> Obj:
        place = self.refuse_root(self.place(path), "rename")
        obj = await place.ops.rename(place.sub_path, validate_name(new_name))
        renamed = clean_path(f"{split_path(path)[0]}/{new_name}")
        if renamed != path:
            await self.events.moved(path, renamed)
        return obj

    async def move(self, path: str, dst_dir: str) -> Obj:
        place = self.refuse_root(self.place(path), "move")
        target = self.place(dst_dir)
        if not place.same_storage(target):
            raise ServerError.across_storages()
        obj = await place.ops.move(place.sub_path, target.sub_path)
        await self.events.moved(path, clean_path(f"{dst_dir}/{split_path(path)[1]}"))
        return obj

    def moves_over(self, path: str, dst: str) -> bool:
        """Whether the storage holding both ``path`` and ``dst`` replaces a file by a
        move in one step (its driver has ``move_over``)."""
        src = self.place(path)
        return src.same_storage(self.place(dst)) and "move_over" in src.ops.driver.capabilities()

    async def move_over(self, path: str, dst: str) -> Obj:
        """Give the file ``path`` the full path ``dst`` of the same storage, replacing
        the file there in one step (``Driver.move_over``)."""
        place = self.refuse_root(self.place(path), "move")
        target = self.refuse_root(self.place(dst), "move")
        if not place.same_storage(target):
            raise ServerError.across_storages()
        obj = await place.ops.move_over(place.sub_path, target.sub_path)
        await self.events.removed(dst)
        await self.events.moved(path, dst)
        return obj

    async def moves_at_once(self, path: str, dst_dir: str) -> bool:
        """Whether moving ``path`` into ``dst_dir`` is one step of one storage: a file,
        or a folder where the storage holding it (an Alias's: its target's) promises
        ``FOLDER_MOVE``. Otherwise it is a move task's work."""
        src = self.place(path)
        if not src.same_storage(self.place(dst_dir)):
            return False
        held = self.find(await placing.backing_path(self, path))
        if held is None or FOLDER_MOVE in held.ops.driver.promises():
            return True
        obj = await self.exists(src)
        return obj is None or not obj.is_dir

    async def move_listed(self, path: str, obj: Obj, dst_dir: str, folder: Obj) -> Obj:
        """``move`` of a file as its listing gave it (``obj``) into a folder as it was
        made (``folder``), both of one storage (``StorageOps.move_listed``)."""
        place = self.refuse_root(self.place(path), "move")
        target = self.place(dst_dir)
        if not place.same_storage(target):
            raise ServerError.across_storages()
        moved = await place.ops.move_listed(place.sub_path, obj, target.sub_path, folder)
        await self.events.moved(path, child_path(dst_dir, obj.name))
        return moved

    async def rename_to(self, path: str, dst: str, replace: bool = False) -> Obj:
        """Give the object at ``path`` the full path ``dst`` (``placing.rename_to``)."""
        return await placing.rename_to(self, path, dst, replace)

    async def copy_to(self, path: str, dst: str, replace: bool = False) -> Obj:
        """Copy the object at ``path`` to the full path ``dst`` (``placing.copy_to``)."""
        return await placing.copy_to(self, path, dst, replace)

    async def is_itself(self, path: str, dst: str) -> bool:
        """Whether ``dst`` is the object at ``path`` itself (``placing.is_itself``)."""
        return await placing.is_itself(self, path, dst)

    async def backing_path(self, path: str) -> str:
        """Where ``path`` really is, Aliases and links followed (``placing.backing_path``)."""
        return await placing.backing_path(self, path)

    async def refuse_holding(self, dst: str, path: str) -> None:
        """Refuse to replace ``dst`` when it holds ``path`` (``placing.refuse_holding``)."""
        await placing.refuse_holding(self, dst, path)

    async def remove(self, path: str) -> None:
        place = self.refuse_root(self.place(path), "remove")
        await place.ops.remove(place.sub_path)
        await self.events.removed(path)

    async def put(self, dst_dir: str, upload: Upload) -> Obj:
        """Store ``upload`` in folder ``dst_dir``; nothing appears there until every byte
        has arrived."""
        path = clean_path(f"{dst_dir}/{validate_name(upload.name)}")
        place = self.place(path)
        if place.is_root:
            raise PermissionDenied()
        obj = await place.ops.put(split_path(place.sub_path)[0], upload)
        await self.events.created(path, obj)
        return obj

    # --- copies ---------------------------------------------------------------------

    def copies_natively(self, src: Place, dst_folder: Place) -> bool:
        """Whether the driver copies this itself (same storage, driver with ``copy``)."""
        return src.same_storage(dst_folder) and "copy" in src.ops.driver.capabilities()

    async def copy(self, path: str, dst_dir: str) -> Obj:
        """Copy ``path`` into ``dst_dir`` and return the copy once it is complete.

        Within a storage the driver copies; across storages the bytes are streamed,
        folder by folder, and a failure removes what was made.
        """
        src = self.refuse_root(self.place(path), "copy")
        dst_folder = self.place(dst_dir)
        target = clean_path(f"{dst_dir}/{split_path(path)[1]}")
        if self.copies_natively(src, dst_folder):
            obj = await src.ops.copy(src.sub_path, dst_folder.sub_path)
            await self.events.created(target, obj)
            return obj
        if await self.exists(self.place(target)) is not None:
            raise ObjectExists()
        if await self.is_itself(path, target):
            raise ObjectExists()
        return await self.copy_across(path, target)

    async def copy_across(self, path: str, target: str) -> Obj:
        """Copy ``path`` to the full path ``target``, one folder level at a time."""
        source, _ = await self.lookup(path)
        target_dir, name = split_path(target)
        if not source.is_dir:
            return await self.copy_file(path, target_dir, name=name)
        folder = await self.make_dir(target)
        try:
            await self._copy_below(path, target)
        except BaseException:
            with suppress(ManifoldError):
                await self.remove(target)
            raise
        return folder

    async def _copy_below(self, path: str, target: str) -> None:
        """Copy what the folder ``path`` holds into the folder ``target``.

        The folders still to copy wait on a list of their own, not on Python's stack,
        so depth costs no recursion; past ``COPY_DEPTH`` levels the copy stops.
        """
        pending = [(path, target, 0)]
        while pending:
            folder, into, depth = pending.pop()
            for child in (await self.listing(folder))[0]:
                src, dst = child_path(folder, child.name), child_path(into, child.name)
                if not child.is_dir:
                    await self.copy_file(src, into, name=child.name)
                    continue
                refuse_too_deep(depth + 1)
                await self.make_dir(dst)
                pending.append((src, dst, depth + 1))

    async def copy_file(
        self,
        path: str,
        dst_dir: str,
        counted: Callable[[Stream], Stream] | None = None,
        name: str = "",
        overwrite: bool = True,
    ) -> Obj:
        """Stream one file into ``dst_dir`` under ``name`` or its own (any two storages).

        ``counted`` wraps the byte stream (a task counts its progress with it); without
        ``overwrite`` a file already there is kept (``ObjectExists``).
        """
        obj, link, _ = await self.link(path, LinkArgs())
        stream = link_stream(link, client=self.pool_for(link))
        if counted is not None:
            stream = counted(stream)
        upload = Upload(name or split_path(path)[1], stream, obj.size, obj.modified, overwrite)
        return await self.put(dst_dir, upload)

    async def copy_folder_level(self, path: str, dst_dir: str) -> tuple[Obj, str]:
        """Make the folder a copy of folder ``path`` goes into; it and its path.

        Unlike AList, the folder is made first, so empty folders are copied too.
        """
        target = clean_path(f"{dst_dir}/{split_path(path)[1]}")
        return await self.make_dir(target), target

    # --- the tree as drivers that serve other mounts see it (``WritableTree``) -------

    async def get_path(self, path: str) -> Obj:
        return (await self.lookup(clean_path(path)))[0]

    async def list_path(self, path: str) -> builtins.list[Obj]:
        return (await self.listing(clean_path(path)))[0]

    async def link_path(self, path: str, args: LinkArgs) -> Link:
        return (await self.link(clean_path(path), args))[1]

    async def open_path(self, path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
        link = await self.link_path(path, LinkArgs())
        async for data in open_range(link, offset, length, client=self.pool_for(link)):
            yield data

    async def real_path_of(self, path: str) -> str:
        """``path`` with its storage's links followed, as a path in the server's tree;
        ``PermissionDenied`` when links lead out of that storage."""
        place = self.place(clean_path(path))
        (real,) = await place.ops.driver.real_paths([place.sub_path])
        if real is None:
            raise PermissionDenied()
        return clean_path(f"{place.mount_path}/{real}")

    def mount_path_of(self, path: str) -> str | None:
        found = self.find(clean_path(path))
        return None if found is None else found.mount_path

    async def make_dir_path(self, path: str) -> Obj:
        return await self.make_dir(clean_path(path))

    async def rename_path(self, path: str, new_name: str) -> Obj:
        return await self.rename(clean_path(path), new_name)

    async def move_path(self, path: str, dst_dir: str) -> Obj:
        return await self.move(clean_path(path), clean_path(dst_dir))

    async def copy_path(self, path: str, dst_dir: str) -> Obj:
        return await self.copy(clean_path(path), clean_path(dst_dir))

    async def remove_path(self, path: str) -> None:
        await self.remove(clean_path(path))

    async def put_path(self, dst_dir: str, upload: Upload) -> Obj:
        return await self.put(clean_path(dst_dir), upload)
