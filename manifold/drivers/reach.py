"""Why a server could not be reached, in the words an admin acts on: the name was not
found, the connection was refused or timed out, TLS failed. One reading of a failed
connection's causes for every remote driver, so the storage form says the same thing
whichever driver met it (and never only an exception's class name)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator

from manifold.errors import TemporaryFailure


def reason(exc: BaseException) -> str:
    """The cause of a failed connection, from ``exc`` and the errors behind it."""
    causes = list(_causes(exc))
    for cause in causes:
        said = _named(cause)
        if said:
            return said
    for cause in causes:
        if isinstance(cause, OSError) and cause.strerror:
            return str(cause.strerror)
    return str(exc) or type(exc).__name__


def unreachable(server: str, where: str, exc: BaseException) -> TemporaryFailure:
    """``server`` (``SFTP``, ``s3``...) at ``where`` (what the admin typed) could not be
    reached, and why."""
    return TemporaryFailure(f"cannot reach the {server} server at {where}: {reason(exc)}")


def _named(cause: BaseException) -> str:
    if isinstance(cause, socket.gaierror):
        return f"name not found ({cause.strerror})" if cause.strerror else "name not found"
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, TimeoutError):
        return "timed out"
    if isinstance(cause, ssl.SSLCertVerificationError):
        # aiohttp's own subclass carries no ``verify_message``; its cause does.
        said = getattr(cause, "verify_message", None)
        return f"TLS: certificate not trusted ({said})" if said else ""
    if isinstance(cause, ssl.SSLError):
        return f"TLS failed ({cause.reason or cause})"
    if isinstance(cause, ConnectionResetError):
        return "connection reset"
    return ""


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what lies behind it: chained causes, and the wrapped errors aiohttp
    (``os_error``) and botocore (``kwargs["error"]``) keep aside. Each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        wrapped = getattr(current, "os_error", None)
        kwargs = getattr(current, "kwargs", None)
        inner = kwargs.get("error") if isinstance(kwargs, dict) else None
        todo += [e for e in (current.__cause__, current.__context__, wrapped, inner)
                 if isinstance(e, BaseException)]  # fmt: skip
