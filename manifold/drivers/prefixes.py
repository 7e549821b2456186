"""Object stores whose folders are key prefixes (S3, Azure Blob Storage): their rules, once.

``Obj.path`` is the object's path in the bucket with a leading ``/`` (the root
folder's path included), so a key is the path without its leading slash and a
folder's prefix is its key with a trailing one. Folders are prefixes: they exist
while some key lies below them, and carry no time of their own.

``PrefixDriver`` keeps the rules every such store follows: a name is a file's or a
folder's, never both; a folder is copied key by key, and moved or renamed by a copy
whose sources are removed only once it is whole (a failed copy removes what it made).
A store supplies the requests: a file looked up, whether a prefix holds any key, a
listing, its keys, a folder marked, an upload, a key copied, keys deleted.
"""

from __future__ import annotations

import builtins
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime
from typing import ClassVar, Protocol

from manifold.drivers.base import Driver, OptionsT, Upload, validate_name
from manifold.drivers.batches import each, shielded, together
from manifold.errors import NotAFolder, ObjectExists, ObjectNotFound, ServerError
from manifold.models import Obj

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def key_of(path: str) -> str:
    """The key of the object at ``path`` (``/a/b`` -> ``a/b``)."""
    return path.strip("/")


def prefix_of(path: str) -> str:
    """The prefix every key inside the folder at ``path`` starts with (``""``: the bucket)."""
    key = key_of(path)
    return f"{key}/" if key else ""


