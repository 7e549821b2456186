"""Names as rclone's crypt stores them, one path segment at a time.

* ``off``: a file's name gains the suffix (``.bin``); folders keep theirs.
* ``standard``: the UTF-8 name, PKCS#7-padded to whole AES blocks, encrypted with
  EME under the name key and tweak, then spelt by the chosen encoding.
* ``obfuscate``: rclone's light rotation of letters, digits and other characters by
  a distance made of the name and the name key, the distance's visible part in front
  ("123.Nzzv"); it hides names from a glance only.

Folder names are encrypted only with ``directory_name_encryption``. A file name
carrying a version stamp (``name-v2024-01-02-150405-000.ext``, rclone's
``--b2-versions`` form) keeps the stamp in clear, as rclone does.

A stored name that does not decrypt raises ``NotEncrypted``.
"""

from __future__ import annotations

import re
from datetime import datetime

from manifold.drivers.crypt.eme import BLOCK, MAX_BLOCKS, Eme
from manifold.drivers.crypt.encodings import NameEncoding
from manifold.errors import InvalidRequest

MODES = ("off", "standard", "obfuscate")
_QUOTE = "!"
_INTEGER = re.compile(r"[0-9]+")
_VERSION = re.compile(r"-v([0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{6})-[0-9]{3}$")


class NotEncrypted(ValueError):
    """A stored name that this storage's keys and settings did not make."""


class Names:
    """The name side of one crypt configuration."""

    def __init__(
        self,
        mode: str,
        encrypt_dirs: bool,
        encoding: NameEncoding,
        suffix: str,
        key: bytes,
        tweak: bytes,
    ) -> None:
        if mode not in MODES:
            raise InvalidRequest(f"unknown file name encryption mode {mode!r}")
        self.mode = mode
        self.encrypt_dirs = encrypt_dirs and mode != "off"
        self._encoding = encoding
        self._suffix = suffix
        self._eme = Eme(key, tweak)
        # The obfuscation's secret part of the rotation: the name key's byte sum.
        self._key_sum = sum(key)

    # --- the two kinds of name -------------------------------------------------------

    def file_name(self, name: str) -> str:
        if self.mode == "off":
            return name + self._suffix
        base, stamp = _split_version(name)
        return _add_version(self._segment(base), stamp)

    def dir_name(self, name: str) -> str:
        return self._segment(name) if self.encrypt_dirs else name

    def plain_file_name(self, stored: str) -> str:
        if self.mode == "off":
            plain = stored[: -len(self._suffix)]
            if not stored.endswith(self._suffix) or not plain or not _split_version(plain)[0]:
                raise NotEncrypted("no crypt suffix")
            return plain
        base, stamp = _split_version(stored)
        return _add_version(self._plain_segment(base), stamp)

    def plain_dir_name(self, stored: str) -> str:
        return self._plain_segment(stored) if self.encrypt_dirs else stored

    def looks_encrypted(self, stored: str, is_dir: bool) -> bool:
        """Whether ``stored`` has the shape of a name these settings make (with some
        key): what a listing of names that none decrypts tells a wrong password by."""
        if self.mode == "off" or (is_dir and not self.encrypt_dirs):
            return False
        base = stored if is_dir else _split_version(stored)[0]
        if self.mode == "obfuscate":
            shown, dot, _ = base.partition(".")
            return bool(dot) and _INTEGER.fullmatch(shown) is not None
        try:
            sealed = self._encoding.decode(base)
        except ValueError:
            return False
        return bool(sealed) and len(sealed) % BLOCK == 0

    # --- one segment -------------------------------------------------------------------

    def _segment(self, name: str) -> str:
        if self.mode == "standard":
            return self._encrypt(name)
        return self._obfuscate(name)

    def _plain_segment(self, stored: str) -> str:
        plain = self._decrypt(stored) if self.mode == "standard" else self._deobfuscate(stored)
        if not plain or "/" in plain or "\0" in plain:
            raise NotEncrypted("not a name")
        return plain

    def _encrypt(self, name: str) -> str:
        data = name.encode("utf-8", "surrogateescape")
        pad = BLOCK - len(data) % BLOCK
        if len(data) + pad > MAX_BLOCKS * BLOCK:
            raise InvalidRequest("name too long to encrypt")
        return self._encoding.encode(self._eme.encrypt(data + bytes([pad]) * pad))

    def _decrypt(self, stored: str) -> str:
        try:
            sealed = self._encoding.decode(stored)
        except ValueError as exc:
            raise NotEncrypted(str(exc)) from exc
        if not sealed or len(sealed) % BLOCK or len(sealed) > MAX_BLOCKS * BLOCK:
            raise NotEncrypted("not whole blocks")
        padded = self._eme.decrypt(sealed)
        pad = padded[-1]
        if not 0 < pad <= BLOCK or padded[-pad:] != bytes([pad]) * pad:
            raise NotEncrypted("bad padding")
        try:
            # Stricter than rclone, which never checks: a wrong key gives bytes that
            # are almost never UTF-8, so a wrong password shows as no name at all.
            return padded[:-pad].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotEncrypted("not UTF-8") from exc

    def _obfuscate(self, name: str) -> str:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            return "!." + name  # not valid UTF-8: kept as it is, as rclone does
        shown = sum(map(ord, name)) % 256
        distance = shown + self._key_sum
        return f"{shown}." + "".join(_rotate(char, distance) for char in name)

    def _deobfuscate(self, stored: str) -> str:
        shown, dot, rest = stored.partition(".")
        if not dot:
            raise NotEncrypted("no rotation")
        if shown == "!":
            return rest
        if not _INTEGER.fullmatch(shown):
            raise NotEncrypted("no rotation")
        distance = int(shown) + self._key_sum
        out: list[str] = []
        quoted = False
        for char in rest:
            if quoted or char == _QUOTE:
                quoted = not quoted
                if not quoted:
                    out.append(char)
                continue
            out.append(_rotate(char, distance, back=True))
        return "".join(out)


