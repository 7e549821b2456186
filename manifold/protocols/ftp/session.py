"""One logged-in FTP user: who they are, where they stand, and the tree they see.

Paths a client sends are read against the working folder, ``..`` climbing one
folder and never above ``/`` (the user's base path, which ``GuardedOps`` joins and
confines); nothing is decoded, so ``%2e%2e`` is a name like any other. Every call
goes through ``GuardedOps`` with the user's ``Caller`` (protocol ``ftp``), and the
guest's login password as the folder (meta) password, as AList does.
"""

from __future__ import annotations

from dataclasses import dataclass

from manifold.errors import NotAFile, NotAFolder
from manifold.models import Obj
from manifold.services.auth.service import Caller
from manifold.services.fs.handles import ReadHandle, WriteHandle
from manifold.services.fs.ops import GuardedOps


def resolve(cwd: str, given: str) -> str:
    """The absolute path ``given`` names from ``cwd``, ``.`` and ``..`` worked out."""
    path = given if given.startswith("/") else f"{cwd}/{given}"
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/" + "/".join(parts)


@dataclass(slots=True)
class Session:
    ops: GuardedOps
    caller: Caller
    password: str = ""
    cwd: str = "/"

    def path(self, given: str) -> str:
        return resolve(self.cwd, given)

    async def stat(self, path: str) -> Obj:
        return await self.ops.stat(self.caller, path, self.password)

    async def folder(self, path: str) -> Obj:
        found = await self.stat(path)
        if not found.is_dir:
            raise NotAFolder()
        return found

    async def list(self, path: str) -> list[Obj]:
        return await self.ops.list(self.caller, path, self.password)

    async def reader(self, path: str) -> ReadHandle:
        return await self.ops.open_reader(self.caller, path, self.password)

    async def writer(self, path: str, append: bool, offset: int) -> WriteHandle:
        return await self.ops.open_writer(
            self.caller,
            path,
            self.password,
            append=append,
            offset=offset,
            strict=True,
        )

    async def mkdir(self, path: str) -> None:
        await self.ops.mkdir(self.caller, path, self.password, strict=True)

    async def remove(self, path: str, folder: bool) -> None:
        found = await self.stat(path)
        if found.is_dir != folder:
            raise NotAFolder() if folder else NotAFile()
        await self.ops.remove(self.caller, path, self.password, strict=True)

    async def rename(self, src: str, dst: str) -> None:
        """``src`` to the exact path ``dst``: RNTO replaces a file by a file, never a
        folder, as the rule book (``services.fs.rules``) decides for every protocol.

        Between two storages the rename runs as a move task, which ends before this
        returns (each file copied whole, then its source removed).
        """
        await self.ops.rename(self.caller, src, dst, True, self.password, strict=True)
