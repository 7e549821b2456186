"""Folder trees of any depth, worked through one open folder at a time.

A path that names a folder a few thousand levels down is longer than the system takes
(``PATH_MAX``), and a function that calls itself for each level stops at Python's
recursion limit. ``remove_tree`` does neither: it holds one folder open, goes down by
name relative to it and back up through ``..``, keeping only the names on its way.
"""

from __future__ import annotations

import os
import stat

from manifold.errors import ServerError

_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOFOLLOW", 0)
)


_UP_FLAGS = _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0)


class TreeChanged(ServerError):
    default_message = "the folder was moved while it was being removed"


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
