"""The whole tree for drivers that serve other mounts (Alias): read and write.

``ServiceTree`` is the ``WritableTree`` the server hands such drivers. Paths are
virtual and already allowed by whoever called the driver, so no user permission
is checked here, as in AList where Alias calls the fs layer directly. Each change
goes through the target storage's ``StorageOps`` (which keeps its cached listings
right) and is told to ``TreeEvents``. A copy between two storages streams the
bytes from the source's link into the destination's ``put``; a move between two
storages is refused, as AList refuses it.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from contextlib import suppress
from datetime import datetime

from manifold.drivers.base import LinkArgs, validate_name
from manifold.errors import (
    ManifoldError,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
)
from manifold.models import Link, Obj
from manifold.services.events import TreeEvents
from manifold.services.fs import FsService
from manifold.services.storages import Mounted, StorageService
from manifold.services.streams import link_stream
from manifold.vfs.paths import clean_path, split_path
from manifold.vfs.storage_ops import StorageOps


class ServiceTree:
    def __init__(
        self, fs: FsService, storages: StorageService, events: TreeEvents | None = None
    ) -> None:
        self._fs = fs
        self._storages = storages
        self._events = events or TreeEvents()

    # --- read -----------------------------------------------------------------------

    async def get_path(self, path: str) -> Obj:
        obj, _ = await self._fs.get_path(clean_path(path))
        return obj

    async def list_path(self, path: str) -> builtins.list[Obj]:
        objs, _ = await self._fs.list_path(clean_path(path))
        return objs

    async def link_path(self, path: str, args: LinkArgs) -> Link:
        _, link, _ = await self._fs.link(clean_path(path), args)
        return link

    async def real_path_of(self, path: str) -> str:
        path = clean_path(path)
        ops, sub, mounted = self._place(path)
        (real,) = await ops.driver.real_paths([sub])
        if real is None:
            raise PermissionDenied()
        return clean_path(f"{mounted.storage.mount_path}/{real}")

    # --- write ----------------------------------------------------------------------

    async def make_dir_path(self, path: str) -> Obj:
        path = clean_path(path)
        ops, sub, _ = self._place(path)
        obj = await ops.make_dir(sub)
        await self._events.created(path, obj)
        return obj

    async def rename_path(self, path: str, new_name: str) -> Obj:
        path = clean_path(path)
        ops, sub, _ = self._place(path, whole_storage="rename")
        obj = await ops.rename(sub, validate_name(new_name))
        await self._events.moved(path, clean_path(f"{split_path(path)[0]}/{new_name}"))
        return obj

    async def move_path(self, path: str, dst_dir: str) -> Obj:
        path, dst_dir = clean_path(path), clean_path(dst_dir)
        ops, sub, source = self._place(path, whole_storage="move")
        _, dst_sub, target = self._place(dst_dir)
        if source is not target:
            raise ServerError("can't move files between two storages, try to copy")
        obj = await ops.move(sub, dst_sub)
        await self._events.moved(path, clean_path(f"{dst_dir}/{split_path(path)[1]}"))
        return obj

    async def copy_path(self, path: str, dst_dir: str) -> Obj:
        path, dst_dir = clean_path(path), clean_path(dst_dir)
        ops, sub, source = self._place(path, whole_storage="copy")
        dst_ops, dst_sub, target = self._place(dst_dir)
        if source is target and "copy" in ops.driver.capabilities():
            obj = await ops.copy(sub, dst_sub)
        else:
            obj = await self._copy_across(ops, sub, dst_ops, dst_sub)
        await self._events.created(clean_path(f"{dst_dir}/{split_path(path)[1]}"), obj)
        return obj

    async def remove_path(self, path: str) -> None:
        path = clean_path(path)
        ops, sub, _ = self._place(path, whole_storage="remove")
        await ops.remove(sub)
        await self._events.removed(path)

    async def put_path(
        self,
        dst_dir: str,
        name: str,
        stream: AsyncIterator[bytes],
        size: int | None,
        modified: datetime | None,
        *,
        overwrite: bool = True,
    ) -> Obj:
        dst_dir = clean_path(dst_dir)
        ops, sub, _ = self._place(dst_dir)
        obj = await ops.put(sub, validate_name(name), stream, size, modified, overwrite=overwrite)
        await self._events.created(clean_path(f"{dst_dir}/{name}"), obj)
        return obj

    # --- helpers --------------------------------------------------------------------

    def _place(self, path: str, whole_storage: str = "") -> tuple[StorageOps, str, Mounted]:
        """The storage holding ``path`` and the path inside it.

        With ``whole_storage`` naming an action, a storage's root is refused: that
        action on a whole storage is the storage page's business.
        """
        resolved = self._storages.resolve(path)
        if resolved is None:
            raise ObjectNotFound(f"failed get storage: {ObjectNotFound.default_message}")
        if whole_storage and resolved.sub_path == "/":
            raise ServerError(f"can't {whole_storage} a storage's root folder")
        return resolved.target.require_ops(), resolved.sub_path, resolved.target

    async def _copy_across(
        self, ops: StorageOps, sub: str, dst_ops: StorageOps, dst_sub: str
    ) -> Obj:
        """Copy by streaming bytes between two storages; nothing is left on failure."""
        source = await ops.get(sub)
        name = split_path(sub)[1]
        target = clean_path(f"{dst_sub}/{name}")
        with suppress(ObjectNotFound):
            await dst_ops.get(target)
            raise ObjectExists()
        if not source.is_dir:
            _, link = await ops.link(sub, LinkArgs())
            return await dst_ops.put(dst_sub, name, link_stream(link), source.size, None)
        folder = await dst_ops.make_dir(target)
        try:
            for child in await ops.list(sub):
                await self._copy_across(ops, clean_path(f"{sub}/{child.name}"), dst_ops, target)
        except BaseException:
            with suppress(ManifoldError):
                await dst_ops.remove(target)
            raise
        return folder
