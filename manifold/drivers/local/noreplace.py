"""Putting a finished temporary file or folder in place only if its name is still free.

A look first and a rename after lets two writers both see a free name and both
"win", the second silently replacing the first. Here the check and the rename are
one step: ``renameat2`` with ``RENAME_NOREPLACE`` where Linux offers it; else a hard
link for a file (``link`` never replaces), or for a folder an empty folder made to
claim the name (``mkdir`` never replaces) and then renamed over. Each fails with
``EEXIST`` when the name is taken.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable
from contextlib import suppress

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
# The kernel, the C library, a sandbox or the file system lacks the call or the flag.
_NOREPLACE_MISSING = frozenset({errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP})
# The file system keeps no hard links (FAT, some network and FUSE file systems).
_NO_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV})


def _load_renameat2() -> Callable[[int, bytes, int, bytes, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        func = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None  # a C library older than glibc 2.28, or none to load
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    renameat2: Callable[[int, bytes, int, bytes, int], int] = func
    return renameat2


_RENAMEAT2 = _load_renameat2()


def rename_new(temp: str, target: str) -> None:
    """Rename ``temp`` to ``target``; ``FileExistsError`` if ``target`` exists, changing nothing.

    ``temp`` and ``target`` lie in the same folder.
    """
    if _rename_noreplace(temp, target):
        return
    if os.path.isdir(temp) and not os.path.islink(temp):
        _claim_and_rename(temp, target, lambda: os.mkdir(target, 0o700), os.rmdir)
        return
    try:
        os.link(temp, target, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        _claim_and_rename(temp, target, lambda: _create_empty(target), os.unlink)
        return
    os.unlink(temp)


def _rename_noreplace(temp: str, target: str) -> bool:
    """Whether ``renameat2`` did the rename; False where it is not available."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(temp), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE):
        code = ctypes.get_errno()
        if code in _NOREPLACE_MISSING:
            return False
        raise OSError(code, os.strerror(code), target)
    return True


def _claim_and_rename(
    temp: str, target: str, claim: Callable[[], None], unclaim: Callable[[str], None]
) -> None:
    # The empty placeholder is briefly visible; only the last resort needs one.
    claim()
    try:
        os.replace(temp, target)
    except BaseException:
        with suppress(OSError):
            unclaim(target)
        raise


def _create_empty(path: str) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
