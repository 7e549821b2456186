"""The SFTP status of every Manifold error, in one table.

SFTP version 3, which every common client speaks, has few codes a server may send:
no such file, permission denied, failure and op unsupported. The most specific class
of an error's ancestry that the table names decides the code, so a new subclass
answers as its parent does until it is given a row. The message is the error's own
text (AList's wording), which clients show.
"""

from __future__ import annotations

import asyncssh

from manifold import errors

NO_SUCH_FILE = asyncssh.FX_NO_SUCH_FILE
PERMISSION_DENIED = asyncssh.FX_PERMISSION_DENIED
FAILURE = asyncssh.FX_FAILURE
OP_UNSUPPORTED = asyncssh.FX_OP_UNSUPPORTED

STATUS: dict[type[errors.ManifoldError], int] = {
    errors.ManifoldError: FAILURE,
    errors.Unauthorized: PERMISSION_DENIED,
    errors.Forbidden: PERMISSION_DENIED,
    errors.FileExists: FAILURE,
    errors.NotFound: NO_SUCH_FILE,
    errors.ObjectNotFound: NO_SUCH_FILE,
    errors.StorageNotFound: NO_SUCH_FILE,
    errors.NotSupported: OP_UNSUPPORTED,
}


def status_of(exc: errors.ManifoldError) -> int:
    for cls in type(exc).__mro__:
        status = STATUS.get(cls)
        if status is not None:
            return status
    return FAILURE


def sftp_error(exc: errors.ManifoldError) -> asyncssh.SFTPError:
    """The SFTP answer to ``exc``."""
    return asyncssh.SFTPError(status_of(exc), exc.message)


def failure(reason: str) -> asyncssh.SFTPError:
    """An answer for what only SFTP knows (a write out of order, a folder not empty)."""
    return asyncssh.SFTPError(FAILURE, reason)
