"""The server's path tree as drivers that serve other mounts (Alias) see it.

The server hands a driver one of these as ``Driver.tree`` before ``init``; back ends
of their own never use it.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from manifold.models import Link, LinkArgs, Obj

if TYPE_CHECKING:  # the contract re-exports this module; the type alone comes back
    from manifold.drivers.base import Upload


class VirtualTree(Protocol):
    """The server's whole path tree, for drivers that serve other mounts (Alias).

    Paths are virtual and absolute; no user permission applies at this level.
    """

    async def get_path(self, path: str) -> Obj: ...

    async def list_path(self, path: str) -> builtins.list[Obj]: ...

    async def link_path(self, path: str, args: LinkArgs) -> Link: ...

    def open_path(self, path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
        """Bytes ``[offset, offset + length)`` of the file at ``path`` (``length`` None:
        to the end), read the way the server reads any link: for a driver that reads
        other mounts' bytes itself (Chunk's parts) rather than handing a link on."""
        ...

    def mount_path_of(self, path: str) -> str | None:
        """The mount path of the storage serving ``path``; None for a virtual folder."""
        ...


@runtime_checkable
class WritableTree(VirtualTree, Protocol):
    """A ``VirtualTree`` that can also change the tree (Alias with ``writable``).

    Paths are virtual, absolute and already allowed: no user permission applies.
    Each method behaves as the ``Driver`` method of the same meaning on the storage
    holding the path, and returns objects as that storage's driver made them.
    Moving between two storages raises ``ServerError`` (AList's "can't move files
    between two storages, try to copy"); copying between them streams the bytes.
    """

    async def make_dir_path(self, path: str) -> Obj:
        """Create folder ``path`` and any missing parents; an existing folder is fine."""
        ...

    async def rename_path(self, path: str, new_name: str) -> Obj: ...

    async def move_path(self, path: str, dst_dir: str) -> Obj: ...

    async def copy_path(self, path: str, dst_dir: str) -> Obj: ...

    async def remove_path(self, path: str) -> None: ...

    async def put_path(self, dst_dir: str, upload: Upload) -> Obj: ...
