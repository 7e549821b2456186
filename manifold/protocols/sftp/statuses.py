"""The SFTP status of every Manifold error, in one table.

SFTP version 3, which every common client speaks, has few codes a server may send:
no such file, permission denied, failure and op unsupported; a name too long is
``SSH_FX_INVALID_FILENAME`` to a client of version 6, permission denied to the
others. The most specific class of an error's ancestry that the table names decides
the code, so a new subclass answers as its parent does until it is given a row. The
message is the error's own text (AList's wording), which clients show.
"""

from __future__ import annotations

import asyncssh

from manifold import errors

NO_SUCH_FILE = asyncssh.FX_NO_SUCH_FILE
PERMISSION_DENIED = asyncssh.FX_PERMISSION_DENIED
FAILURE = asyncssh.FX_FAILURE
OP_UNSUPPORTED = asyncssh.FX_OP_UNSUPPORTED
# SFTP version 6's code for a name the server cannot take.
INVALID_FILENAME = asyncssh.FX_INVALID_FILENAME

STATUS: dict[type[errors.ManifoldError], int] = {
    errors.ManifoldError: FAILURE,
    errors.Unauthorized: PERMISSION_DENIED,
    errors.Forbidden: PERMISSION_DENIED,
    errors.FileExists: FAILURE,
    errors.NotFound: NO_SUCH_FILE,
    errors.ObjectNotFound: NO_SUCH_FILE,
    errors.StorageNotFound: NO_SUCH_FILE,
    errors.NotSupported: OP_UNSUPPORTED,
    errors.InvalidName: INVALID_FILENAME,
}


def status_of(exc: errors.ManifoldError) -> int:
    for cls in type(exc).__mro__:
        status = STATUS.get(cls)
        if status is not None:
            return status
    return FAILURE


class InvalidFilename(asyncssh.SFTPError):
    """A name the server will not take: ``SSH_FX_INVALID_FILENAME`` to a client of
    version 6, permission denied to older ones, whose codes have nothing nearer; never
    the generic failure, which clients may take for a passing one and retry."""

    def __init__(self, reason: str) -> None:
        super().__init__(INVALID_FILENAME, reason)

    def encode(self, version: int) -> bytes:
        if version < 6:
            return asyncssh.SFTPError(PERMISSION_DENIED, self.reason, self.lang).encode(version)
        return super().encode(version)


def sftp_error(exc: errors.ManifoldError) -> asyncssh.SFTPError:
    """The SFTP answer to ``exc``."""
    code = status_of(exc)
    if code == INVALID_FILENAME:
        return InvalidFilename(exc.message)
    return asyncssh.SFTPError(code, exc.message)


def failure(reason: str) -> asyncssh.SFTPError:
    """An answer for what only SFTP knows (a write out of order, a folder not empty)."""
    return asyncssh.SFTPError(FAILURE, reason)
