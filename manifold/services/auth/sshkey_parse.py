"""Parse the public-key text users paste into the SSH key form.

The text follows the OpenSSH ``authorized_keys`` format, read the way AList v3.45
reads it (golang.org/x/crypto ``ssh.ParseAuthorizedKey``), so a key accepted there
is accepted here and gets the same fingerprint:

* The text is split on ``\\n``; anything after a ``\\r`` on a line is ignored.
  Blank lines, ``#`` lines and lines that fail to parse are skipped; the first
  line that parses wins.
* A line is ``[options] type base64-blob [comment]``. Options may hold quoted
  strings with spaces and commas. The type word is never compared with the blob:
  the algorithm is read from inside the blob.
* The blob is padded standard base64 and must decode to one complete wire-format
  key (RFC 4253 section 6.6 and OpenSSH PROTOCOL.u2f) with no trailing bytes.

Deliberate differences, all of them stricter:

* Certificates (``*-cert-v01@openssh.com``) are rejected. Checking one properly
  means walking nonces, principals, options and an embedded CA key, which is a
  large parsing surface for a feature the key list does not use.
* An ECDSA key's curve name must match the curve named by its algorithm.
* An RSA modulus must be positive.
* The whole text is capped at 16 KiB (UTF-8), far above any real key, so a
  request cannot make the server decode megabytes.

Nothing here does I/O; failures raise :class:`InvalidPublicKey`, which the API
layer turns into AList's 400 ``provided key invalid``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

MAX_TEXT_BYTES = 16 * 1024

# Go's unicode.IsSpace set, which its TrimSpace uses; str.strip() with no
# argument would also drop \x1c-\x1f and so keep a different comment.
_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# Fields are separated by spaces and tabs only, as in the Go reader.
_BLANK = re.compile(r"[ \t]")
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_CERT_SUFFIX = b"-cert-v01@openssh.com"


class InvalidPublicKey(ValueError):
    """The text holds no public key this server accepts."""


class _WireError(InvalidPublicKey):
    """The blob decoded but is not a valid key: the most telling kind of failure."""


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """One public key: its algorithm, wire-format blob and comment."""

    algorithm: str
    blob: bytes
    comment: str

    @property
    def fingerprint(self) -> str:
        """The ``SHA256:...`` form printed by ``ssh-keygen -lf``."""
        digest = hashlib.sha256(self.blob).digest()
        return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def parse_public_key(text: str) -> ParsedKey:
    """Return the first valid key in authorized_keys ``text``."""
    _check_size(text)
    errors: list[InvalidPublicKey] = []
    for line in _key_lines(text):
        for key_fields in _after_type_word(line):
            try:
                return _parse_key_fields(key_fields)
            except InvalidPublicKey as exc:
                errors.append(exc)
    raise _most_telling(errors)


def _check_size(text: str) -> None:
    # The character count is checked first so a huge string is never encoded.
    too_long = len(text) > MAX_TEXT_BYTES or (
        len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES
    )
    if too_long:
        raise InvalidPublicKey("key text is longer than 16 KiB")


def _most_telling(errors: list[InvalidPublicKey]) -> InvalidPublicKey:
    # A line is tried with and without an options prefix; the attempt whose blob
    # decoded says more about what is wrong than a base64 complaint about a word
    # that was never meant to be the blob.
    for error in errors:
        if isinstance(error, _WireError):
            return error
    return errors[0] if errors else InvalidPublicKey("no public key found")


def _key_lines(text: str) -> Iterator[str]:
    for raw in text.split("\n"):
        line = raw.split("\r", 1)[0].strip(_SPACE)
        if line and not line.startswith("#"):
            yield line


def _after_type_word(line: str) -> Iterator[str]:
    """Yield what follows the type word: first reading the line without options, then with."""
    first_blank = _BLANK.search(line)
    if first_blank is None:
        return
    yield line[first_blank.start() :]
    options_end = _options_end(line)
    if options_end is None:
        return
    rest = line[options_end:].lstrip(" \t")
    type_end = _BLANK.search(rest)
    if type_end is not None:
        yield rest[type_end.start() :]


def _options_end(line: str) -> int | None:
    """Index of the first blank outside double quotes, or None (unclosed quote)."""
    in_quote = False
    for index, char in enumerate(line):
        if char in " \t" and not in_quote:
            return index
        if char == '"' and (index == 0 or line[index - 1] != "\\"):
            in_quote = not in_quote
    return None


def _parse_key_fields(fields: str) -> ParsedKey:
    fields = fields.strip(_SPACE)
    blank = _BLANK.search(fields)
    if blank is None:
        encoded, comment = fields, ""
    else:
        encoded, comment = fields[: blank.start()], fields[blank.start() :].strip(_SPACE)
    blob = _decode_base64(encoded)
    return ParsedKey(algorithm=_check_blob(blob), blob=blob, comment=comment)


def _decode_base64(encoded: str) -> bytes:
    # The regex insists on canonical padding, which b64decode alone lets slide.
    if not encoded or _BASE64.fullmatch(encoded) is None:
        raise InvalidPublicKey("key blob is not valid base64")
    return base64.b64decode(encoded)


def _check_blob(blob: bytes) -> str:
    """Validate a whole wire-format key and return its algorithm name."""
    reader = _Reader(blob)
    name = reader.string()
    if name.endswith(_CERT_SUFFIX):
        raise _WireError("certificate keys are not supported")
    checker = _CHECKERS.get(name)
    if checker is None:
        raise _WireError("unsupported key algorithm")
    checker(reader)
    if reader.remaining:
        raise _WireError("trailing bytes after the key")
    return name.decode("ascii")


class _Reader:
    """Reads RFC 4251 section 5 fields; every length is checked against the data."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def string(self) -> bytes:
        if self.remaining < 4:
            raise _WireError("truncated key blob")
        (length,) = struct.unpack_from(">I", self._data, self._pos)
        if length > self.remaining - 4:
            raise _WireError("truncated key blob")
        start = self._pos + 4
        self._pos = start + length
        return self._data[start : self._pos]

    def mpint(self) -> int:
        return int.from_bytes(self.string(), "big", signed=True)


