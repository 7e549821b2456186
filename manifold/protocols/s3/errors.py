"""S3's error answers, and the one table that turns Manifold's errors into them.

An ``S3Error`` carries S3's code (``NoSuchKey``, ``SignatureDoesNotMatch`` ...); its HTTP
status comes from ``STATUS``. A ``ManifoldError`` raised by a service becomes one through
``MAPPED``, the most specific class winning, so every handler raises what it meets and
the app renders it once.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from manifold import errors

# Every code this server answers, with its HTTP status.
STATUS: dict[str, int] = {
    "AccessDenied": 403,
    "AuthorizationQueryParametersError": 400,
    "BadDigest": 400,
    "EntityTooSmall": 400,
    "IncompleteBody": 400,
    "InternalError": 500,
    "InvalidAccessKeyId": 403,
    "InvalidArgument": 400,
    "InvalidBucketName": 400,
    "InvalidDigest": 400,
    "InvalidPart": 400,
    "InvalidPartOrder": 400,
    "InvalidRange": 416,
    "InvalidRequest": 400,
    "KeyTooLongError": 400,
    "MalformedXML": 400,
    "MetadataTooLarge": 400,
    "MethodNotAllowed": 405,
    "MissingContentLength": 411,
    "NoSuchBucket": 404,
    "NoSuchKey": 404,
    "NoSuchUpload": 404,
    "NotImplemented": 501,
    "NotModified": 304,
    "PreconditionFailed": 412,
    "RequestTimeTooSkewed": 403,
    "ServiceUnavailable": 503,
    "SignatureDoesNotMatch": 403,
    "SlowDown": 503,
    "XAmzContentSHA256Mismatch": 400,
    "OperationAborted": 409,
}

# Manifold's error classes -> S3's code; the nearest class in an error's MRO wins.
MAPPED: dict[type[errors.ManifoldError], str] = {
    errors.ManifoldError: "InternalError",
    errors.BadRequest: "InvalidRequest",
    errors.NameTooLong: "KeyTooLongError",  # a segment of the key over 255 bytes
    errors.Unauthorized: "AccessDenied",
    errors.Forbidden: "AccessDenied",
    errors.FileExists: "OperationAborted",
    errors.NotFound: "NoSuchKey",
    errors.TooManyAttempts: "SlowDown",
    errors.ObjectNotFound: "NoSuchKey",
    errors.StorageNotFound: "NoSuchKey",
    errors.NotAFolder: "NoSuchKey",
    errors.NotAFile: "NoSuchKey",
    errors.ObjectExists: "OperationAborted",
    errors.Overlapping: "InvalidRequest",
    errors.NotSupported: "NotImplemented",
    errors.TemporaryFailure: "ServiceUnavailable",
}


class S3Error(Exception):
    """An answer in S3's error shape; ``resource`` is the bucket and key asked for."""

    def __init__(self, code: str, message: str = "", resource: str = "") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message or code
        self.resource = resource

    @property
    def status(self) -> int:
        return STATUS[self.code]

    def body(self, request_id: str) -> bytes:
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
            f"<Code>{self.code}</Code><Message>{escape(self.message)}</Message>"
            f"<Resource>{escape(self.resource)}</Resource>"
            f"<RequestId>{request_id}</RequestId></Error>"
        ).encode()


def from_manifold(exc: errors.ManifoldError, resource: str = "") -> S3Error:
    """The S3 answer for a service's error: its code from ``MAPPED``, its text kept."""
    for cls in type(exc).__mro__:
        code = MAPPED.get(cls)
        if code is not None:
            return S3Error(code, exc.message, resource)
    return S3Error("InternalError", exc.message, resource)
