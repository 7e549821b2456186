"""The FTP reply of every Manifold error, in one table.

The most specific class of an error's ancestry that the table names decides the
reply code, so a new subclass answers as its parent does until it is given a row;
the reply text is the error's own message (AList's wording). A storage that ran out
of room (``ENOSPC`` or ``EDQUOT`` anywhere in the error's causes) answers 452.
"""

from __future__ import annotations

import errno

from manifold import errors

CODES: dict[type[errors.ManifoldError], str] = {
    errors.ManifoldError: "451",
    errors.BadRequest: "501",
    errors.InvalidRequest: "553",
    errors.InvalidName: "553",  # "file name not allowed": permanent, never retried
    errors.Unauthorized: "530",
    errors.TwoFactorRequired: "530",
    errors.WrongArchivePassword: "550",
    errors.Forbidden: "550",
    errors.RelativePath: "553",
    errors.FileExists: "550",
    errors.NotFound: "550",
    errors.TooManyAttempts: "421",
    errors.ServerError: "451",
    errors.ObjectNotFound: "550",
    errors.StorageNotFound: "550",
    errors.NotAFolder: "550",
    errors.NotAFile: "550",
    errors.ObjectExists: "550",
    errors.Overlapping: "550",
    errors.NotSupported: "504",
    errors.AliasLoop: "550",
    errors.TemporaryFailure: "450",
    errors.UpstreamStatus: "451",
}
NO_SPACE = "452"
_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def reply_of(exc: errors.ManifoldError) -> tuple[str, str]:
    """The reply code and the one-line text for ``exc``."""
    text = " ".join(exc.message.split()) or exc.default_message
    if _out_of_space(exc):
        return NO_SPACE, text
    for cls in type(exc).__mro__:
        code = CODES.get(cls)
        if code is not None:
            return code, text
    return "451", text


def _out_of_space(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of causes is short; a loop in it ends here
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno in _SPACE_ERRNOS:
            return True
        seen = seen.__cause__ or seen.__context__
    return False
