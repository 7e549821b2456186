"""AWS Signature Version 4 checked on the server side, and aws-chunked bodies decoded.

A request is signed in its ``Authorization`` header or in its query (a presigned URL).
``verify`` rebuilds the canonical request from what arrived, derives the signing key
from the one configured key pair, and compares in constant time. A streamed upload
(``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``) signs each chunk with the previous chunk's
signature; ``payload`` decodes such a body, checks every chunk, and checks a body
signed by its SHA-256 against that hash. Each check that fails raises at the end of
the stream, so the upload it feeds is abandoned and nothing appears.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote

from manifold.protocols.s3.errors import S3Error

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED = "UNSIGNED-PAYLOAD"
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
MAX_SKEW = timedelta(minutes=15)
MAX_EXPIRES = 7 * 24 * 3600
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_SAFE = "-_.~"
MAX_CHUNK_LINE = 4096


@dataclass(frozen=True, slots=True)
class Keys:
    """The one key pair of the S3 server; both empty leaves every request in."""

    access_key: str
    secret: str

    @property
    def open(self) -> bool:
        return not self.access_key and not self.secret


@dataclass(frozen=True, slots=True)
class Signed:
    """What a checked request's signature covers, for checking its body as it comes.

    ``key`` is None when no key pair is set: a body is then decoded, never checked.
    """

    payload: str
    key: bytes | None = None
    amz_date: str = ""
    scope: str = ""
    signature: str = ""


def verify(
    method: str,
    raw_path: str,
    query: str,
    headers: Mapping[str, str],
    keys: Keys,
    now: datetime | None = None,
) -> Signed:
    """Check the request's signature (raises ``S3Error``); what its body must match."""
    payload = headers.get("x-amz-content-sha256", "")
    if keys.open:
        return Signed(payload or UNSIGNED)
    now = now or datetime.now(UTC)
    auth = headers.get("authorization", "")
    if auth:
        return _verify_header(method, raw_path, query, headers, keys, now, auth, payload)
    params = _query_pairs(query)
    if "X-Amz-Signature" in params:
        return _verify_query(method, raw_path, query, headers, keys, now, params)
    if "AWSAccessKeyId" in params:
        raise S3Error("InvalidRequest", "Please use AWS4-HMAC-SHA256.")
    raise S3Error("AccessDenied", "Access Denied")


def _verify_header(
    method: str,
    raw_path: str,
    query: str,
    headers: Mapping[str, str],
    keys: Keys,
    now: datetime,
    auth: str,
    payload: str,
) -> Signed:
    algorithm, _, rest = auth.partition(" ")
    if algorithm != ALGORITHM:
        raise S3Error("InvalidRequest", "Please use AWS4-HMAC-SHA256.")
    fields = {}
    for part in rest.split(","):
        name, _, value = part.strip().partition("=")
        fields[name] = value
    try:
        credential, signed_headers, signature = (
            fields["Credential"],
            fields["SignedHeaders"],
            fields["Signature"],
        )
    except KeyError as exc:
        raise S3Error("AccessDenied", "Authorization header is malformed") from exc
    amz_date = headers.get("x-amz-date") or _from_http_date(headers.get("date", ""))
    when = _parse_amz_date(amz_date)
    if abs(now - when) > MAX_SKEW:
        raise S3Error(
            "RequestTimeTooSkewed",
            "The difference between the request time and the current time is too large.",
        )
    if not payload:
        raise S3Error("InvalidRequest", "Missing required header x-amz-content-sha256")
    canonical = _canonical_request(
        method, raw_path, _canonical_query(query), headers, signed_headers, payload
    )
    key, scope = _check(credential, amz_date, canonical, signature, keys)
    return Signed(payload, key, amz_date, scope, signature)


def _verify_query(
    method: str,
    raw_path: str,
    query: str,
    headers: Mapping[str, str],
    keys: Keys,
    now: datetime,
    params: dict[str, str],
) -> Signed:
    if params.get("X-Amz-Algorithm") != ALGORITHM:
        raise S3Error("InvalidRequest", "Please use AWS4-HMAC-SHA256.")
    try:
        credential = params["X-Amz-Credential"]
        amz_date = params["X-Amz-Date"]
        expires = int(params["X-Amz-Expires"])
        signed_headers = params["X-Amz-SignedHeaders"]
        signature = params["X-Amz-Signature"]
    except (KeyError, ValueError) as exc:
        raise S3Error(
            "AuthorizationQueryParametersError", "Query-string authentication is malformed"
        ) from exc
    if not 0 <= expires <= MAX_EXPIRES:
        raise S3Error("AccessDenied", "X-Amz-Expires must be between 0 and 604800 seconds")
    when = _parse_amz_date(amz_date)
    if when - now > MAX_SKEW:
        raise S3Error("AccessDenied", "Request is not valid yet")
    if now > when + timedelta(seconds=expires):
        raise S3Error("AccessDenied", "Request has expired")
    payload = params.get("X-Amz-Content-Sha256", UNSIGNED)
    canonical = _canonical_request(
        method,
        raw_path,
        _canonical_query(query, drop="X-Amz-Signature"),
        headers,
        signed_headers,
        payload,
    )
    key, scope = _check(credential, amz_date, canonical, signature, keys)
    return Signed(UNSIGNED, key, amz_date, scope, signature)


