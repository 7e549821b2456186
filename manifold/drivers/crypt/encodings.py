"""How rclone's crypt spells an encrypted name: base32, base64 or base32768.

* base32: RFC 4648's "extended hex" alphabet, lower case, without padding (names
  sort and compare case-insensitively on every file system);
* base64: the URL-safe alphabet without padding;
* base32768: qntm's Base32768, 15 bits a character, for back ends that count a
  name's length in characters (OneDrive, Dropbox): a byte stream cut into 15-bit
  chunks, each a character of one of 1024 blocks of 32 code points; a last chunk of
  at most 7 bits is a character of one of 4 other blocks. Padding bits are ones.

Decoding raises ``ValueError`` for anything that is not a valid spelling.
"""

from __future__ import annotations

import base64
import binascii
from typing import Protocol


class NameEncoding(Protocol):
    def encode(self, data: bytes) -> str: ...

    def decode(self, text: str) -> bytes: ...


class Base32:
    def encode(self, data: bytes) -> str:
        return base64.b32hexencode(data).decode("ascii").rstrip("=").lower()

    def decode(self, text: str) -> bytes:
        if "=" in text or not text.isascii():
            raise ValueError("bad base32 name")
        padded = text.upper() + "=" * (-len(text) % 8)
        try:
            return base64.b32hexdecode(padded)
        except binascii.Error as exc:
            raise ValueError("bad base32 name") from exc


class Base64:
    def encode(self, data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")

    def decode(self, text: str) -> bytes:
        if "=" in text or not text.isascii() or len(text) % 4 == 1:
            raise ValueError("bad base64 name")
        padded = text + "=" * (-len(text) % 4)
        try:
            return base64.b64decode(padded, altchars=b"-_", validate=True)
        except binascii.Error as exc:
            raise ValueError("bad base64 name") from exc


# The first code point of each 32-point block, as (first, past the last) runs. The
# four lowest blocks carry the last 7 bits; the other 1024 carry 15 bits each.
_BLOCK_RUNS = (
    (0x0180, 0x01A0), (0x0240, 0x02A0), (0x04A0, 0x04C0), (0x0500, 0x0520),
    (0x0680, 0x06C0), (0x0760, 0x07A0), (0x07C0, 0x07E0), (0x1000, 0x1020),
    (0x10A0, 0x10C0), (0x1100, 0x1160), (0x1180, 0x11A0), (0x11E0, 0x1240),
    (0x1260, 0x1280), (0x12E0, 0x1300), (0x1320, 0x1340), (0x13A0, 0x13E0),
    (0x1420, 0x1660), (0x16A0, 0x16E0), (0x1780, 0x17A0), (0x1820, 0x1860),
    (0x18C0, 0x18E0), (0x1980, 0x19A0), (0x19E0, 0x1A00), (0x1A20, 0x1A40),
    (0x1BC0, 0x1BE0), (0x1C00, 0x1C20), (0x1D00, 0x1D20), (0x21E0, 0x2200),
    (0x22C0, 0x22E0), (0x2340, 0x23E0), (0x2400, 0x2420), (0x2500, 0x2760),
    (0x2780, 0x27C0), (0x2800, 0x2980), (0x29A0, 0x29C0), (0x2A20, 0x2A60),
    (0x2A80, 0x2AC0), (0x2AE0, 0x2B60), (0x2C00, 0x2C20), (0x2C80, 0x2CE0),
    (0x2D00, 0x2D20), (0x2D40, 0x2D60), (0x2EA0, 0x2EE0), (0x31C0, 0x31E0),
    (0x3400, 0x4DA0), (0x4DC0, 0x9FC0), (0xA000, 0xA480), (0xA4A0, 0xA4C0),
    (0xA500, 0xA600), (0xA640, 0xA660), (0xA6A0, 0xA6E0), (0xA700, 0xA760),
    (0xA780, 0xA7A0), (0xA840, 0xA860),
)  # fmt: skip
_BLOCKS = [start for first, stop in _BLOCK_RUNS for start in range(first, stop, 32)]
_SHORT, _LONG = _BLOCKS[:4], _BLOCKS[4:]
# A block's first code point -> (its index in its repertoire, bits it carries).
_DECODE = {start: (i, 7) for i, start in enumerate(_SHORT)}
_DECODE.update({start: (i, 15) for i, start in enumerate(_LONG)})


class Base32768:
    def encode(self, data: bytes) -> str:
        bits = len(data) * 8
        number = int.from_bytes(data, "big")
        out = []
        for at in range(0, bits, 15):
            width = min(15, bits - at)
            chunk = (number >> (bits - at - width)) & ((1 << width) - 1)
            if width <= 7:
                pad = 7 - width
                value, blocks = (chunk << pad) | ((1 << pad) - 1), _SHORT
            else:
                pad = 15 - width
                value, blocks = (chunk << pad) | ((1 << pad) - 1), _LONG
            out.append(chr(blocks[value >> 5] | (value & 31)))
        return "".join(out)

    def decode(self, text: str) -> bytes:
        number, bits = 0, 0
        for at, char in enumerate(text):
            index, width = _DECODE.get(ord(char) & ~31, (-1, 0))
            if index < 0 or (width == 7 and at != len(text) - 1):
                raise ValueError("bad base32768 name")
            number = (number << width) | (index << 5) | (ord(char) & 31)
            bits += width
        whole = bits // 8
        return (number >> (bits - whole * 8)).to_bytes(whole, "big")


ENCODINGS: dict[str, NameEncoding] = {
    "base32": Base32(),
    "base64": Base64(),
    "base32768": Base32768(),
}
