"""What the Azure client's exceptions mean as ``manifold.errors``.

An answer of the service (``HttpResponseError``) is told by its error code and HTTP
status. No answer at all (refused, reset, timed out, a TLS handshake that failed) is
temporary, and names the endpoint's URL, which carries no secret. Messages never show
the access key or a signed URL.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from azure.core.exceptions import (
    AzureError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)

from manifold.drivers.base import ErrorTable
from manifold.errors import (
    ManifoldError,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)

# A write that must not replace met a blob (If-None-Match: *), or a name was taken.
TAKEN = frozenset({"BlobAlreadyExists", "ConditionNotMet", "ContainerAlreadyExists"})
BUSY = frozenset({"ServerBusy", "OperationTimedOut", "InternalError"})
# The service could not verify the request's signature: a wrong key (or account name).
REFUSED_KEY = frozenset(
    {"AuthenticationFailed", "AuthorizationFailure", "InvalidAuthenticationInfo"}
)


def code_of(exc: HttpResponseError) -> str:
    """The service's error code (``x-ms-error-code``), else the HTTP status."""
    code: Any = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)  # the library's enum, or the plain text
    return str(code or exc.status_code or "")


def errors_for(endpoint: str, container: str) -> ErrorTable:
    """The table for one storage: its messages name its endpoint and container."""

    def answered(exc: HttpResponseError) -> ManifoldError:
        code, status = code_of(exc), int(exc.status_code or 0)
        if code == "ContainerNotFound":
            return ObjectNotFound(f"azure blob: container {container} not found at {endpoint}")
        if status == 404:
            return ObjectNotFound()
        if code in TAKEN or status == 412:
            return ObjectExists()
        if code in REFUSED_KEY:
            return PermissionDenied(
                f"azure blob refused the credentials ({code}): check the access key and "
                f"the account name of {endpoint}"
            )
        if status in (401, 403):
            return PermissionDenied(f"permission denied: azure blob {code}")
        if code in BUSY or status >= 500:
            return TemporaryFailure(f"azure blob {code}: try again later")
        return ServerError(f"azure blob {code}: {_first_line(exc)}")

    def unreachable(exc: Exception) -> ManifoldError:
        return TemporaryFailure(f"azure blob endpoint {endpoint} unreachable: {_reason(exc)}")

    def broken(exc: Exception) -> ManifoldError:
        return TemporaryFailure(f"azure blob endpoint {endpoint}: connection lost: {_reason(exc)}")

    def client_side(exc: Exception) -> ManifoldError:
        return ServerError(f"azure blob client: {type(exc).__name__}: {_reason(exc)}")

    return {
        HttpResponseError: answered,
        ServiceRequestError: unreachable,
        ServiceResponseError: broken,
        AzureError: client_side,
        aiohttp.ClientError: unreachable,
        OSError: unreachable,
        TimeoutError: unreachable,
    }


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _reason(exc: BaseException) -> str:
    """What the connection's error said, cut short; its class when it said nothing."""
    cause = exc.__cause__ or exc.__context__
    said = _first_line(exc) if str(exc).strip() else ""
    if not said and cause is not None:
        said = _first_line(cause)
    return said or type(exc).__name__