def _check(
    credential: str, amz_date: str, canonical: str, signature: str, keys: Keys
) -> tuple[bytes, str]:
    access_key, _, scope = credential.partition("/")
    parts = scope.split("/")
    if len(parts) != 4 or parts[3] != "aws4_request":
        raise S3Error("AccessDenied", "Credential is malformed")
    if not hmac.compare_digest(access_key.encode(), keys.access_key.encode()):
        raise S3Error(
            "InvalidAccessKeyId",
            "The AWS Access Key Id you provided does not exist in our records.",
        )
    key = signing_key(keys.secret, *parts[:3])
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    expected = _hmac(key, f"{ALGORITHM}\n{amz_date}\n{scope}\n{digest}").hex()
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        raise S3Error(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided.",
        )
    return key, scope


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(f"AWS4{secret}".encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _canonical_request(
    method: str,
    raw_path: str,
    canonical_query: str,
    headers: Mapping[str, str],
    signed_headers: str,
    payload: str,
) -> str:
    names = signed_headers.split(";")
    lines = "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in names)
    uri = "/".join(quote(unquote(part), safe=_SAFE) for part in raw_path.split("/"))
    return f"{method}\n{uri}\n{canonical_query}\n{lines}\n{signed_headers}\n{payload}"


def _canonical_query(query: str, drop: str = "") -> str:
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        name, value = unquote(name), unquote(value)
        if name != drop:
            pairs.append((quote(name, safe=_SAFE), quote(value, safe=_SAFE)))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def _query_pairs(query: str) -> dict[str, str]:
    pairs = {}
    for part in query.split("&"):
        name, _, value = part.partition("=")
        pairs[unquote(name)] = unquote(value)
    return pairs


def _parse_amz_date(text: str) -> datetime:
    try:
        return datetime.strptime(text, _AMZ_DATE).replace(tzinfo=UTC)
    except ValueError as exc:
        raise S3Error("AccessDenied", "X-Amz-Date is missing or malformed") from exc


def _from_http_date(text: str) -> str:
    try:
        return parsedate_to_datetime(text).astimezone(UTC).strftime(_AMZ_DATE)
    except (TypeError, ValueError):
        return ""


# --- bodies -------------------------------------------------------------------------


def payload(source: AsyncIterator[bytes], signed: Signed) -> AsyncIterator[bytes]:
    """The body's bytes as stored: decoded from aws-chunked, each check made on the way."""
    if signed.payload.startswith("STREAMING-"):
        return _chunks(source, signed)
    if signed.payload != UNSIGNED and signed.key is not None:
        return _hashed(source, signed.payload)
    return source


async def _hashed(source: AsyncIterator[bytes], expected: str) -> AsyncIterator[bytes]:
    digest = hashlib.sha256()
    async for data in source:
        digest.update(data)
        yield data
    if not hmac.compare_digest(digest.hexdigest(), expected.lower()):
        raise S3Error(
            "XAmzContentSHA256Mismatch",
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
        )


class _Buffer:
    """Bytes of a body taken a line or a count at a time."""

    def __init__(self, source: AsyncIterator[bytes]) -> None:
        self._source = source
        self._held = bytearray()

    async def _more(self) -> None:
        try:
            self._held += await anext(self._source)
        except StopAsyncIteration as exc:
            raise S3Error("IncompleteBody", "The request body ended early.") from exc

    async def line(self) -> bytes:
        while (end := self._held.find(b"\r\n")) < 0:
            if len(self._held) > MAX_CHUNK_LINE:
                raise S3Error("InvalidRequest", "An aws-chunked line is too long.")
            await self._more()
        line = bytes(self._held[:end])
        del self._held[: end + 2]
        return line

    async def pieces(self, count: int) -> AsyncIterator[bytes]:
        while count > 0:
            if not self._held:
                await self._more()
            piece = bytes(self._held[:count])
            del self._held[: len(piece)]
            count -= len(piece)
            yield piece


async def _chunks(source: AsyncIterator[bytes], signed: Signed) -> AsyncIterator[bytes]:
    buffer = _Buffer(source)
    previous = signed.signature
    check = signed.key is not None and signed.payload != STREAMING_UNSIGNED
    while True:
        head = (await buffer.line()).decode("latin-1")
        size_text, _, extension = head.partition(";")
        try:
            size = int(size_text, 16)
        except ValueError as exc:
            raise S3Error("InvalidRequest", "An aws-chunked size is malformed.") from exc
        digest = hashlib.sha256()
        async for piece in buffer.pieces(size):
            digest.update(piece)
            yield piece
        if check:
            previous = _check_chunk(signed, previous, extension, digest.hexdigest())
        if size == 0:
            break
        if await buffer.line():
            raise S3Error("InvalidRequest", "An aws-chunked chunk does not end where it says.")
    # Trailing headers (a checksum, its signature) end with an empty line, if any.
    if signed.payload != STREAMING:
        while await buffer.line():
            pass


def _check_chunk(signed: Signed, previous: str, extension: str, digest: str) -> str:
    name, _, given = extension.partition("=")
    if name != "chunk-signature" or signed.key is None:
        raise S3Error("SignatureDoesNotMatch", "A chunk carries no signature.")
    text = (
        f"{ALGORITHM}-PAYLOAD\n{signed.amz_date}\n{signed.scope}\n{previous}\n"
        f"{EMPTY_SHA256}\n{digest}"
    )
    expected = _hmac(signed.key, text).hex()
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise S3Error(
            "SignatureDoesNotMatch",
            "The chunk signature we calculated does not match the one you provided.",
        )
    return expected
