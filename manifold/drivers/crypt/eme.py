"""EME, Halevi and Rogaway's wide-block mode ("A Parallelizable Enciphering Mode",
2003), over AES: how rclone's crypt encrypts a name.

A name is one wide block of up to 128 AES blocks, so the same name always gives the
same cipher text (a lookup can encrypt a name and ask for it) while names sharing a
prefix share nothing once encrypted. Doubling in GF(2^128) reads a block as a
little-endian number, as rclone's implementation does.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BLOCK = 16
MAX_BLOCKS = 128
_MASK = (1 << 128) - 1


def _double(value: int) -> int:
    value <<= 1
    return (value & _MASK) ^ 0x87 if value >> 128 else value


def _int(block: bytes) -> int:
    return int.from_bytes(block, "little")


def _ints(data: bytes) -> list[int]:
    return [_int(data[at : at + BLOCK]) for at in range(0, len(data), BLOCK)]


def _bytes(value: int) -> bytes:
    return value.to_bytes(BLOCK, "little")


class Eme:
    """EME-AES under one key and tweak; ``encrypt``/``decrypt`` a whole name."""

    def __init__(self, key: bytes, tweak: bytes) -> None:
        if len(tweak) != BLOCK:
            raise ValueError("the tweak is one block")
        self._aes = Cipher(algorithms.AES(key), modes.ECB())  # noqa: S305 -- EME's own ECB passes
        zero = self._aes.encryptor().update(bytes(BLOCK))
        self._tweak = _int(tweak)
        self._masks = [_double(_int(zero))]
        for _ in range(MAX_BLOCKS - 1):
            self._masks.append(_double(self._masks[-1]))

    def encrypt(self, data: bytes) -> bytes:
        return self._transform(data, encrypt=True)

    def decrypt(self, data: bytes) -> bytes:
        return self._transform(data, encrypt=False)

    def _transform(self, data: bytes, encrypt: bool) -> bytes:
        count = len(data) // BLOCK
        if len(data) % BLOCK or not 0 < count <= MAX_BLOCKS:
            raise ValueError("EME takes 1 to 128 whole blocks")
        aes = self._aes.encryptor() if encrypt else self._aes.decryptor()
        masked = b"".join(
            _bytes(value ^ mask) for value, mask in zip(_ints(data), self._masks, strict=False)
        )
        inner = _ints(aes.update(masked))
        mp = self._tweak
        for value in inner:
            mp ^= value
        mc = _int(aes.update(_bytes(mp)))
        mix = mp ^ mc
        first = mc ^ self._tweak
        for j in range(1, count):
            mix = _double(mix)
            inner[j] ^= mix
            first ^= inner[j]
        inner[0] = first
        out = _ints(aes.update(b"".join(_bytes(value) for value in inner)))
        return b"".join(_bytes(value ^ mask) for value, mask in zip(out, self._masks, strict=False))
