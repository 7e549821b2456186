"""Virtual (AList): a made-up tree, for trying clients and measuring the server without
a back end. Each folder holds ``num_file`` files of ``min_file_size`` to
``max_file_size`` bytes and ``num_folder`` folders, down to ``depth`` levels.

Unlike AList's, whose every listing is drawn anew, the tree is drawn from each folder's
path (and ``root_folder_path``), so it is the same on every listing, lookup and
restart, and a file found once is found again. A file's bytes are random, drawn from
its path the same way: any range of it reads the same every time, without a byte
stored. Read-only: AList's Virtual pretends to take writes and drops them, which
would lose a user's data without a word.
"""

from __future__ import annotations

import builtins
import posixpath
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from manifold.drivers.base import Driver, LinkArgs
from manifold.drivers.virtual.meta import Addition
from manifold.errors import InvalidRequest, NotAFile, NotAFolder, ObjectNotFound
from manifold.models import Link, Obj

# A file's bytes are one block of this many random bytes, repeated.
BLOCK = 64 * 1024
NAME_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
NAME_LENGTH = 10


class VirtualDriver(Driver[Addition]):
    _born: datetime

    async def init(self) -> None:
        options = self.options
        if min(options.num_file, options.num_folder, options.min_file_size, options.depth) < 0:
            raise InvalidRequest("num_file, num_folder, min_file_size and depth must be 0 or more")
        if options.min_file_size > options.max_file_size:
            raise InvalidRequest("min_file_size must not be more than max_file_size")
        if options.num_file + options.num_folder > self.resources.max_listing_entries:
            raise InvalidRequest("num_file and num_folder make folders longer than listings may be")
        self._born = (self.storage.modified or datetime.now(UTC)).replace(microsecond=0)

    async def drop(self) -> None:
        return None

    async def root_obj(self) -> Obj:
        return Obj("", 0, True, self._born, path="/")

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        if not dir.is_dir:
            raise NotAFolder()
        return self._children(dir.path or "/")

    async def get(self, path: str) -> Obj:
        found = await self.root_obj()
        for name in path.strip("/").split("/") if path.strip("/") else []:
            if not found.is_dir:
                raise ObjectNotFound()
            found = _named(self._children(found.path), name)
        return found

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        block = random.Random(self._seed(file.path)).randbytes(BLOCK)
        size = file.size
        return Link(reader=lambda offset, length: _read(block, size, offset, length))

    def _children(self, path: str) -> builtins.list[Obj]:
        """The folder's entries, drawn from its path: the same every time."""
        options = self.options
        draw = random.Random(self._seed(path))
        level = len([part for part in path.split("/") if part])
        folders = options.num_folder if level < options.depth else 0
        names = _names(draw, options.num_file + folders)
        objs = []
        for index, name in enumerate(names):
            child = posixpath.join(path, name)
            if index < options.num_file:
                size = draw.randint(options.min_file_size, options.max_file_size)
                objs.append(Obj(name, size, False, self._born, path=child))
            else:
                objs.append(Obj(name, 0, True, self._born, path=child))
        return objs

    def _seed(self, path: str) -> str:
        return f"{self.options.root_folder_path}:{path}"


def _named(objs: list[Obj], name: str) -> Obj:
    for obj in objs:
        if obj.name == name:
            return obj
    raise ObjectNotFound()


def _names(draw: random.Random, count: int) -> list[str]:
    """``count`` different names of random letters and digits."""
    names: dict[str, None] = {}
    while len(names) < count:
        names["".join(draw.choices(NAME_LETTERS, k=NAME_LENGTH))] = None
    return list(names)


async def _read(block: bytes, size: int, offset: int, length: int | None) -> AsyncIterator[bytes]:
    end = size if length is None else min(size, offset + length)
    while offset < end:
        start = offset % BLOCK
        piece = block[start : start + min(end - offset, BLOCK - start)]
        offset += len(piece)
        yield piece


DRIVER = VirtualDriver
