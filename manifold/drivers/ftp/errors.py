"""FTP's failures as ``manifold.errors``: the server's refusals by reply code (and
by their text, where a 550 means "not allowed" rather than "not there"), and the
socket's errors as temporary."""

from __future__ import annotations

import ssl
from contextlib import AbstractContextManager

import aioftp

from manifold.drivers.base import ErrorTable, translating
from manifold.drivers.ftp.protocol import ReplyError
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotSupported,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)

# Words of a refusal in servers' replies (pyftpdlib: "Not enough privileges.",
# vsftpd: "Permission denied.").
_REFUSALS = ("permission", "denied", "not allowed", "forbidden", "privilege")


def _from_reply(exc: ReplyError) -> ManifoldError:
    """A refusal by the server as the matching ``manifold.errors`` class."""
    code, text = exc.code, exc.text.lower()
    if code.startswith("4"):
        return TemporaryFailure(f"FTP server: {exc}")
    if exc.verb == "AUTH TLS":
        return InvalidRequest(f"the FTP server does not offer explicit TLS ({exc})")
    if exc.verb == "login" or code == "530":
        return PermissionDenied(f"FTP login refused: {exc.code} {exc.text}")
    if code == "553":
        return PermissionDenied() if "permission" in text else InvalidRequest(f"FTP: {exc}")
    if any(word in text for word in _REFUSALS):
        return PermissionDenied()
    if code in ("550", "450"):
        return ObjectNotFound()
    if code in ("500", "502", "504"):
        return NotSupported(f"the FTP server does not support {exc.verb}")
    return ServerError(f"FTP: {exc}")


def _unreachable(exc: BaseException) -> ManifoldError:
    return TemporaryFailure(f"FTP server unreachable: {type(exc).__name__}: {exc}")


def _timed_out(exc: BaseException) -> ManifoldError:
    return TemporaryFailure("the FTP server did not answer in time")


def _bad_certificate(exc: ssl.SSLCertVerificationError) -> ManifoldError:
    return TemporaryFailure(f"the FTP server's certificate was refused: {exc.verify_message}")


def _garbled(exc: BaseException) -> ManifoldError:
    return ServerError(f"FTP: unexpected answer: {type(exc).__name__}: {exc}")


def _undecodable(exc: BaseException) -> ManifoldError:
    return InvalidRequest(f"FTP: a name does not fit the storage's encoding: {exc}")


ERRORS: ErrorTable = {
    ReplyError: _from_reply,
    aioftp.StatusCodeError: _garbled,
    ssl.SSLCertVerificationError: _bad_certificate,
    OSError: _unreachable,  # refused, reset, TLS and the rest of the socket's errors
    EOFError: _unreachable,
    TimeoutError: _timed_out,
    UnicodeError: _undecodable,
    ValueError: _garbled,
}


def ftp_errors() -> AbstractContextManager[None]:
    return translating(ERRORS)
