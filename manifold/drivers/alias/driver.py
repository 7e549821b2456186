"""Alias: each line of ``paths`` is ``name:/target`` or ``/target`` (named by its base name).

Lines sharing a name are merged; with a single name the alias root shows the
target's contents directly. Reads go through the server's tree, so the targets'
own drivers and caches serve them.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from manifold.drivers.alias.meta import Addition
from manifold.drivers.base import Driver, LinkArgs, VirtualTree
from manifold.errors import InvalidRequest, ManifoldError, ObjectNotFound, ServerError
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

    async def get(self, path: str) -> Obj:
        if path == "/":
            return await self.root_obj()
        if len(self._targets) > 1 and path[1:] in self._targets:
            return Obj(path[1:], 0, True, self.storage.modified or _EPOCH, path=path)
        obj = await self._first(path, self._tree().get_path)
        return _aliased(obj, path)

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
        path = path or "/"
        if len(self._targets) == 1:
            (targets,) = self._targets.values()
            rest = path
        else:
            name, _, tail = path.lstrip("/").partition("/")
            targets = self._targets.get(name, [])
            rest = "/" + tail
        return [posixpath.normpath(posixpath.join(t, rest.lstrip("/"))) for t in targets]


def _aliased(obj: Obj, path: str) -> Obj:
    return Obj(obj.name, obj.size, obj.is_dir, obj.modified, obj.created, path, obj.id, obj.thumb)


DRIVER = AliasDriver