def join(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"


def parent_of(path: str) -> str:
    return path.rstrip("/").rpartition("/")[0] or "/"


def name_of(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2]


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it."""
    folder = folder.rstrip("/")
    return path.rstrip("/") == folder or path.startswith(f"{folder}/")


class NativeParts(Protocol):
    """A store's own multipart upload, as a prefix driver's chunks reach it."""

    async def part(self, token: str, index: int, length: int, stream: AsyncIterator[bytes]) -> None:
        """Store part ``index`` of exactly ``length`` bytes."""

    async def abort(self, token: str) -> None:
        """Give up the upload and what the store holds of it."""


class PrefixDriver(Driver[OptionsT]):
    """A store of keys whose folders are prefixes; ``init`` sets ``_root``.

    No FOLDER_TIMES: a folder is a prefix, which has no time (listed with the
    storage's own). No FOLDER_MOVE: a folder is moved a key at a time (a copy of
    each, then the deletes), so the services move one as a task with progress. Each
    store says why it has no EXCLUSIVE_CREATE.
    """

    PROMISES: ClassVar[frozenset[str]] = frozenset()
    # Copies (and deletes) under way at once inside one folder operation.
    TREE_CONCURRENCY: ClassVar[int] = 8

    # The root folder's path in the store (``/`` or ``/some/folder``).
    _root: str
    # The store's native multipart uploads, where it offers them (set by ``init``).
    _native: NativeParts | None = None

    async def multipart_part(
        self, token: str, index: int, length: int, stream: AsyncIterator[bytes]
    ) -> None:
        assert self._native is not None
        await self._native.part(token, index, length, stream)

    async def multipart_abort(self, token: str) -> None:
        assert self._native is not None
        await self._native.abort(token)

    # --- what each store supplies ------------------------------------------------

    @abstractmethod
    async def _file(self, path: str) -> Obj | None:
        """The file at ``path``; None when there is none."""

    @abstractmethod
    async def _has_keys(self, prefix: str) -> bool:
        """Whether any key starts with ``prefix``."""

    @abstractmethod
    def _listing(self, folder: str) -> AsyncIterator[tuple[bool, builtins.list[Obj]]]:
        """One level of ``folder``, a page at a time: whether the store's page held
        nothing at all (hidden keys count), and the children it shows."""

    @abstractmethod
    def _sized_keys(self, prefix: str) -> AsyncIterator[tuple[str, int]]:
        """Every key that starts with ``prefix``, with its size."""

    @abstractmethod
    async def _mark_folder(self, path: str) -> None:
        """Write what keeps the new, empty folder at ``path`` in existence."""

    @abstractmethod
    async def _upload(self, path: str, upload: Upload) -> Obj:
        """Store ``upload`` as the file at ``path``, whole or not at all."""

    @abstractmethod
    async def _copy_file(self, src: Obj, target: str) -> Obj:
        """Copy the file ``src`` to ``target`` (a free name); the copy."""

    @abstractmethod
    async def _copy_key(self, key: str, new_key: str, size: int) -> None:
        """Copy one key of a folder (``size`` bytes) to ``new_key``."""

    @abstractmethod
    async def _delete_key(self, key: str) -> None:
        """Delete the key of a file that was moved."""

    @abstractmethod
    async def _delete_keys(self, keys: builtins.list[str]) -> None:
        """Delete ``keys`` (a folder's); those already gone are no error."""

    async def _remove_file(self, path: str) -> None:
        """Remove the file at ``path``; ``ObjectNotFound`` when there is none (a
        store whose delete accepts a missing key looks first)."""
        await self._delete_key(key_of(path))

    def _refuse_reserved(self, name: str) -> str:
        """``name`` for a file; a store refuses the names it keeps for itself."""
        return name

    # --- reading -----------------------------------------------------------------

    async def list_pages(self, dir: Obj) -> AsyncGenerator[builtins.list[Obj], None]:
        if not dir.is_dir:
            raise NotAFolder()
        # An empty first page is what a missing folder and a file's key both give:
        # only then is the store asked which (``folder_at``).
        checked = self._is_root(dir.path)
        async for empty, page in self._listing(dir.path):
            if empty and not checked:
                await self._refuse_missing_folder(dir.path)
            checked = True
            yield page
        if not checked:  # no page at all: as an empty one
            await self._refuse_missing_folder(dir.path)

    async def root_obj(self) -> Obj:
        return Obj(name="", size=0, is_dir=True, modified=self._folder_time(), path=self._root)

    def folder_at(self, path: str) -> Obj | None:
        inside = path.strip("/")
        return self._folder(join(self._root, inside)) if inside else None

    async def get(self, path: str) -> Obj:
        full = join(self._root, path.lstrip("/")) if path.strip("/") else self._root
        if self._is_root(full):
            return await self.root_obj()
        file = await self._file(full)
        if file is not None:
            return file
        if await self._has_keys(prefix_of(full)):
            return self._folder(full)
        raise ObjectNotFound()

    # --- writing -----------------------------------------------------------------

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        path = join(parent.path, validate_name(name))
        await together(self._require_folder(parent), self._refuse_file(path))
        await self._mark_folder(path)
        return self._folder(path)

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        if key_of(parent_of(src.path)) == key_of(dst_dir.path):
            return src
        self._refuse_into_itself(src, dst_dir)
        return await self._relocate(src, join(dst_dir.path, name_of(src.path)), dst_dir)

    async def rename(self, src: Obj, new_name: str) -> Obj:
        if validate_name(new_name) == name_of(src.path):
            return src
        if not src.is_dir:
            self._refuse_reserved(new_name)
        return await self._relocate(src, join(parent_of(src.path), new_name), None)

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        self._refuse_into_itself(src, dst_dir)
        target = join(dst_dir.path, name_of(src.path))
        await together(self._require_folder(dst_dir), self._refuse_taken(target))
        if src.is_dir:
            await self._copy_tree(src.path, target)
            return self._folder(target)
        return await self._copy_file(src, target)

    async def remove(self, obj: Obj) -> None:
        if not obj.is_dir:
            await self._remove_file(obj.path)
            return
        await self._delete_keys([key for key, _ in await self._keys_below(obj.path)])

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        name = self._refuse_reserved(validate_name(upload.name))
        if not dst_dir.is_dir:
            raise NotAFolder()
        path = join(dst_dir.path, name)
        checks = [self._refuse_folder(path)]
        if not upload.overwrite:
            checks.append(self._refuse_file(path))
        await together(*checks)
        return await self._upload(path, upload)

    # --- folders as prefixes -----------------------------------------------------

    def _is_root(self, path: str) -> bool:
        return key_of(path) == key_of(self._root)

    async def _keys_below(self, folder: str) -> builtins.list[tuple[str, int]]:
        """Every key inside ``folder`` with its size; ``ObjectNotFound`` when none."""
        keys = [pair async for pair in self._sized_keys(prefix_of(folder))]
        if not keys:
            raise ObjectNotFound()
        return keys

    def _folder(self, path: str) -> Obj:
        return Obj(name=name_of(path), size=0, is_dir=True, modified=self._folder_time(), path=path)

    def _folder_time(self) -> datetime:
        modified = self.storage.modified or _EPOCH
        return modified if modified.tzinfo else modified.replace(tzinfo=UTC)

    async def _require_folder(self, folder: Obj) -> None:
        if not folder.is_dir:
            raise NotAFolder()
        if self._is_root(folder.path):
            return
        if not await self._has_keys(prefix_of(folder.path)):
            await self._refuse_missing_folder(folder.path)

    async def _refuse_missing_folder(self, path: str) -> None:
        if await self._file(path) is not None:
            raise NotAFolder()
        raise ObjectNotFound()

    async def _refuse_file(self, path: str) -> None:
        if await self._file(path) is not None:
            raise ObjectExists(f"file exists: {name_of(path)}")

    async def _refuse_folder(self, path: str) -> None:
        if await self._has_keys(prefix_of(path)):
            raise ObjectExists(f"a folder holds the name: {name_of(path)}")

    async def _refuse_taken(self, path: str) -> None:
        await together(self._refuse_file(path), self._refuse_folder(path))

    @staticmethod
    def _refuse_into_itself(src: Obj, dst_dir: Obj) -> None:
        if src.is_dir and inside(dst_dir.path, src.path):
            raise ServerError("the destination folder is a subfolder of the source folder")

    # --- copies and moves --------------------------------------------------------

    async def _relocate(self, src: Obj, target: str, dst_dir: Obj | None) -> Obj:
        """Move ``src`` to ``target``: copy, then remove the source once the copy is whole."""
        checks = [self._refuse_taken(target)]
        if dst_dir is not None:
            checks.append(self._require_folder(dst_dir))
        await together(*checks)
        if not src.is_dir:
            moved = await self._copy_file(src, target)
            await self._delete_key(key_of(src.path))
            return moved
        copied = await self._copy_tree(src.path, target)
        await self._delete_keys(copied)
        return self._folder(target)

    async def _copy_tree(self, source: str, target: str) -> builtins.list[str]:
        """Copy every key inside folder ``source`` below ``target``; the source keys.

        A failure (or a cancellation) removes whatever reached ``target``, which was
        free before, so a failed copy leaves nothing there.
        """
        keys = await self._keys_below(source)
        cut, dest = len(prefix_of(source)), prefix_of(target)
        pairs = [(key, dest + key[cut:], size) for key, size in keys]
        try:
            await each(pairs, lambda pair: self._copy_key(*pair), self.TREE_CONCURRENCY)
        except BaseException:
            await shielded(self._delete_keys([new for _, new, _ in pairs]))
            raise
        return [key for key, _ in keys]
