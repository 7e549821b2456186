"""Alias: each line of ``paths`` is ``name:/target`` or ``/target`` (named by its base name).

Lines sharing a name are merged; with a single name the alias root shows the
target's contents directly. Everything goes through the server's tree, so the
targets' own drivers and caches serve it.

Writes (AList v3.45): only with ``writable`` (else ``NotWritable``, naming it), and only
when the server's tree is a ``WritableTree``. Each is forwarded to the one target
path that holds the object; with ``protect_same_name`` an object found in several
targets is refused (``same-name files cannot be Rename`` and the like), without it
the first target wins. Renaming, moving, copying or removing an alias root entry
itself is ``not support``.

Loops: a target that lies inside the alias, or holds its mount, is refused at init.
A loop through other Aliases (this one's target holds another's mount, whose target
holds this one's) shows when a call made through this alias would come back to it:
``AliasLoop``, before any storage is asked again, so no listing waits on itself.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TypeVar

from manifold.drivers.alias.meta import Addition
from manifold.drivers.alias.parts import parted_reader
from manifold.drivers.base import (
    Driver,
    LinkArgs,
    Upload,
    VirtualTree,
    WritableTree,
    validate_name,
)
from manifold.errors import (
    AliasLoop,
    InvalidRequest,
    ManifoldError,
    NotSupported,
    NotWritable,
    ObjectNotFound,
    ServerError,
)
from manifold.models import Link, Obj
from manifold.paths import is_sub_path

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
R = TypeVar("R")
# The mount paths of the Aliases the current call has come through, outermost first.
_THROUGH: ContextVar[tuple[str, ...]] = ContextVar("alias_through", default=())


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
    # The promises are its targets': FOLDER_MOVE here stands for the target's, which
    # the services read by following the Alias to the storage behind it.
    _targets: dict[str, list[str]]

    async def init(self) -> None:
        self._targets = parse_paths(self.options.paths)
        if not self._targets:
            raise InvalidRequest("paths is required")
        mount = self.storage.mount_path.rstrip("/") or "/"
        for targets in self._targets.values():
            for target in targets:
                if mount == "/" or is_sub_path(mount, target):
                    raise InvalidRequest(f"alias target {target} lies inside the alias itself")
                if is_sub_path(target, mount):
                    raise InvalidRequest(f"alias target {target} holds the alias itself")

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
                with self._through(target) as tree:
                    children = await tree.list_path(target)
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
        link = await self._first(file.path, lambda real, tree: tree.link_path(real, args))
        concurrency = self.options.download_concurrency
        part_size = self.options.download_part_size * 1024
        if args.redirect or not link.url or link.reader or concurrency <= 0 or part_size <= 0:
            return link  # parts apply to URLs this server proxies, as in AList
        client = self.resources.http()
        return Link(reader=parted_reader(link, file.size, client, concurrency, part_size))

    async def served_from(
        self, anchor: str, paths: Sequence[str]
    ) -> builtins.list[tuple[str, str] | None]:
        """Each path in the target holding it (the first, as reads take it), with
        ``anchor`` carried into that same target; an anchor above the target (the
        root of an alias of several names) becomes the target itself."""
        return [await self._served_pair(anchor, path) for path in paths]

    async def _served_pair(self, anchor: str, path: str) -> tuple[str, str] | None:
        prefix, targets = self._targets_of(path)
        if not targets:
            return None  # the root of several names, or a name it does not have
        target, rest = await self._holder(targets)
        inside = posixpath.relpath(posixpath.normpath(anchor or "/"), prefix or "/")
        at = target if inside.startswith("..") else posixpath.join(target, inside)
        return posixpath.normpath(at), posixpath.normpath(posixpath.join(target, rest))

    async def _holder(self, targets: builtins.list[tuple[str, str]]) -> tuple[str, str]:
        """The first (target, rest) whose target holds the rest; else the first."""
        if len(targets) > 1:
            for target, rest in targets:
                inner = posixpath.join(target, rest)
                try:
                    with self._through(inner) as tree:
                        await tree.get_path(inner)
                except ObjectNotFound:
                    continue
                return target, rest
        return targets[0]

    async def backing_path(self, path: str) -> str | None:
        """The path in the server's tree that ``path`` stands for (the first target
        holding it, as reads and writes use), or None for the alias's own folder
        of several targets. ``ObjectNotFound`` when no target holds it."""
        if (path or "/") == "/" and len(self._targets) > 1:
            return None

        async def held(real: str, tree: VirtualTree) -> str:
            await tree.get_path(real)
            return real

        return await self._first(path, held)

    async def get(self, path: str) -> Obj:
        if path == "/":
            return await self.root_obj()
        if len(self._targets) > 1 and path[1:] in self._targets:
            return Obj(path[1:], 0, True, self.storage.modified or _EPOCH, path=path)
        obj = await self._first(path, lambda real, tree: tree.get_path(real))
        return _aliased(obj, path, keep_hash=True)

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        tree = self._writable()
        real = await self._req_path(parent.path, True, "same-name dirs cannot make sub-dir")
        with self._through(real):
            made = await tree.make_dir_path(posixpath.join(real, validate_name(name)))
        return _aliased(made, posixpath.join(parent.path, name))

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        tree = self._writable()
        real = await self._req_path(src.path, False, "same-name files cannot be moved")
        dst = await self._req_path(dst_dir.path, True, "same-name dirs cannot be moved to")
        with self._through(real), self._through(dst):
            moved = await tree.move_path(real, dst)
        return _aliased(moved, posixpath.join(dst_dir.path, moved.name))

    async def rename(self, src: Obj, new_name: str) -> Obj:
        tree = self._writable()
        real = await self._req_path(src.path, False, "same-name files cannot be Rename")
        with self._through(real):
            renamed = await tree.rename_path(real, validate_name(new_name))
        return _aliased(renamed, posixpath.join(posixpath.dirname(src.path), new_name))

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        tree = self._writable()
        real = await self._req_path(src.path, False, "same-name files cannot be copied")
        dst = await self._req_path(dst_dir.path, True, "same-name dirs cannot be copied to")
        with self._through(real), self._through(dst):
            copied = await tree.copy_path(real, dst)
        return _aliased(copied, posixpath.join(dst_dir.path, copied.name))

    async def remove(self, obj: Obj) -> None:
        tree = self._writable()
        real = await self._req_path(obj.path, False, "same-name files cannot be Delete")
        with self._through(real):
            await tree.remove_path(real)

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        tree = self._writable()
        real = await self._req_path(dst_dir.path, True, "same-name dirs cannot be Put")
        name = validate_name(upload.name)
        with self._through(real):
            stored = await tree.put_path(real, upload)
        return _aliased(stored, posixpath.join(dst_dir.path, name))

    def _writable(self) -> WritableTree:
        if not self.options.writable:
            raise NotWritable(self.storage.mount_path, "Writable")
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
                with self._through(real) as tree:
                    await tree.get_path(real)
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

    async def _first(self, path: str, call: Callable[[str, VirtualTree], Awaitable[R]]) -> R:
        """The answer of the first target that has ``path``."""
        last: ManifoldError = ObjectNotFound()
        for real in self._real_paths(path):
            try:
                with self._through(real) as tree:
                    return await call(real, tree)
            except ObjectNotFound as exc:
                last = exc
        raise last

    @contextmanager
    def _through(self, target: str) -> Iterator[VirtualTree]:
        """The tree, for calls on ``target`` made through this alias.

        A call that would reach an alias it has already come through is a loop; it is
        refused before the storage is asked, since that alias is still waiting on it.
        """
        tree = self._tree()
        through = (*_THROUGH.get(), self.storage.mount_path)
        mount = tree.mount_path_of(target)
        if mount in through:
            raise AliasLoop.through((*through, mount))
        token = _THROUGH.set(through)
        try:
            yield tree
        finally:
            _THROUGH.reset(token)

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
