"""The file tree, read side, in virtual paths: every read with its permission check.

Every entry point takes an explicit caller and a client-supplied path, joins it
onto the caller's base path (which refuses any escape), finds the nearest meta,
checks access once, and only then asks a storage.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from datetime import UTC, datetime

from manifold.drivers.base import LinkArgs
from manifold.errors import (
    Forbidden,
    ManifoldError,
    ObjectNotFound,
    PasswordRequired,
    StorageNotFound,
)
from manifold.models import Link, Meta, Obj
from manifold.services import access
from manifold.services.auth import Caller
from manifold.services.metas import MetaService
from manifold.services.storages import StorageService
from manifold.vfs.paths import clean_path, join_base, split_path

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class Listing:
    objs: builtins.list[Obj]
    total: int
    readme: str
    header: str
    write: bool
    provider: str
    path: str
    meta: Meta | None = None


@dataclass(slots=True)
class Found:
    obj: Obj
    path: str
    provider: str
    readme: str
    header: str
    meta: Meta | None
    signed: bool = False
    related: builtins.list[Obj] = field(default_factory=list)


class FsService:
    def __init__(self, storages: StorageService, metas: MetaService) -> None:
        self._storages = storages
        self._metas = metas

    def resolve(self, caller: Caller, path: str) -> str:
        return join_base(caller.user.base_path, path)

    def check_access(self, caller: Caller, path: str, password: str) -> Meta | None:
        meta = self._metas.nearest(path)
        if not access.can_access(caller.user, meta, path, password):
            raise PasswordRequired()
        return meta

    async def list(
        self,
        caller: Caller,
        path: str,
        password: str,
        page: int,
        per_page: int,
        refresh: bool = False,
    ) -> Listing:
        full = self.resolve(caller, path)
        meta = self.check_access(caller, full, password)
        write = access.can_write(caller.user, meta, full)
        if refresh and not write:
            raise Forbidden("Refresh without permission")
        objs, provider = await self.list_path(full, refresh)
        hidden = access.hides(meta, full, caller.user)
        if hidden:
            objs = [o for o in objs if not access.is_hidden(o.name, hidden)]
        total = len(objs)
        return Listing(
            objs=_page(objs, page, per_page),
            total=total,
            readme=access.readme_for(meta, full),
            header=access.header_for(meta, full),
            write=write,
            provider=provider,
            path=full,
            meta=meta,
        )

    async def list_path(self, path: str, refresh: bool = False) -> tuple[builtins.list[Obj], str]:
        """Entries of a virtual folder: the storage's, then virtual mount folders."""
        resolved = self._storages.resolve(path)
        virtual = [_virtual(name) for name in self._storages.virtual_children(path)]
        if resolved is None:
            if not virtual:
                raise self._missing(path)
            return virtual, "unknown"
        objs = await resolved.target.require_ops().list(resolved.sub_path, refresh)
        names = {o.name for o in objs}
        return objs + [v for v in virtual if v.name not in names], resolved.target.storage.driver

    async def get(self, caller: Caller, path: str, password: str) -> Found:
        full = self.resolve(caller, path)
        meta = self.check_access(caller, full, password)
        obj, provider = await self.get_path(full)
        signed = self.needs_sign(full, meta)
        return Found(
            obj,
            full,
            provider,
            access.readme_for(meta, full),
            access.header_for(meta, full),
            meta,
            signed,
        )

    async def get_path(self, path: str) -> tuple[Obj, str]:
        resolved = self._storages.resolve(path)
        if resolved is not None:
            mounted = resolved.target
            try:
                obj = await mounted.require_ops().get(resolved.sub_path)
            except ObjectNotFound:
                if not self._storages.virtual_children(path):
                    raise
            else:
                if resolved.sub_path == "/":
                    obj.name = split_path(path)[1]
                return obj, mounted.storage.driver
        if path == "/" or self._storages.virtual_children(path):
            return _virtual(split_path(path)[1]), "unknown"
        raise self._missing(path)

    async def dirs(
        self, caller: Caller, path: str, password: str, force_root: bool
    ) -> builtins.list[Obj]:
        if force_root:
            if not caller.user.is_admin:
                raise Forbidden("Permission denied")
            full = clean_path(path)
        else:
            full = self.resolve(caller, path)
        meta = self.check_access(caller, full, password)
        objs, _ = await self.list_path(full)
        hidden = access.hides(meta, full, caller.user)
        return [o for o in objs if o.is_dir and not access.is_hidden(o.name, hidden)]

    async def link(self, path: str, args: LinkArgs) -> tuple[Obj, Link, str]:
        """The bytes of a file at an already-authorised virtual path."""
        resolved = self._storages.resolve(path)
        if resolved is None:
            raise self._missing(path)
        obj, link = await resolved.target.require_ops().link(resolved.sub_path, args)
        return obj, link, resolved.target.storage.driver

    def needs_sign(self, path: str, meta: Meta | None) -> bool:
        """Whether objects under ``path`` carry a sign: storage signing or a password."""
        resolved = self._storages.resolve(path)
        storage_signs = resolved is not None and resolved.target.storage.enable_sign
        return storage_signs or access.password_applies(meta, path)

    def storage_signs(self, path: str) -> bool:
        resolved = self._storages.resolve(path)
        return resolved is not None and resolved.target.storage.enable_sign

    def _missing(self, path: str) -> ManifoldError:
        if not self._storages.has_storages():
            return StorageNotFound("storage not found; please add a storage first")
        return ObjectNotFound(f"failed get objs: failed get dir: {ObjectNotFound.default_message}")


class FsTree:
    """The whole tree without user checks, for drivers that serve other mounts."""

    def __init__(self, fs: FsService) -> None:
        self._fs = fs

    async def get_path(self, path: str) -> Obj:
        obj, _ = await self._fs.get_path(clean_path(path))
        return obj

    async def list_path(self, path: str) -> builtins.list[Obj]:
        objs, _ = await self._fs.list_path(clean_path(path))
        return objs

    async def link_path(self, path: str, args: LinkArgs) -> Link:
        _, link, _ = await self._fs.link(clean_path(path), args)
        return link


def _virtual(name: str) -> Obj:
    return Obj(name=name, size=0, is_dir=True, modified=_EPOCH)


def _page(objs: builtins.list[Obj], page: int, per_page: int) -> builtins.list[Obj]:
    if per_page < 1:
        return objs
    start = (max(page, 1) - 1) * per_page
    return objs[start : start + per_page]
