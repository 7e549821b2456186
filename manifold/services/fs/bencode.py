"""Bencode, the encoding of .torrent files: integers, byte strings, lists and
dictionaries with byte-string keys in sorted order.

The decoder is strict (no leading zeros, no ``-0``, sorted unique keys are not
required of input but keys must be strings) and bounded: nesting deeper than
``MAX_DEPTH`` is refused rather than exhausting the stack, and every error is a
``BencodeError`` naming the byte offset, never an ``IndexError`` from a short input.
"""

from __future__ import annotations

from typing import TypeAlias

Value: TypeAlias = "int | bytes | list[Value] | dict[bytes, Value]"

# Real torrents nest four or five levels; a hostile file must not reach the stack limit.
MAX_DEPTH = 64


class BencodeError(ValueError):
    """Input that is not bencode."""


def encode(value: Value) -> bytes:
    """``value`` in bencode; dictionary keys are written sorted, as the format requires."""
    out: list[bytes] = []
    _encode(value, out)
    return b"".join(out)


def _encode(value: Value, out: list[bytes]) -> None:
    if isinstance(value, bool):
        raise TypeError("bencode has no booleans")
    if isinstance(value, int):
        out.append(b"i%de" % value)
    elif isinstance(value, bytes):
        out.append(b"%d:%s" % (len(value), value))
    elif isinstance(value, list):
        out.append(b"l")
        for item in value:
            _encode(item, out)
        out.append(b"e")
    elif isinstance(value, dict):
        out.append(b"d")
        for key in sorted(value):
            _encode(key, out)
            _encode(value[key], out)
        out.append(b"e")
    else:
        raise TypeError(f"bencode cannot hold {type(value).__name__}")


def decode(data: bytes) -> Value:
    """The one value ``data`` holds; trailing bytes are an error."""
    value, _ = decode_spans(data)
    return value


def decode_spans(data: bytes) -> tuple[Value, dict[bytes, bytes]]:
    """The value, and the raw bytes of each value of a top-level dictionary by key
    (a torrent's info hash is the SHA-1 of the ``info`` value exactly as written)."""
    reader = _Reader(data)
    value = reader.value(0)
    if reader.pos != len(data):
        raise BencodeError(f"trailing data at byte {reader.pos}")
    return value, reader.spans


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.spans: dict[bytes, bytes] = {}

    def peek(self) -> int:
        if self.pos >= len(self.data):
            raise BencodeError(f"unexpected end at byte {self.pos}")
        return self.data[self.pos]

    def value(self, depth: int) -> Value:
        if depth > MAX_DEPTH:
            raise BencodeError(f"nested deeper than {MAX_DEPTH} at byte {self.pos}")
        head = self.peek()
        if head == ord("i"):
            return self.integer()
        if head == ord("l"):
            return self.items(depth)
        if head == ord("d"):
            return self.mapping(depth)
        if ord("0") <= head <= ord("9"):
            return self.string()
        raise BencodeError(f"unexpected byte {head:#04x} at byte {self.pos}")

    def integer(self) -> int:
        end = self.data.find(b"e", self.pos)
        if end < 0:
            raise BencodeError(f"unterminated integer at byte {self.pos}")
        text = self.data[self.pos + 1 : end]
        digits = text[1:] if text.startswith(b"-") else text
        if not digits.isdigit() or (digits[:1] == b"0" and (len(digits) > 1 or text != digits)):
            raise BencodeError(f"bad integer at byte {self.pos}")
        self.pos = end + 1
        return int(text)

    def string(self) -> bytes:
        colon = self.data.find(b":", self.pos, self.pos + 21)
        length = self.data[self.pos : colon]
        if colon < 0 or not length.isdigit() or (length[:1] == b"0" and len(length) > 1):
            raise BencodeError(f"bad string length at byte {self.pos}")
        start, end = colon + 1, colon + 1 + int(length)
        if end > len(self.data):
            raise BencodeError(f"string past the end at byte {self.pos}")
        self.pos = end
        return self.data[start:end]

    def items(self, depth: int) -> list[Value]:
        self.pos += 1
        found: list[Value] = []
        while self.peek() != ord("e"):
            found.append(self.value(depth + 1))
        self.pos += 1
        return found

    def mapping(self, depth: int) -> dict[bytes, Value]:
        self.pos += 1
        found: dict[bytes, Value] = {}
        while self.peek() != ord("e"):
            if not ord("0") <= self.peek() <= ord("9"):
                raise BencodeError(f"dictionary key is not a string at byte {self.pos}")
            key = self.string()
            start = self.pos
            found[key] = self.value(depth + 1)
            if depth == 0:
                self.spans[key] = self.data[start : self.pos]
        self.pos += 1
        return found
