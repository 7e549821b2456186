"""What the S3 client's exceptions mean as ``manifold.errors``.

``ClientError`` carries the store's answer: its code and HTTP status decide the class.
Everything below the HTTP answer (refused, reset, timed out, a TLS handshake that
failed) is temporary. Messages name the operation and the store's code, never the
endpoint's URL or a credential.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    ParamValidationError,
    SSLError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from manifold.drivers import reach
from manifold.drivers.base import ErrorTable
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)

NOT_FOUND = frozenset({"NoSuchKey", "NotFound", "404", "NoSuchUpload"})
DENIED = frozenset(
    {
        "AccessDenied",
        "403",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AllAccessDisabled",
        "AccountProblem",
        "InvalidToken",
        "ExpiredToken",
    }
)
# A conditional write lost: ``If-None-Match: *`` met an object, or a racing write
# to the same key (AWS answers 409 while another conditional write is under way).
TAKEN = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict"})
BUSY = frozenset(
    {"SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed"}
)


def answer(exc: ClientError) -> tuple[str, int, str]:
    """The store's error code, HTTP status and message of ``exc``."""
    response: dict[str, Any] = exc.response
    error = response.get("Error") or {}
    status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
    return str(error.get("Code") or status), status, str(error.get("Message") or "")


def client_error(exc: ClientError) -> ManifoldError:
    code, status, message = answer(exc)
    said = f"s3 {exc.operation_name}: {code}"
    if code == "NoSuchBucket":
        return ObjectNotFound(f"{said}: bucket not found: object not found")
    if code in NOT_FOUND or status == 404:
        return ObjectNotFound()
    if code in TAKEN or status == 412:
        return ObjectExists()
    if code in DENIED or status == 403:
        return PermissionDenied(f"permission denied: {said}")
    if code in BUSY or status >= 500:
        return TemporaryFailure(f"{said}: {message or 'try again later'}")
    return ServerError(f"{said}: {message}" if message else said)


def unreachable(exc: Exception) -> ManifoldError:
    kwargs = getattr(exc, "kwargs", None)
    endpoint = kwargs.get("endpoint_url") if isinstance(kwargs, dict) else None
    return reach.unreachable("s3", str(endpoint or "its endpoint"), exc)


def tls_failed(exc: Exception) -> ManifoldError:
    return TemporaryFailure("s3 endpoint: TLS handshake failed (certificate not trusted?)")


def client_side(exc: Exception) -> ManifoldError:
    return ServerError(f"s3 client: {type(exc).__name__}")


def invalid(exc: Exception) -> ManifoldError:
    return InvalidRequest(f"s3 request invalid: {exc}")


ERRORS: ErrorTable = {
    ClientError: client_error,
    SSLError: tls_failed,
    BotoConnectionError: unreachable,
    HTTPClientError: unreachable,
    ParamValidationError: invalid,
    BotoCoreError: client_side,
    aiohttp.ClientError: unreachable,
    OSError: unreachable,
    TimeoutError: unreachable,
}