def _rotate(char: str, distance: int, back: bool = False) -> str:
    """One character of rclone's obfuscation, each range turned by its own amount."""
    code = ord(char)
    if char == _QUOTE:
        return _QUOTE * 2  # only on the way in: the way back reads quotes itself
    if "0" <= char <= "9":
        return _turn(code, 0x30, 10, distance % 9 + 1, back)
    if "A" <= char <= "Z" or "a" <= char <= "z":
        return _letter(code, distance % 25 + 1, back)
    if 0xA0 <= code <= 0xFF:
        return _turn(code, 0xA0, 96, distance % 95 + 1, back)
    if code >= 0x100:
        turned = _turn(code, code - code % 256, 256, distance % 127 + 1, back)
        if not back and 0xD800 <= ord(turned) <= 0xDFFF:
            return _QUOTE + char  # no character there: quoted instead
        return turned
    return char


def _turn(code: int, base: int, span: int, by: int, back: bool) -> str:
    return chr(base + (code - base + (-by if back else by)) % span)


def _letter(code: int, by: int, back: bool) -> str:
    """A-Z then a-z as one ring of 52, so a letter never just changes case."""
    at = code - 0x41 - (6 if code >= 0x61 else 0)
    at = (at + (-by if back else by)) % 52
    return chr(0x41 + at + (6 if at >= 26 else 0))


def _split_version(name: str) -> tuple[str, str]:
    """``name`` without a version stamp before its extension, and the stamp ("")."""
    dot = name.rfind(".")
    base, ext = (name[:dot], name[dot:]) if dot > 0 else (name, "")
    found = _VERSION.search(base)
    if found is None:
        return name, ""
    try:
        datetime.strptime(found.group(1), "%Y-%m-%d-%H%M%S")
    except ValueError:
        return name, ""
    return base[: found.start()] + ext, found.group(0)


def _add_version(name: str, stamp: str) -> str:
    if not stamp:
        return name
    dot = name.rfind(".")
    return name[:dot] + stamp + name[dot:] if dot > 0 else name + stamp
