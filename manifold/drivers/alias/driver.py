"""Alias: each line of ``paths`` is ``name:/target`` or ``/target`` (named by its base name).

Lines sharing a name are merged; with a single name the alias root shows the
target's contents directly. Everything goes through the server's tree, so the
targets' own drivers and caches serve it.

Writes (AList v3.45): only with ``writable`` (else ``permission denied``), and only
when the server's tree is a ``WritableTree``. Each is forwarded to the one target
path that holds the object; with ``protect_same_name`` an object found in several
targets is refused (``same-name files cannot be Rename`` and the like), without it
the first target wins. Renaming, moving, copying or removing an alias root entry
itself is ``not support``.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from manifold.drivers.alias.meta import Addition
from manifold.drivers.base import Driver, LinkArgs, VirtualTree, WritableTree, validate_name
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotSupported,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
)
from manifold.models import Link, Obj

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
R = TypeVar("R")


def parse_paths(text: str) -> dict[str, list[str]]:
    targets: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        name, sep, rest = line.partition(":")
        if sep and "/" not in name:
            target = rest.strip()
        else:
            name, target = "", line
        target = posixpath.normpath("/" + target.lstrip("/"))
        name = name.strip() or posixpath.basename(target) or "root"
        targets.setdefault(name, []).append(target)
    return targets


class AliasDriver(Driver[Addition]):
    _targets: dict[str, list[str]]

    async def init(self) -> None:
        self._targets = parse_paths(self.options.paths)
        if not self._targets:
            raise InvalidRequest("paths is required")
        mount = self.storage.mount_path.rstrip("/") or "/"
        for targets in self._targets.values():
            for target in targets:
                if mount == "/" or target == mount or target.startswith(mount + "/"):
                    raise InvalidRequest(f"alias target {target} lies inside the alias itself")

    async def drop(self) -> None:
        return None

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        if dir.path in ("", "/") and len(self._targets) > 1:
            modified = self.storage.modified or _EPOCH
            return [Obj(n, 0, True, modified, path="/" + n) for n in self._targets]
        merged: dict[str, Obj] = {}
        found = False
        for target in self._real_paths(dir.path):
            try:
                children = await self._tree().list_path(target)
            except ObjectNotFound:
                continue
            found = True
            for child in children:
                if child.name not in merged:
                    merged[child.name] = _aliased(child, posixpath.join(dir.path, child.name))
        if not found:
            raise ObjectNotFound()
        return list(merged.values())

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return await self._first(file.path, lambda real: self._tree().link_path(real, args))

    async def real_path(self, path: str) -> str:
        """``path`` with links followed, while they stay inside the target it came through.

        A link in a target that leads elsewhere in the tree leaves this alias, as a link
        out of a Local root leaves that storage: ``PermissionDenied``.
        """
        if self._is_alias_root(path):
            return posixpath.normpath(path or "/")
        prefix, targets = self._targets_of(path)
        last: ManifoldError = ObjectNotFound()
        tree = self._tree()
        for target, rest in targets:
            inner = posixpath.normpath(posixpath.join(target, rest))
            try:
                await tree.get_path(inner)  # the first target holding it, as for reads
            except ObjectNotFound as exc:
                last = exc
                continue
            real, real_target = await tree.real_path_of(inner), await tree.real_path_of(target)
            if real != real_target and not real.startswith(real_target.rstrip("/") + "/"):
                raise PermissionDenied()
            return posixpath.normpath(prefix + "/" + posixpath.relpath(real, real_target))
        raise last

    async def backing_path(self, path: str) -> str | None:
        """The path in the server's tree that ``path`` stands for (the first target
        holding it, as reads and writes use), or None for the alias's own folder
        of several targets. ``ObjectNotFound`` when no target holds it."""
        if (path or "/") == "/" and len(self._targets) > 1:
            return None
        tree = self._tree()

        async def held(real: str) -> str:
            await tree.get_path(real)
            return real

        return await self._first(path, held)

    async def get(self, path: str) -> Obj:
        if path == "/":
            return await self.root_obj()
        if len(self._targets) > 1 and path[1:] in self._targets:
            return Obj(path[1:], 0, True, self.storage.modified or _EPOCH, path=path)
        obj = await self._first(path, self._tree().get_path)
        return _aliased(obj, path, keep_hash=True)

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        tree = self._writable()
        real = await self._req_path(parent.path, True, "same-name dirs cannot make sub-dir")
        made = await tree.make_dir_path(posixpath.join(real, validate_name(name)))
        return _aliased(made, posixpath.join(parent.path, name))

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        tree = self._writable()
        real = await self._req_path(src.path, False, "same-name files cannot be moved")
        dst = await self._req_path(dst_dir.path, True, "same-name dirs cannot be moved to")
        moved = await tree.move_path(real, dst)
        return _aliased(moved, posixpath.join(dst_dir.path, moved.name))

    async def rename(self, src: Obj, new_name: str) -> Obj:
        tree = self._writable()
        real = await self._req_path(src.path, False, "same-name files cannot be Rename")
        renamed = await tree.rename_path(real, validate_name(new_name))
        return _aliased(renamed, posixpath.join(posixpath.dirname(src.path), new_name))

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        tree = self._writable()
        real = await self._req_path(src.path, False, "same-name files cannot be copied")
        dst = await self._req_path(dst_dir.path, True, "same-name dirs cannot be copied to")
        copied = await tree.copy_path(real, dst)
        return _aliased(copied, posixpath.join(dst_dir.path, copied.name))

    async def remove(self, obj: Obj) -> None:
        tree = self._writable()
        await tree.remove_path(
            await self._req_path(obj.path, False, "same-name files cannot be Delete")
        )

    async def put(
        self,
        dst_dir: Obj,
        name: str,
        stream: AsyncIterator[bytes],
        size: int | None,
        modified: datetime | None,
        *,
        overwrite: bool = True,
    ) -> Obj:
        tree = self._writable()
        real = await self._req_path(dst_dir.path, True, "same-name dirs cannot be Put")
        name = validate_name(name)
        stored = await tree.put_path(real, name, stream, size, modified, overwrite=overwrite)
        return _aliased(stored, posixpath.join(dst_dir.path, name))

    def _writable(self) -> WritableTree:
        if not self.options.writable:
            raise PermissionDenied()
        tree = self._tree()
        if not isinstance(tree, WritableTree):
            raise NotSupported("the tree of this server cannot be written through an alias")
        return tree

    async def _req_path(self, path: str, is_parent: bool, same_name: str) -> str:
        """The one target path holding ``path`` (AList's ``getReqPath``)."""
        if not is_parent and self._is_alias_root(path):
            raise NotSupported()
        found = ""
        for real in self._real_paths(path):
            try:
                await self._tree().get_path(real)
            except ObjectNotFound:
                continue
            if not self.options.protect_same_name:
                return real
            if found:
                raise ServerError(same_name)
            found = real
        if not found:
            raise ObjectNotFound()
        return found

    def _is_alias_root(self, path: str) -> bool:
        """Whether ``path`` is the alias root or (with several names) one of its entries."""
        inner = (path or "/").strip("/")
        return not inner or (len(self._targets) > 1 and "/" not in inner)

    async def _first(self, path: str, call: Callable[[str], Awaitable[R]]) -> R:
        """The answer of the first target that has ``path``."""
        last: ManifoldError = ObjectNotFound()
        for real in self._real_paths(path):
            try:
                return await call(real)
            except ObjectNotFound as exc:
                last = exc
        raise last

    def _tree(self) -> VirtualTree:
        if self.tree is None:
            raise ServerError("alias is not connected to the tree")
        return self.tree

    def _real_paths(self, path: str) -> builtins.list[str]:
        _, targets = self._targets_of(path)
        return [posixpath.normpath(posixpath.join(t, rest)) for t, rest in targets]

    def _targets_of(self, path: str) -> tuple[str, builtins.list[tuple[str, str]]]:
        """The alias folder ``path`` lies in, and each (target, path inside it)."""
        path = path or "/"
        if len(self._targets) == 1:
            (targets,) = self._targets.values()
            prefix, rest = "", path
        else:
            name, _, tail = path.lstrip("/").partition("/")
            targets = self._targets.get(name, [])
            prefix, rest = "/" + name, tail
        return prefix, [(t, rest.lstrip("/")) for t in targets]


def _aliased(obj: Obj, path: str, keep_hash: bool = False) -> Obj:
    """``obj`` at its alias path; as in AList, only a lookup keeps the hashes."""
    hashes = obj.hash_info if keep_hash else None
    return Obj(
        obj.name, obj.size, obj.is_dir, obj.modified, obj.created, path, obj.id, obj.thumb, hashes
    )


DRIVER = AliasDriver
