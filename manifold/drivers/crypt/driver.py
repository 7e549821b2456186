"""Crypt: a path of the server's tree (``remote_path``, any storage) kept encrypted
exactly as rclone's crypt remote keeps it, shown here in clear.

Everything goes through the server's tree, as Alias does: the storage below lists,
links, puts (atomically, in its own way), renames, moves, copies and removes the
encrypted objects; this driver only translates names and contents. ``Obj.path`` is
the plain path inside this storage; each call encrypts it into the path below.

Listings show plain sizes (worked out from the encrypted ones) and leave out names
that do not decrypt; a folder where names look encrypted but none decrypts answers
a wrong-password error instead of an empty listing. A read opens only the blocks of
its range; a block that fails authentication fails that read. Writes need the tree
to be writable (the server's always is).
"""

from __future__ import annotations

import builtins
import posixpath
import re
from collections.abc import AsyncIterator

from manifold.drivers.base import (
    Driver,
    LinkArgs,
    Upload,
    VirtualTree,
    WritableTree,
    validate_name,
)
from manifold.drivers.crypt.blocks import BadFile, derive_keys, encrypted_size, plain_size
from manifold.drivers.crypt.encodings import ENCODINGS
from manifold.drivers.crypt.meta import Addition
from manifold.drivers.crypt.names import MODES, Names, NotEncrypted
from manifold.drivers.crypt.obscure import plain, stored
from manifold.drivers.crypt.source import read_range
from manifold.drivers.crypt.streams import decrypted, encrypted
from manifold.errors import (
    InvalidRequest,
    NotAFile,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    ServerError,
)
from manifold.models import THUMB_SELF, Link, Obj
from manifold.paths import is_sub_path

# AList's rule for the suffix of files whose names are not encrypted.
_SUFFIX = re.compile(r"[.][A-Za-z0-9_-]{2,}")
# Entries of a listing decrypted on the event loop; more are decrypted in a thread.
_ON_THE_LOOP = 1000


class WrongPassword(ServerError):
    default_message = "no name here decrypts: wrong password or salt?"


