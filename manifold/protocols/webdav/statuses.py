"""The HTTP status of every Manifold error over WebDAV, in one table.

The most specific class of an error's ancestry that the table names decides its
status, so a new subclass answers as its parent does until it is given a row.
Handlers raise ``DavError`` for what only WebDAV knows (a missing Destination, a
taken name under ``Overwrite: F``, a lock held by someone else).
"""

from __future__ import annotations

from manifold import errors

STATUS: dict[type[errors.ManifoldError], int] = {
    errors.ManifoldError: 500,
    errors.BadRequest: 400,
    errors.NameTooLong: 400,  # a bad name, never worth retrying (a 5xx is, to clients)
    errors.Unauthorized: 401,
    errors.TwoFactorRequired: 401,
    errors.WrongArchivePassword: 403,
    errors.Forbidden: 403,
    errors.FileExists: 412,
    errors.NotFound: 404,
    errors.TooManyAttempts: 429,
    errors.ServerError: 500,
    errors.ObjectNotFound: 404,
    errors.ParentNotFound: 409,
    errors.StorageNotFound: 404,
    errors.NotAFolder: 409,
    errors.NotAFile: 405,
    errors.ObjectExists: 412,
    errors.Overlapping: 409,
    errors.NotSupported: 501,
    errors.AliasLoop: 508,
    errors.TemporaryFailure: 503,
    errors.UpstreamStatus: 502,
}


def status_of(exc: errors.ManifoldError) -> int:
    for cls in type(exc).__mro__:
        status = STATUS.get(cls)
        if status is not None:
            return status
    return 500


class DavError(Exception):
    """A WebDAV answer other than success: a status, and for some a precondition
    element (RFC 4918 section 16) sent as the body's ``DAV:error``."""

    def __init__(self, status: int, condition: str = "", message: str = "") -> None:
        super().__init__(message or str(status))
        self.status = status
        self.condition = condition