@dataclass(frozen=True, slots=True)
class _Curve:
    """A NIST prime curve y^2 = x^3 - 3x + b over GF(p)."""

    name: bytes
    p: int
    b: int
    size: int  # bytes per coordinate

    def check_point(self, point: bytes) -> None:
        # Only the uncompressed form (0x04 || x || y) is valid in SSH keys.
        if len(point) != 1 + 2 * self.size or point[0] != 0x04:
            raise _WireError("ECDSA point is not an uncompressed point of the curve's size")
        x = int.from_bytes(point[1 : 1 + self.size], "big")
        y = int.from_bytes(point[1 + self.size :], "big")
        on_curve = (y * y - (x * x * x - 3 * x + self.b)) % self.p == 0
        if x >= self.p or y >= self.p or not on_curve:
            raise _WireError("ECDSA point is not on the curve")


_P256 = _Curve(
    name=b"nistp256",
    p=2**256 - 2**224 + 2**192 + 2**96 - 1,
    b=0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B,
    size=32,
)
_P384 = _Curve(
    name=b"nistp384",
    p=2**384 - 2**128 - 2**96 + 2**32 - 1,
    b=int(
        "B3312FA7E23EE7E4988E056BE3F82D19181D9C6EFE8141120314088F5013875A"
        "C656398D8A2ED19D2A85C8EDD3EC2AEF",
        16,
    ),
    size=48,
)
_P521 = _Curve(
    name=b"nistp521",
    p=2**521 - 1,
    b=int(
        "0051953EB9618E1C9A1F929A21A0B68540EEA2DA725B99B315F3B8B489918EF1"
        "09E156193951EC7E937B1652C0BD3BB1BF073573DF883D2C34F1EF451FD46B50"
        "3F00",
        16,
    ),
    size=66,
)


def _check_rsa(reader: _Reader) -> None:
    exponent, modulus = reader.mpint(), reader.mpint()
    # Same exponent rule as the Go reader: small, odd and at least 3.
    if exponent.bit_length() > 24 or exponent < 3 or exponent % 2 == 0:
        raise _WireError("RSA exponent out of range")
    if modulus <= 0:
        raise _WireError("RSA modulus must be positive")


def _check_dss(reader: _Reader) -> None:
    p, _q, _g, _y = reader.mpint(), reader.mpint(), reader.mpint(), reader.mpint()
    # SSH's DSA is FIPS 186-2, which defines 1024-bit keys only.
    if p.bit_length() != 1024:
        raise _WireError("DSA key must be 1024 bits")


def _check_ecdsa(curve: _Curve, reader: _Reader) -> None:
    if reader.string() != curve.name:
        raise _WireError("ECDSA curve name does not match the key algorithm")
    curve.check_point(reader.string())


def _check_ed25519(reader: _Reader) -> None:
    if len(reader.string()) != 32:
        raise _WireError("Ed25519 key must be 32 bytes")


def _check_sk_ecdsa(reader: _Reader) -> None:
    _check_ecdsa(_P256, reader)
    reader.string()  # application, e.g. "ssh:"; any value is allowed


def _check_sk_ed25519(reader: _Reader) -> None:
    _check_ed25519(reader)
    reader.string()  # application


_CHECKERS: dict[bytes, Callable[[_Reader], None]] = {
    b"ssh-rsa": _check_rsa,
    b"ssh-dss": _check_dss,
    b"ecdsa-sha2-nistp256": partial(_check_ecdsa, _P256),
    b"ecdsa-sha2-nistp384": partial(_check_ecdsa, _P384),
    b"ecdsa-sha2-nistp521": partial(_check_ecdsa, _P521),
    b"ssh-ed25519": _check_ed25519,
    b"sk-ecdsa-sha2-nistp256@openssh.com": _check_sk_ecdsa,
    b"sk-ssh-ed25519@openssh.com": _check_sk_ed25519,
}
