"""Chunk (OpenList): files kept as numbered parts on another path of this server's
tree, for back ends that limit a file's size.

Everything goes through the server's tree (``WritableTree``) at ``remote_path``: the
storage there keeps the parts and its own driver, layers and caches serve them. A
file is the folder ``<chunk_prefix>name`` of its parts (``parts``); listings show it
as one file of the parts' whole size and never show the parts. A chunk folder that
lacks a part lists under its own name, as a folder, as OpenList shows it.

An upload is cut into parts as it streams, each part put on the storage below as it
fills, so memory holds one chunk of the stream at a time. The parts go into a hidden
folder beside the target (``UPLOAD_PREFIX``) that takes the file's name only once the
last part is whole; any failure, a cut stream or a wrong byte count removes it. A
file it replaces is set aside first and removed after, so its name never lacks a whole
file. Renames, moves, copies and removals act on the chunk folder, all parts at once.

OpenList's ``thumbnail`` (pre-made ``.thumbnails``) is not offered.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import posixpath
import secrets
from collections.abc import AsyncIterator
from contextlib import suppress
from datetime import UTC, datetime

from manifold.drivers.base import (
    Driver,
    LinkArgs,
    Seen,
    Temporaries,
    Temporary,
    Upload,
    VirtualTree,
    WritableTree,
    parking_name,
    validate_name,
)
from manifold.drivers.chunk.meta import Addition
from manifold.drivers.chunk.parts import (
    Layout,
    Splitter,
    hash_name,
    layout_of,
    missing_part,
    part_name,
    part_sizes,
    ranged_reader,
)
from manifold.errors import (
    InvalidName,
    InvalidRequest,
    ManifoldError,
    NotAFile,
    NotAFolder,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    ServerError,
)
from manifold.models import Link, Obj
from manifold.paths import clean_path, is_sub_path

# Parts being uploaded wait in a folder of this name beside their target.
UPLOAD_PREFIX = ".manifold-chunks-"
# Seconds a failed upload waits for its parts to be removed before it goes on.
DISCARD_WAIT = 30.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ChunkDriver(Driver[Addition]):
    # No promises: a name is taken by a rename that checks first (no EXCLUSIVE_CREATE),
    # and folders move as the storage below moves them, which may be key by key.
    PROMISES = frozenset()

    async def init(self) -> None:
        options = self.options
        if options.part_size <= 0:
            raise InvalidRequest("part_size must be positive")
        if not options.chunk_prefix:
            raise InvalidRequest("chunk_prefix must not be empty")
        if options.num_list_workers < 1:
            raise InvalidRequest("num_list_workers must be at least 1")
        if not options.remote_path.strip():
            raise InvalidRequest("remote_path is required")
        options.remote_path = clean_path(options.remote_path)
        mount = self.storage.mount_path.rstrip("/") or "/"
        if mount == "/" or is_sub_path(mount, options.remote_path):
            raise InvalidRequest("remote_path lies inside the chunk storage itself")
        if is_sub_path(options.remote_path, mount):
            raise InvalidRequest("remote_path holds the chunk storage itself")
        self._tree()
        # Upload folders are marked while written; one a dead process left (a crash
        # mid-upload) is removed by the listing that meets it once stale. Paths are the
        # server tree's, the same for every Chunk storage of this process.
        self._temps = Temporaries("tree", self._remove_staging)

    async def drop(self) -> None:
        return None

    async def _remove_staging(self, path: str, is_dir: bool) -> bool:
        """Remove a stale upload folder (the ``Temporaries`` delete); whether it is gone."""
        with suppress(ObjectNotFound):
            await self._writable().remove_path(path)
        return True

    # --- reads ---------------------------------------------------------------------

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        if _is_chunked(dir):
            raise NotAFolder()
        remote = self._remote(dir.path)
        children = await self._tree().list_path(remote)
        uploads = [
            Seen(posixpath.join(remote, child.name), child.is_dir, child.modified)
            for child in children
            if child.name.startswith(UPLOAD_PREFIX)
        ]
        if uploads:
            await self._temps.sweep(uploads)
        workers = asyncio.Semaphore(self.options.num_list_workers)

        async def shown(child: Obj) -> Obj | None:
            async with workers:
                return await self._entry(dir.path, child)

        found = await asyncio.gather(*(shown(child) for child in children))
        return [obj for obj in found if obj is not None]

    async def get(self, path: str) -> Obj:
        if path == "/":
            return await self.root_obj()
        folder, name = posixpath.split(path)
        tree = self._tree()
        try:
            found = await tree.get_path(self._remote(path))
        except ObjectNotFound:
            found = await tree.get_path(self._remote(posixpath.join(folder, self._chunk(name))))
        obj = await self._entry(folder, found)
        if obj is None or obj.name != name:
            raise ObjectNotFound()  # a hidden entry, or a chunk folder asked by its own name
        return obj

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        if not _is_chunked(file):
            return await self._tree().link_path(self._remote(file.path), args)
        folder = self._remote(file.path)
        layout = await self._layout(folder)
        if not layout.complete:
            raise missing_part(layout)
        parts = layout.parts(folder, self.options.custom_ext)
        return Link(reader=ranged_reader(parts, self._tree().open_path))

    async def _entry(self, folder: str, child: Obj) -> Obj | None:
        """How ``child`` of the storage below shows in ``folder`` here: a chunk folder
        as its file, hidden entries as None, anything else as it is."""
        path = posixpath.join(folder, child.name)
        if child.name.startswith(UPLOAD_PREFIX):
            return None
        if not self.options.show_hidden and child.name.startswith("."):
            return None
        prefix = self.options.chunk_prefix
        if child.is_dir and child.name.startswith(prefix):
            layout = await self._layout(self._remote(path))
            if layout.complete:
                return _file_of(child.name[len(prefix) :], path, layout)
        return Obj(
            child.name, child.size, child.is_dir, child.modified, child.created, path,
            hash_info=child.hash_info,
        )  # fmt: skip

    async def _layout(self, remote_folder: str) -> Layout:
        entries = await self._tree().list_path(remote_folder)
        return layout_of(entries, self.options.custom_ext)

    # --- writes --------------------------------------------------------------------

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        tree = self._writable()
        folder = await self._folder(parent)
        if await self._found(posixpath.join(folder, self._chunk(self._own_name(name)))):
            raise ObjectExists()  # a chunked file holds the name
        made = await tree.make_dir_path(posixpath.join(folder, name))
        return self._plain(made, posixpath.join(parent.path, name))

    async def rename(self, src: Obj, new_name: str) -> Obj:
        tree = self._writable()
        self._own_name(new_name)
        if new_name == src.name:
            return src
        folder = self._remote(posixpath.dirname(src.path))
        await self._refuse_taken(folder, new_name, chunked_too=True)
        raw = self._chunk(new_name) if _is_chunked(src) else new_name
        await tree.rename_path(self._remote(src.path), raw)
        return _moved(src, posixpath.join(posixpath.dirname(src.path), raw), new_name)

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        tree = self._writable()
        if clean_path(posixpath.dirname(src.path)) == clean_path(dst_dir.path or "/"):
            return src
        folder = await self._folder(dst_dir)
        await self._refuse_taken(folder, src.name, chunked_too=True)
        await tree.move_path(self._remote(src.path), folder)
        raw = posixpath.basename(src.path)
        return _moved(src, posixpath.join(dst_dir.path, raw), src.name)

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        tree = self._writable()
        folder = await self._folder(dst_dir)
        await self._refuse_taken(folder, src.name, chunked_too=True)
        await tree.copy_path(self._remote(src.path), folder)
        raw = posixpath.basename(src.path)
        return _moved(src, posixpath.join(dst_dir.path, raw), src.name)

    async def remove(self, obj: Obj) -> None:
        await self._writable().remove_path(self._remote(obj.path))

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        tree = self._writable()
        name = self._own_name(upload.name)
        folder = await self._folder(dst_dir)
        await self._refuse_taken(folder, name, chunked_too=not upload.overwrite)
        small = upload.size is not None and upload.size <= self.options.part_size
        if self.options.chunk_large_file_only and small:
            stored = await tree.put_path(folder, upload)
            await self._drop_chunked(folder, name)
            return self._plain(stored, posixpath.join(dst_dir.path, name))
        staging = posixpath.join(folder, UPLOAD_PREFIX + secrets.token_hex(8))
        with self._temps.marked(Temporary(staging, is_dir=True)):
            await tree.make_dir_path(staging)
            try:
                layout = await self._upload_parts(tree, staging, upload)
                await self._place(tree, folder, staging, name, upload.overwrite)
            except BaseException:
                await _discard(tree, staging)
                raise
        return _file_of(name, posixpath.join(dst_dir.path, self._chunk(name)), layout)

    async def _upload_parts(self, tree: WritableTree, staging: str, upload: Upload) -> Layout:
        """Each part of the stream put into ``staging`` as it fills; the hashes after."""
        digest = hashlib.md5(usedforsecurity=False)
        splitter = Splitter(upload.stream, digest.update)
        layout = Layout()
        sizes = None if upload.size is None else part_sizes(upload.size, self.options.part_size)
        index = 0
        while index == 0 or (await splitter.more() if sizes is None else index < len(sizes)):
            size = None if sizes is None else sizes[index]
            limit = self.options.part_size if size is None else size
            part = Upload(
                part_name(index, self.options.custom_ext), splitter.part(limit), size,
                upload.modified, progress=upload.progress,
            )  # fmt: skip
            stored = await tree.put_path(staging, part)
            layout.sizes[index] = stored.size
            layout.modified[index] = upload.modified or stored.modified
            index += 1
        if sizes is not None and await splitter.more():
            raise InvalidRequest(f"the upload sent more than the {upload.size} bytes it said")
        if self.options.store_hash:
            await self._put_hash(tree, staging, "md5", digest.hexdigest(), upload)
            layout.hashes["md5"] = digest.hexdigest()
        return layout

    async def _put_hash(
        self, tree: WritableTree, staging: str, kind: str, value: str, upload: Upload
    ) -> None:
        # One byte, as OpenList writes it: some back ends refuse empty files.
        name = hash_name(kind, value, self.options.custom_ext)
        await tree.put_path(staging, Upload(name, _one_byte(), 1, upload.modified))

    async def _place(
        self, tree: WritableTree, folder: str, staging: str, name: str, overwrite: bool
    ) -> None:
        """Give the uploaded parts the file's name; what held it goes once they have."""
        chunked, plain = posixpath.join(folder, self._chunk(name)), posixpath.join(folder, name)
        old_chunked, old_plain = await self._found(chunked), await self._found(plain)
        if old_plain is not None and (old_plain.is_dir or not overwrite):
            raise ObjectExists()
        if old_chunked is not None and not overwrite:
            raise ObjectExists()
        aside = ""
        if old_chunked is not None:
            aside = parking_name()
            await tree.rename_path(chunked, aside)
        try:
            await tree.rename_path(staging, self._chunk(name))
        except BaseException:
            if aside:
                with suppress(ManifoldError):
                    await tree.rename_path(posixpath.join(folder, aside), self._chunk(name))
            raise
        if aside:
            await tree.remove_path(posixpath.join(folder, aside))
        if old_plain is not None:
            await tree.remove_path(plain)

    async def _drop_chunked(self, folder: str, name: str) -> None:
        """After a small file was put whole: the chunked file of its name goes."""
        chunked = posixpath.join(folder, self._chunk(name))
        if await self._found(chunked) is not None:
            await self._writable().remove_path(chunked)

    async def _refuse_taken(self, folder: str, name: str, chunked_too: bool) -> None:
        """``ObjectExists`` when a folder holds ``name`` (or anything does, with
        ``chunked_too``, a chunked file included)."""
        plain = await self._found(posixpath.join(folder, name))
        if plain is not None and (plain.is_dir or chunked_too):
            raise ObjectExists()
        if chunked_too and await self._found(posixpath.join(folder, self._chunk(name))):
            raise ObjectExists()

    # --- paths and names -----------------------------------------------------------

    def _remote(self, path: str) -> str:
        return clean_path(posixpath.join(self.options.remote_path, path.lstrip("/")))

    def _chunk(self, name: str) -> str:
        return self.options.chunk_prefix + name

    def _own_name(self, name: str) -> str:
        """``name`` as a new entry here: never one that would read as a chunk folder or
        as parts on their way."""
        validate_name(name)
        if name.startswith((self.options.chunk_prefix, UPLOAD_PREFIX)):
            raise InvalidName(f"invalid name: {name!r}: the chunk storage keeps it for its parts")
        return name

    async def _folder(self, dir: Obj) -> str:
        """The folder below that ``dir`` is, which must be there."""
        if _is_chunked(dir):
            raise NotAFolder()
        folder = self._remote(dir.path)
        found = await self._tree().get_path(folder)
        if not found.is_dir:
            raise NotAFolder()
        return folder

    async def _found(self, path: str) -> Obj | None:
        try:
            return await self._tree().get_path(path)
        except ObjectNotFound:
            return None

    def _plain(self, obj: Obj, path: str) -> Obj:
        return Obj(obj.name, obj.size, obj.is_dir, obj.modified, obj.created, path)

    def _writable(self) -> WritableTree:
        tree = self._tree()
        if not isinstance(tree, WritableTree):
            raise NotSupported("the tree of this server cannot be written through chunk")
        return tree

    def _tree(self) -> VirtualTree:
        if self.tree is None:
            raise ServerError("chunk is not connected to the tree")
        return self.tree


def _is_chunked(obj: Obj) -> bool:
    """Whether ``obj`` is a file kept in parts: its path names the chunk folder."""
    return not obj.is_dir and posixpath.basename(obj.path) != obj.name


def _file_of(name: str, path: str, layout: Layout) -> Obj:
    modified = layout.modified.get(0, _EPOCH)
    return Obj(name, layout.size, False, modified, path=path, hash_info=layout.hashes or None)


def _moved(obj: Obj, path: str, name: str) -> Obj:
    return Obj(name, obj.size, obj.is_dir, obj.modified, obj.created, path, obj.id, obj.thumb,
               obj.hash_info)  # fmt: skip


async def _one_byte() -> AsyncIterator[bytes]:
    yield b"\0"


async def _discard(tree: WritableTree, staging: str) -> None:
    """Remove an upload's parts, even while the upload is being cancelled: the removal
    runs as a task of its own, waited for a bounded time (and not at all once the
    upload is cancelled again: the removal goes on by itself)."""
    removal = asyncio.ensure_future(tree.remove_path(staging))
    with suppress(ManifoldError, TimeoutError):
        await asyncio.wait_for(asyncio.shield(removal), DISCARD_WAIT)


DRIVER = ChunkDriver
