"""Files and folders in progress, held by the process writing them.

Data in progress (an upload's temporary, a spooled body, an extraction's work folder)
is written under a name of its own and must go when the process writing it dies
without cleaning up (a kill, a crash, the machine's power). Its age says nothing: a
slow upload is old, a crash a second ago left a young one. What says it is a lock:
the writer holds an ``flock`` on the entry (``hold``) for as long as it writes, and
the kernel lets go of it when the writer's process ends, however it ends. A sweep
removes only what nobody holds (``take_unheld``), so it may run at any time, in any
process sharing the folder: this one's other storages, other workers, another
instance on the same disk.

A sweep and a writer that has just made its entry race for the lock: the sweep takes
it first and removes the entry, or the writer does and the sweep leaves it. A writer
that lost finds its entry gone when its lock is granted (``hold`` raises
``FileNotFoundError``), before it wrote anything.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable

_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def hold(path: str) -> int:
    """Hold the file or folder at ``path``, which the caller has just made, until the
    descriptor returned is closed. ``FileNotFoundError`` when a sweep took it first."""
    fd = os.open(path, _OPEN)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits only while a sweep removes it
        if not _still_there(fd, path):
            raise FileNotFoundError(errno.ENOENT, "removed by a sweep", path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def take_unheld(path: str, remove: Callable[[str], None]) -> bool:
    """Remove the entry at ``path`` with ``remove`` unless a live process holds it;
    whether it was removed. An entry that can hold no lock (a link, a pipe) goes too."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        remove(path)
        return True
    fd = os.open(path, _OPEN)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not _still_there(fd, path):
            return False
        remove(path)  # under the lock: a writer that made it meanwhile waits, then sees
        return True
    finally:
        os.close(fd)


def _still_there(fd: int, path: str) -> bool:
    """Whether ``path`` still names the entry open as ``fd``."""
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
