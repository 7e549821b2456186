"""One SFTP session: the caller's view of the tree, served over ``GuardedOps``.

Paths are the tree's paths below the user's base path, which is ``/`` here: each
one is cleaned (``..`` stops at the root, ``.`` and repeated slashes go) before the
file services join it onto the base path, which they never let a path leave. The
tree has no symbolic links, so ``lstat`` is ``stat`` and ``readlink`` has nothing to
read. Listings leave hidden entries out, as the file services do for every caller
who may not see them; a folder behind a password the user may not pass answers
"permission denied", as SFTP has no way to ask for one.

Every request asyncssh would otherwise answer from the host's own file system
(``statvfs``, ``lsetstat``, ``fsync``) is answered here from the tree, so that no
path a client names ever reaches the host.
"""

from __future__ import annotations

import stat as mode
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

import asyncssh

from manifold.errors import ManifoldError
from manifold.models import DiskUsage, Obj
from manifold.paths import clean_path
from manifold.policy.patterns import MAX_NAME_BYTES
from manifold.services.auth.service import Caller
from manifold.services.fs.ops import GuardedOps

from .files import ReadFile, SftpFile, WriteFile
from .statuses import NO_SUCH_FILE, OP_UNSUPPORTED, failure, sftp_error

T = TypeVar("T")

_DIR_MODE = mode.S_IFDIR | 0o755
_FILE_MODE = mode.S_IFREG | 0o644
# The block size a storage's space is counted in for ``statvfs`` (back ends report
# bytes, not blocks).
_BLOCK = 4096