class CryptDriver(Driver[Addition]):
    _names: Names
    _data_key: bytes
    _remote: str

    async def init(self) -> None:
        options = self.options
        password, salt = plain(options.password), plain(options.salt)
        if not password:
            raise InvalidRequest("password is required")
        self._check(options)
        # Kept obscured from now on, as AList keeps them (saved after init).
        self.options = options.model_copy(
            update={"password": stored(options.password), "salt": stored(options.salt)}
        )
        self._remote = self._remote_of(options.remote_path)
        keys = await self.run_blocking(derive_keys, password, salt)
        encoding = ENCODINGS[options.filename_encoding]
        dirs = options.directory_name_encryption == "true"
        mode, suffix = options.filename_encryption, options.encrypted_suffix
        self._names = Names(mode, dirs, encoding, suffix, keys.name, keys.tweak)
        self._data_key = keys.data

    @staticmethod
    def _check(options: Addition) -> None:
        if options.filename_encryption not in MODES:
            raise InvalidRequest(f"unknown filename_encryption {options.filename_encryption!r}")
        if options.filename_encoding not in ENCODINGS:
            raise InvalidRequest(f"unknown filename_encoding {options.filename_encoding!r}")
        if options.directory_name_encryption not in ("true", "false"):
            raise InvalidRequest("directory_name_encryption is true or false")
        if not _SUFFIX.fullmatch(options.encrypted_suffix):
            raise InvalidRequest("EncryptedSuffix is Illegal")

    def _remote_of(self, remote_path: str) -> str:
        remote = posixpath.normpath("/" + remote_path.strip().lstrip("/"))
        mount = self.storage.mount_path.rstrip("/") or "/"
        if mount == "/" or is_sub_path(mount, remote):
            raise InvalidRequest(f"remote path {remote} lies inside the crypt storage itself")
        if is_sub_path(remote, mount):
            raise InvalidRequest(f"remote path {remote} holds the crypt storage itself")
        return remote

    async def drop(self) -> None:
        return None

    # --- paths ---------------------------------------------------------------------

    def _real_dir(self, path: str) -> str:
        """The folder ``path`` of this storage, as a path of the tree below."""
        parts = [self._names.dir_name(p) for p in path.split("/") if p]
        return posixpath.join(self._remote, *parts)

    def _real(self, obj: Obj) -> str:
        if obj.is_dir or obj.path in ("", "/"):
            return self._real_dir(obj.path)
        parent, name = posixpath.split(obj.path)
        return posixpath.join(self._real_dir(parent), self._names.file_name(name))

    def _other_kind(self, real_dir: str, name: str, is_dir: bool) -> str | None:
        """Where an object of the other kind named ``name`` would be, when its stored
        name differs from this kind's (so the storage below would not refuse it)."""
        as_file, as_dir = self._names.file_name(name), self._names.dir_name(name)
        if as_file == as_dir:
            return None
        return posixpath.join(real_dir, as_dir if not is_dir else as_file)

    async def _refuse_namesake(self, real_dir: str, name: str, is_dir: bool) -> None:
        other = self._other_kind(real_dir, name, is_dir)
        if other is None:
            return
        try:
            found = await self._tree().get_path(other)
        except ObjectNotFound:
            return
        if found.is_dir != is_dir:
            raise ObjectExists()

    def _plain(self, below: Obj, path: str, name: str) -> Obj:
        """``below`` (an object of the storage below) as this storage shows it."""
        size = 0
        if not below.is_dir:
            try:
                size = plain_size(below.size)
            except BadFile:
                size = 0  # damaged: shown, as rclone shows it, so it can be removed
        thumb = THUMB_SELF if self.options.thumbnail and not below.is_dir else ""
        return Obj(name, size, below.is_dir, below.modified, below.created, path, thumb=thumb)

    # --- reads ---------------------------------------------------------------------

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        entries = await self._tree().list_path(self._real(dir))
        if len(entries) <= _ON_THE_LOOP:
            return self._decrypted(entries, dir.path or "/")
        # Some 15 us a name: a big folder is decrypted off the event loop.
        return await self.run_blocking(self._decrypted, entries, dir.path or "/")

    def _decrypted(self, entries: builtins.list[Obj], folder: str) -> builtins.list[Obj]:
        shown: builtins.list[Obj] = []
        failed = decrypted = 0
        for entry in entries:
            name = self._plain_name(entry)
            if name is None:
                failed += self._names.looks_encrypted(entry.name, entry.is_dir)
                continue
            decrypted += 1
            if self.options.show_hidden or not name.startswith("."):
                shown.append(self._plain(entry, posixpath.join(folder, name), name))
        if failed and not decrypted:
            raise WrongPassword()
        return shown

    def _plain_name(self, entry: Obj) -> str | None:
        try:
            if entry.is_dir:
                return self._names.plain_dir_name(entry.name)
            return self._names.plain_file_name(entry.name)
        except NotEncrypted:
            return None

    async def get(self, path: str) -> Obj:
        if path in ("", "/"):
            return await self.root_obj()
        return self._plain(await self._below(path), path, posixpath.basename(path))

    async def _below(self, path: str) -> Obj:
        """The object of the storage below that stands for ``path``."""
        parent, name = posixpath.split(path)
        real_dir = self._real_dir(parent)
        as_file, as_dir = self._names.file_name(name), self._names.dir_name(name)
        tries = [(as_file, False), (as_dir, True)] if as_file != as_dir else [(as_file, False)]
        if "." not in name:
            tries.reverse()  # AList's guess: a name without a dot is more often a folder
        for stored_name, is_dir in tries:
            try:
                found = await self._tree().get_path(posixpath.join(real_dir, stored_name))
            except ObjectNotFound:
                continue
            if found.is_dir == is_dir or as_file == as_dir:
                return found
        raise ObjectNotFound()

    async def backing_path(self, path: str) -> str | None:
        """Where ``path`` is in the tree below (the services follow it to find overlaps
        and what the storage below promises); ``ObjectNotFound`` when nothing is there."""
        if path in ("", "/"):
            return self._remote
        found = await self._below(path)
        parent = self._real_dir(posixpath.dirname(path))
        return posixpath.join(parent, found.name)

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        if args.type == "thumb":
            return await self._thumb_link(file)
        below = await self._tree().link_path(self._real(file), LinkArgs(ip=args.ip))

        def reader(offset: int, length: int | None) -> AsyncIterator[bytes]:
            def source(start: int, size: int | None) -> AsyncIterator[bytes]:
                return read_range(below, start, size, self.resources)

            return decrypted(source, self._data_key, offset, length, self.run_blocking)

        return Link(reader=reader, expires_in=below.expires_in)

    async def _thumb_link(self, file: Obj) -> Link:
        """AList's thumbnails: ``.thumbnails/<name>.webp`` beside the file, encrypted too."""
        if not self.options.thumbnail:
            raise NotSupported("thumbnails are off for this storage")
        parent, name = posixpath.split(file.path)
        thumb = posixpath.join(parent, ".thumbnails", f"{name}.webp")
        return await self.link(await self.get(thumb), LinkArgs())

    # --- writes --------------------------------------------------------------------

    def _writable(self) -> WritableTree:
        tree = self._tree()
        if not isinstance(tree, WritableTree):
            raise NotSupported("the tree of this server cannot be written through crypt")
        return tree

    def _tree(self) -> VirtualTree:
        if self.tree is None:
            raise ServerError("crypt is not connected to the tree")
        return self.tree

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        tree = self._writable()
        real_dir = self._real(parent)
        await self._refuse_namesake(real_dir, validate_name(name), True)
        made = await tree.make_dir_path(posixpath.join(real_dir, self._names.dir_name(name)))
        return self._plain(made, posixpath.join(parent.path or "/", name), name)

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        tree = self._writable()
        name = validate_name(upload.name)
        real_dir = self._real(dst_dir)
        await self._refuse_namesake(real_dir, name, False)
        size = None if upload.size is None else encrypted_size(upload.size)
        stream = encrypted(upload.stream, self._data_key, upload.size, self.run_blocking)
        inner = Upload(
            self._names.file_name(name),
            stream,
            size,
            upload.modified,
            upload.overwrite,
            upload.progress,
        )
        made = await tree.put_path(real_dir, inner)
        return self._plain(made, posixpath.join(dst_dir.path or "/", name), name)

    async def rename(self, src: Obj, new_name: str) -> Obj:
        tree = self._writable()
        parent = posixpath.dirname(src.path)
        real_dir = self._real_dir(parent)
        await self._refuse_namesake(real_dir, validate_name(new_name), src.is_dir)
        names = self._names
        stored_name = names.dir_name(new_name) if src.is_dir else names.file_name(new_name)
        renamed = await tree.rename_path(self._real(src), stored_name)
        return self._plain(renamed, posixpath.join(parent, new_name), new_name)

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        tree = self._writable()
        name = posixpath.basename(src.path)
        real_dst = self._real(dst_dir)
        await self._refuse_namesake(real_dst, name, src.is_dir)
        moved = await tree.move_path(self._real(src), real_dst)
        return self._plain(moved, posixpath.join(dst_dir.path or "/", name), name)

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        tree = self._writable()
        name = posixpath.basename(src.path)
        real_dst = self._real(dst_dir)
        await self._refuse_namesake(real_dst, name, src.is_dir)
        copied = await tree.copy_path(self._real(src), real_dst)
        return self._plain(copied, posixpath.join(dst_dir.path or "/", name), name)

    async def remove(self, obj: Obj) -> None:
        await self._writable().remove_path(self._real(obj))


DRIVER = CryptDriver
