"""smbprotocol's exceptions onto ``manifold.errors``.

The library raises ``SMBOSError`` (an ``OSError`` carrying the NT status) from its
file functions, ``SMBResponseException`` subclasses (carrying ``status``) from the
session and tree set-up, ``SMBConnectionClosed`` and other ``SMBException``s when the
connection is gone, plain socket errors, and ``ValueError`` when it cannot connect.
Errors are told apart by NT status, never by message text; no message here ever holds
the password (the library's own never do either: they name paths and statuses).
"""

from __future__ import annotations

from collections.abc import Callable

from smbprotocol.exceptions import (
    SMBAuthenticationError,
    SMBConnectionClosed,
    SMBException,
    SMBLinkRedirectionError,
    SMBOSError,
    SMBResponseException,
    SMBUnsupportedFeature,
)
from smbprotocol.header import NtStatus

from manifold.drivers import reach
from manifold.drivers.base import ErrorTable
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotAFile,
    NotAFolder,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)

_LOGIN = "SMB login failed"
LOGIN_FAILED = f"{_LOGIN}: wrong user name or password"
_REFUSED_NAME = "the SMB server refuses the name"

# Statuses smbprotocol has no name for.
STATUS_CONNECTION_DISCONNECTED = 0xC000020C
STATUS_CONNECTION_RESET = 0xC000020D
STATUS_NETWORK_SESSION_EXPIRED = 0xC000035C
STATUS_ACCOUNT_DISABLED = 0xC0000072
STATUS_ACCOUNT_LOCKED_OUT = 0xC0000234

# The session or the connection under it is gone: it is dropped and made again.
BROKEN_STATUSES = frozenset(
    {
        NtStatus.STATUS_USER_SESSION_DELETED,
        NtStatus.STATUS_NETWORK_NAME_DELETED,
        STATUS_NETWORK_SESSION_EXPIRED,
        STATUS_CONNECTION_DISCONNECTED,
        STATUS_CONNECTION_RESET,
    }
)

_Make = Callable[..., ManifoldError]


def _message(cls: type[ManifoldError], text: str) -> _Make:
    """A maker of ``cls`` with ``text``, whatever it is given (an error table entry is
    given the exception)."""
    return lambda *_: cls(text)


_BY_STATUS: dict[int, _Make] = {
    NtStatus.STATUS_OBJECT_NAME_NOT_FOUND: ObjectNotFound,
    NtStatus.STATUS_OBJECT_PATH_NOT_FOUND: ObjectNotFound,
    NtStatus.STATUS_NO_SUCH_FILE: ObjectNotFound,
    NtStatus.STATUS_NOT_FOUND: ObjectNotFound,
    NtStatus.STATUS_DELETE_PENDING: ObjectNotFound,
    NtStatus.STATUS_OBJECT_NAME_COLLISION: ObjectExists,
    NtStatus.STATUS_ACCESS_DENIED: PermissionDenied,
    NtStatus.STATUS_PRIVILEGE_NOT_HELD: PermissionDenied,
    NtStatus.STATUS_CANNOT_DELETE: PermissionDenied,
    NtStatus.STATUS_SHARING_VIOLATION: _message(
        PermissionDenied, "the file is in use on the SMB server"
    ),
    NtStatus.STATUS_NOT_A_DIRECTORY: NotAFolder,
    NtStatus.STATUS_FILE_IS_A_DIRECTORY: NotAFile,
    NtStatus.STATUS_OBJECT_NAME_INVALID: _message(InvalidRequest, _REFUSED_NAME),
    NtStatus.STATUS_OBJECT_PATH_INVALID: _message(InvalidRequest, _REFUSED_NAME),
    NtStatus.STATUS_OBJECT_PATH_SYNTAX_BAD: _message(InvalidRequest, _REFUSED_NAME),
    NtStatus.STATUS_DIRECTORY_NOT_EMPTY: _message(ServerError, "folder not empty"),
    NtStatus.STATUS_DISK_FULL: _message(ServerError, "no space left on the share"),
    NtStatus.STATUS_BAD_NETWORK_NAME: _message(ObjectNotFound, "share not found"),
    NtStatus.STATUS_LOGON_FAILURE: _message(PermissionDenied, LOGIN_FAILED),
    NtStatus.STATUS_WRONG_PASSWORD: _message(PermissionDenied, LOGIN_FAILED),
    NtStatus.STATUS_PASSWORD_EXPIRED: _message(PermissionDenied, f"{_LOGIN}: password expired"),
    STATUS_ACCOUNT_DISABLED: _message(PermissionDenied, f"{_LOGIN}: account disabled"),
    STATUS_ACCOUNT_LOCKED_OUT: _message(PermissionDenied, f"{_LOGIN}: account locked out"),
    NtStatus.STATUS_IO_TIMEOUT: TemporaryFailure,
    NtStatus.STATUS_INSUFFICIENT_RESOURCES: TemporaryFailure,
    NtStatus.STATUS_INSUFF_SERVER_RESOURCES: TemporaryFailure,
    NtStatus.STATUS_SERVER_UNAVAILABLE: TemporaryFailure,
    NtStatus.STATUS_REQUEST_NOT_ACCEPTED: TemporaryFailure,
}
_BY_STATUS |= {status: TemporaryFailure for status in BROKEN_STATUSES}


def status_of(exc: BaseException) -> int | None:
    """The NT status a library exception carries, if any."""
    if isinstance(exc, SMBOSError):
        return int(exc.ntstatus)
    if isinstance(exc, SMBResponseException):
        return int(exc.status)
    return None


def is_broken(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection (or the session on it) can serve no more
    calls, so that it is dropped and made again."""
    status = status_of(exc)
    if status is not None:
        return status in BROKEN_STATUSES
    if isinstance(exc, SMBAuthenticationError | SMBUnsupportedFeature | SMBLinkRedirectionError):
        return False
    return isinstance(exc, SMBException | ConnectionError | TimeoutError | BrokenPipeError)


def _by_status(exc: Exception) -> ManifoldError:
    status = status_of(exc)
    make = _BY_STATUS.get(status) if status is not None else None
    if make is not None:
        return make()
    return ServerError(f"SMB server answered status 0x{status or 0:08x}")


def _os_error(exc: Exception) -> ManifoldError:
    # Not an ``SMBOSError`` (that entry is more specific): the socket's own.
    if isinstance(exc, ConnectionError | TimeoutError):
        return TemporaryFailure(f"connection to the SMB server failed: {reach.reason(exc)}")
    return TemporaryFailure(f"SMB connection error: {exc}")


def _value_error(exc: Exception) -> ManifoldError:
    # smbprotocol reports a failed TCP connect as a ValueError caused by the OSError.
    cause = exc.__cause__
    if isinstance(cause, OSError):
        return TemporaryFailure(f"cannot connect to the SMB server: {reach.reason(cause)}")
    return ServerError(str(exc))


ERRORS: ErrorTable = {
    SMBOSError: _by_status,
    SMBResponseException: _by_status,
    SMBAuthenticationError: _message(PermissionDenied, LOGIN_FAILED),
    SMBUnsupportedFeature: lambda exc: ServerError(str(exc)),
    SMBLinkRedirectionError: _message(PermissionDenied, "a link on the share leads elsewhere"),
    SMBConnectionClosed: _message(TemporaryFailure, "the SMB server closed the connection"),
    SMBException: lambda exc: TemporaryFailure(f"SMB connection failed: {exc}"),
    OSError: _os_error,
    ValueError: _value_error,
}
