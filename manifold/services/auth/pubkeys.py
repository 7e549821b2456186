"""Read the public-key text users paste into the SSH key form, through asyncssh.

The text follows the OpenSSH ``authorized_keys`` format, read the way AList v3.45
reads it (golang.org/x/crypto ``ssh.ParseAuthorizedKey``), so a key accepted there is
accepted here and gets the same fingerprint (``ssh-keygen -lf``'s ``SHA256:...``):

* lines split on ``\\n``, anything after a ``\\r`` ignored; blank lines, ``#`` lines
  and lines that do not hold a key are skipped; the first line that does wins;
* a line is ``[options] type base64-blob [comment]``, options possibly quoted;
* the type word is not compared with the blob: the algorithm is the blob's own.

The line syntax is all this module reads itself. The blob is decoded (strict, padded
base64) and handed to asyncssh, which checks the key (curves, points, RSA and DSA
parameters) and names its algorithm; a blob must also be the key's exact wire form
(no trailing bytes, no compressed point, no curve other than its algorithm's), as in
the Go reader. Stricter than AList: certificates (``*-cert-v01@openssh.com``) are
refused, and the text is capped at 16 KiB.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass

from asyncssh import SSHKey
from asyncssh.public_key import decode_ssh_public_key
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

MAX_TEXT_BYTES = 16 * 1024
_NOT_BASE64 = "key blob is not valid base64"
_ECDSA = frozenset({"ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"})

# Go's unicode.IsSpace set (its TrimSpace); str.strip() alone would also drop
# \x1c-\x1f and so keep another comment.
_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


class InvalidPublicKey(ValueError):
    """The text holds no public key this server accepts."""


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """One public key: its algorithm, wire-format blob, comment and fingerprint."""

    algorithm: str
    blob: bytes
    comment: str
    fingerprint: str


def parse_public_key(text: str) -> ParsedKey:
    """The first valid key of authorized_keys ``text``."""
    if len(text) > MAX_TEXT_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise InvalidPublicKey("key text is longer than 16 KiB")
    reasons: list[str] = []
    for line in _key_lines(text):
        for fields in _after_type_word(line):
            try:
                return _read_fields(fields)
            except InvalidPublicKey as exc:
                reasons.append(str(exc))
    # A line is tried without options and with; the try whose blob decoded says more
    # than a base64 complaint about a word that was never meant to be the blob.
    decoded = [reason for reason in reasons if reason != _NOT_BASE64]
    raise InvalidPublicKey((decoded or reasons or ["no public key found"])[0])


def wire_key(blob: bytes) -> SSHKey:
    """The key whose exact wire form is ``blob``."""
    try:
        key = decode_ssh_public_key(blob)
    except (ValueError, OverflowError, TypeError) as exc:  # what asyncssh lets out
        raise InvalidPublicKey(f"invalid key: {exc}") from None
    if not _canonical(key, blob):
        raise InvalidPublicKey("the key is not in its canonical wire form")
    return key


def _canonical(key: SSHKey, blob: bytes) -> bool:
    """Whether ``blob`` is how the key is written. asyncssh keeps an ECDSA blob as it
    came, with a compressed point or a curve other than its algorithm's; the Go reader
    refuses both, so an ECDSA key is written out again and compared."""
    if key.public_data != blob:
        return False
    if key.get_algorithm() not in _ECDSA:
        return True
    public = key.pyca_key
    if not isinstance(public, ec.EllipticCurvePublicKey):
        return False
    written = public.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).split()[1]
    return binascii.a2b_base64(written) == blob


def _key_lines(text: str) -> list[str]:
    lines = (raw.split("\r", 1)[0].strip(_SPACE) for raw in text.split("\n"))
    return [line for line in lines if line and not line.startswith("#")]


def _after_type_word(line: str) -> list[str]:
    """What follows the type word: the line read without options, then with them."""
    _, _, rest = _split_field(line)
    found = [rest] if rest else []
    end = _options_end(line)
    if end is not None:
        _, _, after = _split_field(line[end:].lstrip(" \t"))
        if after:
            found.append(after)
    return found


def _split_field(text: str) -> tuple[str, str, str]:
    """The first space- or tab-separated field, the blank, and the rest."""
    for index, char in enumerate(text):
        if char in " \t":
            return text[:index], char, text[index + 1 :].strip(_SPACE)
    return text, "", ""


def _options_end(line: str) -> int | None:
    """Index of the first blank outside double quotes, or None (unclosed quote)."""
    quoted = False
    for index, char in enumerate(line):
        if char in " \t" and not quoted:
            return index
        if char == '"' and (index == 0 or line[index - 1] != "\\"):
            quoted = not quoted
    return None


def _read_fields(fields: str) -> ParsedKey:
    encoded, _, comment = _split_field(fields)
    try:
        blob = binascii.a2b_base64(encoded.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise InvalidPublicKey(_NOT_BASE64) from None
    key = wire_key(blob)
    return ParsedKey(
        algorithm=key.get_algorithm(),
        blob=blob,
        comment=comment,
        fingerprint=key.get_fingerprint("sha256"),
    )
