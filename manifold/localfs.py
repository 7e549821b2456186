"""Folder trees of any depth, worked through one open folder at a time.

A path that names a folder a few thousand levels down is longer than the system takes
(``PATH_MAX``), and a function that calls itself for each level stops at Python's
recursion limit. ``remove_tree`` and ``copy_tree`` do neither: they hold one folder
open (one on each side for a copy), go down by name relative to it and back up
through ``..``, keeping only the names on their way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
from pathlib import Path

from manifold.errors import ServerError

_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOFOLLOW", 0)
)


_UP_FLAGS = _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1 << 20


class TreeChanged(ServerError):
    default_message = "the folder was moved while it was being removed"


class CopiedTreeChanged(TreeChanged):
    default_message = "the folder was moved while it was being copied"


def remove_tree(path: str) -> None:
    """Delete the folder ``path`` and everything below it, however deep.

    Links below it are removed as links, never followed. A folder moved away while
    this runs (its ``..`` is no longer the folder it was entered from) stops it.
    """
    _empty(os.open(path, _DIR_FLAGS))
    os.rmdir(path)


def _empty(fd: int) -> None:
    """Empty the open folder ``fd``, then close it."""
    pending = [_clear_files(fd)]  # at each open level: its folders still to remove
    entered: list[tuple[str, tuple[int, int]]] = []  # name of each level, its parent's id
    try:
        while True:
            if pending[-1]:
                name = pending[-1].pop()
                parent_id = _identity(fd)
                inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = inner
                entered.append((name, parent_id))
                pending.append(_clear_files(fd))
                continue
            pending.pop()
            if not entered:
                return
            name, parent_id = entered.pop()
            outer = os.open("..", _UP_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = outer
            if _identity(fd) != parent_id:
                raise TreeChanged()
            os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)


def _clear_files(fd: int) -> list[str]:
    """Unlink every entry of the open folder ``fd`` that is not a folder; the folders' names."""
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return folders


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise TreeChanged()
    return st.st_dev, st.st_ino


def copy_tree(source: str, target: str, made: bool = False) -> None:
    """Copy the folder ``source`` to the new folder ``target``, however deep
    (``made``: the caller made ``target``, empty, to hold it while it fills).

    As ``cp -a`` does: links are copied as links, never followed; files and folders
    keep their mode and modified time. Pipes, sockets and devices are left out, as
    listings leave them out. What was made is left for the caller to remove on failure.
    """
    if not made:
        os.mkdir(target, 0o700)
    src = os.open(source, _DIR_FLAGS)
    try:
        dst = os.open(target, _DIR_FLAGS)
    except BaseException:
        os.close(src)
        raise
    _copy_levels(src, dst)


def _copy_levels(src: int, dst: int) -> None:
    """Copy the open folder ``src`` into the open, empty folder ``dst``; close both."""
    entered: list[tuple[tuple[int, int], tuple[int, int]]] = []  # each level's parents' ids
    try:
        pending = [_copy_files(src, dst)]  # at each open level: its folders still to copy
        while True:
            if pending[-1]:
                name = pending[-1].pop()
                ids = _identity(src), _identity(dst)
                os.mkdir(name, 0o700, dir_fd=dst)
                src = _enter(src, name)
                dst = _enter(dst, name)
                entered.append(ids)
                pending.append(_copy_files(src, dst))
                continue
            pending.pop()
            _copy_stat(src, dst)
            if not entered:
                return
            src_id, dst_id = entered.pop()
            src = _enter(src, "..", _UP_FLAGS)
            dst = _enter(dst, "..", _UP_FLAGS)
            if _identity(src) != src_id or _identity(dst) != dst_id:
                raise CopiedTreeChanged()
    finally:
        os.close(src)
        os.close(dst)


def _enter(fd: int, name: str, flags: int = _DIR_FLAGS) -> int:
    """The folder ``name`` of the open folder ``fd``, opened; ``fd`` is closed once it is."""
    inner = os.open(name, flags, dir_fd=fd)
    os.close(fd)
    return inner


def _copy_files(src: int, dst: int) -> list[str]:
    """Copy every file and link of the open folder ``src`` into ``dst``; the folders' names."""
    folders = []
    with os.scandir(src) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            elif entry.is_symlink():
                os.symlink(os.readlink(entry.name, dir_fd=src), entry.name, dir_fd=dst)
            elif entry.is_file(follow_symlinks=False):
                _copy_file(src, dst, entry.name)
    return folders


def _copy_file(src: int, dst: int, name: str) -> None:
    source = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=src)
    try:
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o600, dir_fd=dst)
        try:
            with (
                open(source, "rb", closefd=False) as reader,
                open(target, "wb", closefd=False) as writer,
            ):
                shutil.copyfileobj(reader, writer, _CHUNK)
            _copy_stat(source, target)
        finally:
            os.close(target)
    finally:
        os.close(source)


def _copy_stat(src: int, dst: int) -> None:
    """Give the open ``dst`` the mode and times of the open ``src``."""
    st = os.fstat(src)
    os.fchmod(dst, stat.S_IMODE(st.st_mode))
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def discard_tree(path: str | os.PathLike[str]) -> None:
    """Best-effort clean-up of a file or folder tree of any depth: a missing path or an
    entry that cannot be removed is left without an error (what is left is swept later)."""
    path = os.fspath(path)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            remove_tree(path)
        else:
            os.unlink(path)
    except (OSError, ServerError):
        return


def stale_entries(folder: Path, prefix: str, kept: set[str], idle_seconds: float) -> list[Path]:
    """Entries of ``folder`` named ``prefix*`` that no task needs (``kept`` paths) and
    that nothing has changed for ``idle_seconds``: what a stopped run left. A recent
    one may be in use by another process sharing the folder (an upload being spooled)."""
    before = time.time() - idle_seconds
    stale = []
    for entry in folder.glob(f"{prefix}*"):
        with contextlib.suppress(FileNotFoundError):
            if str(entry) not in kept and entry.lstat().st_mtime < before:
                stale.append(entry)
    return stale