class TreeSession(asyncssh.SFTPServer):
    """The SFTP subsystem of one authenticated connection."""

    def __init__(
        self, chan: asyncssh.SSHServerChannel[bytes], ops: GuardedOps, caller: Caller
    ) -> None:
        super().__init__(chan)
        self._ops = ops
        self._caller = caller
        self._open: set[SftpFile] = set()

    # --- names ----------------------------------------------------------------------

    def format_user(self, uid: int | None) -> str:
        return self._caller.user.username

    def format_group(self, gid: int | None) -> str:
        return self._caller.user.username

    def realpath(self, path: bytes) -> bytes:
        return tree_path(path).encode()

    async def stat(self, path: bytes) -> asyncssh.SFTPAttrs:
        obj = await self._call(self._ops.stat, self._caller, tree_path(path))
        return attrs_of(obj)

    async def lstat(self, path: bytes) -> asyncssh.SFTPAttrs:
        return await self.stat(path)

    async def fstat(self, file_obj: object) -> asyncssh.SFTPAttrs:
        if isinstance(file_obj, ReadFile):
            return attrs_of(file_obj.obj)
        size = file_obj.size if isinstance(file_obj, WriteFile) else 0
        now = int(datetime.now(UTC).timestamp())
        return asyncssh.SFTPAttrs(
            type=asyncssh.FILEXFER_TYPE_REGULAR,
            size=size,
            permissions=_FILE_MODE,
            atime=now,
            mtime=now,
        )

    async def scandir(self, path: bytes) -> AsyncIterator[asyncssh.SFTPName]:
        folder = tree_path(path)
        entries = await self._call(self._ops.list, self._caller, folder)
        here = await self._call(self._ops.stat, self._caller, folder)
        yield asyncssh.SFTPName(b".", attrs=attrs_of(here))
        yield asyncssh.SFTPName(b"..", attrs=attrs_of(here))
        for obj in entries:
            yield asyncssh.SFTPName(obj.name.encode(), attrs=attrs_of(obj))

    # --- files ----------------------------------------------------------------------

    async def open(self, path: bytes, pflags: int, attrs: asyncssh.SFTPAttrs) -> object:
        where = tree_path(path)
        file: SftpFile
        if pflags & asyncssh.FXF_WRITE:
            file = await self._call(WriteFile.open, self._ops, self._caller, where, pflags)
        else:
            file = ReadFile(await self._call(self._ops.open_reader, self._caller, where))
        self._open.add(file)
        return file

    async def read(self, file_obj: object, offset: int, size: int) -> bytes:
        if not isinstance(file_obj, ReadFile):
            raise failure("the file is open for writing")
        return await self._call(file_obj.read, offset, size)

    async def write(self, file_obj: object, offset: int, data: bytes) -> int:
        if not isinstance(file_obj, WriteFile):
            raise asyncssh.SFTPError(asyncssh.FX_PERMISSION_DENIED, "the file is open for reading")
        await self._call(file_obj.write, offset, data)
        return len(data)

    async def close(self, file_obj: object) -> None:
        if not isinstance(file_obj, ReadFile | WriteFile):
            return
        self._open.discard(file_obj)
        if isinstance(file_obj, WriteFile) and self.channel.is_closing():
            # Not the client's close: the session ends with the file open (asyncssh
            # closes what is left), so the upload is unfinished and leaves nothing.
            await file_obj.abort()
            return
        await self._call(file_obj.close)

    async def exit(self) -> None:
        """The session ended: whatever is still open is given up, an upload leaves nothing."""
        for file in list(self._open):
            self._open.discard(file)
            if isinstance(file, WriteFile):
                await file.abort()
            else:
                await file.close()

    # --- changes ----------------------------------------------------------------------

    async def setstat(self, path: bytes, attrs: asyncssh.SFTPAttrs) -> None:
        """Accepted, changing nothing (no storage here sets times or modes), once the
        path is known to be there; a size, which would cut the file, is refused."""
        obj = await self._call(self._ops.stat, self._caller, tree_path(path))
        if attrs.size is not None and attrs.size != obj.size:
            raise asyncssh.SFTPError(OP_UNSUPPORTED, "files cannot be cut to a size here")

    async def lsetstat(self, path: bytes, attrs: asyncssh.SFTPAttrs) -> None:
        """lsetstat@openssh.com: ``setstat``, as the tree has no links to stop at."""
        await self.setstat(path, attrs)

    async def fsetstat(self, file_obj: object, attrs: asyncssh.SFTPAttrs) -> None:
        return None

    async def fsync(self, file_obj: object) -> None:
        """fsync@openssh.com. A file open for reading has nothing to flush. An upload's
        bytes reach the storage only when the file is closed (``WriteFile``), and no
        back end here can make part of a file durable before that, so a write handle
        answers "op unsupported" rather than claim the bytes are safe."""
        if isinstance(file_obj, WriteFile):
            raise asyncssh.SFTPError(
                OP_UNSUPPORTED, "an upload is stored when the file is closed, not before"
            )

    async def statvfs(self, path: bytes) -> asyncssh.SFTPVFSAttrs:
        """statvfs@openssh.com (``df``): the space of the storage holding ``path``,
        looked up as the caller (``GuardedOps.space``); "op unsupported" where the
        storage does not report it."""
        usage = await self._call(self._ops.space, self._caller, tree_path(path))
        return vfs_attrs(usage)

    async def mkdir(self, path: bytes, attrs: asyncssh.SFTPAttrs) -> None:
        await self._call(self._ops.mkdir, self._caller, tree_path(path), strict=True)

    async def rmdir(self, path: bytes) -> None:
        where = tree_path(path)
        obj = await self._call(self._ops.stat, self._caller, where)
        if not obj.is_dir:
            raise failure("not a folder")
        if not await self._call(self._ops.is_empty, self._caller, where):
            raise failure("the folder is not empty")
        await self._call(self._ops.remove, self._caller, where, strict=True)

    async def remove(self, path: bytes) -> None:
        where = tree_path(path)
        obj = await self._call(self._ops.stat, self._caller, where)
        if obj.is_dir:
            raise failure("a folder is removed with rmdir")
        await self._call(self._ops.remove, self._caller, where, strict=True)

    async def rename(self, oldpath: bytes, newpath: bytes) -> None:
        """SFTP's rename, which leaves a taken name alone."""
        await self._move(oldpath, newpath, overwrite=False)

    async def posix_rename(self, oldpath: bytes, newpath: bytes) -> None:
        """posix-rename@openssh.com: a file at the taken name is replaced (with the
        remove permission); a folder never is, nor an ancestor of the source, as the
        rule book (``services.fs.rules``) decides for every protocol."""
        await self._move(oldpath, newpath, overwrite=True)

    async def readlink(self, path: bytes) -> bytes:
        await self.stat(path)
        raise asyncssh.SFTPError(NO_SUCH_FILE, "not a symbolic link")

    async def symlink(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPError(OP_UNSUPPORTED, "symbolic links are not supported")

    async def link(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPError(OP_UNSUPPORTED, "hard links are not supported")

    async def _move(self, oldpath: bytes, newpath: bytes, overwrite: bool) -> None:
        src, dst = tree_path(oldpath), tree_path(newpath)
        if src == dst:
            await self.stat(oldpath)
            return
        await self._call(self._ops.rename, self._caller, src, dst, overwrite=overwrite, strict=True)

    @staticmethod
    async def _call(func: Callable[..., Awaitable[T]], *args: object, **kwargs: object) -> T:
        try:
            return await func(*args, **kwargs)
        except ManifoldError as exc:
            raise sftp_error(exc) from exc


def tree_path(raw: bytes) -> str:
    """The tree path a client's path names, relative paths from the root."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise asyncssh.SFTPError(NO_SUCH_FILE, "names here are UTF-8") from None
    return clean_path(text)


def attrs_of(obj: Obj) -> asyncssh.SFTPAttrs:
    stamp = int(obj.modified.timestamp())
    return asyncssh.SFTPAttrs(
        type=asyncssh.FILEXFER_TYPE_DIRECTORY if obj.is_dir else asyncssh.FILEXFER_TYPE_REGULAR,
        size=0 if obj.is_dir else obj.size,
        permissions=_DIR_MODE if obj.is_dir else _FILE_MODE,
        atime=stamp,
        mtime=stamp,
        nlink=1,
    )


def vfs_attrs(usage: DiskUsage) -> asyncssh.SFTPVFSAttrs:
    """A storage's space as ``statvfs`` counts it, in blocks of ``_BLOCK`` bytes."""
    return asyncssh.SFTPVFSAttrs(
        bsize=_BLOCK,
        frsize=_BLOCK,
        # A back end that tells its free space alone (total 0) shows it as its size.
        blocks=max(usage.total, usage.used + usage.free) // _BLOCK,
        bfree=usage.free // _BLOCK,
        bavail=usage.free // _BLOCK,
        namemax=MAX_NAME_BYTES,
    )
