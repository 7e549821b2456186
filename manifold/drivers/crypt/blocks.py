"""File contents as rclone's crypt stores them, and the keys behind names and contents.

A file is a 32-byte header (``RCLONE\\0\\0`` and a random 24-byte nonce) followed
by the contents in 64 KiB blocks, each sealed with NaCl's secretbox
(XSalsa20-Poly1305: a 16-byte tag, then the bytes) under the data key and the
header's nonce plus the block's index. A block can be opened on its own, so a
range costs the header and the blocks it touches. An empty file is the header alone.

The three keys (data, name, name tweak) come from scrypt (N=16384, r=8, p=1) of the
password and the salt (rclone's fixed salt when none is set).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from nacl.bindings import crypto_secretbox_easy, crypto_secretbox_open_easy
from nacl.exceptions import CryptoError

from manifold.errors import ServerError

MAGIC = b"RCLONE\x00\x00"
NONCE_SIZE = 24
HEADER_SIZE = len(MAGIC) + NONCE_SIZE
TAG_SIZE = 16
DATA_SIZE = 64 * 1024
BLOCK_SIZE = TAG_SIZE + DATA_SIZE
# rclone's salt for a configuration without ``password2``.
DEFAULT_SALT = bytes.fromhex("a80df43a8fbd0308a7cab83e581f86b1")
_NONCE_SPAN = 1 << (8 * NONCE_SIZE)


class BadFile(ServerError):
    """Bytes that are not a file of this crypt storage, or not whole."""

    default_message = "not an encrypted file"


class BadBlock(BadFile):
    """A block that does not open: a wrong password, or damaged bytes."""

    default_message = "failed to authenticate decrypted block - bad password?"


@dataclass(frozen=True, slots=True)
class Keys:
    data: bytes
    name: bytes
    tweak: bytes


def derive_keys(password: str, salt: str) -> Keys:
    """The keys of ``password`` and ``salt`` (plain text); slow by design (scrypt)."""
    key = hashlib.scrypt(
        password.encode(),
        salt=salt.encode() if salt else DEFAULT_SALT,
        n=16384,
        r=8,
        p=1,
        maxmem=64 * 1024 * 1024,
        dklen=80,
    )
    return Keys(key[:32], key[32:64], key[64:])


def encrypted_size(size: int) -> int:
    blocks, rest = divmod(size, DATA_SIZE)
    return HEADER_SIZE + blocks * BLOCK_SIZE + (TAG_SIZE + rest if rest else 0)


def plain_size(size: int) -> int:
    """The plain size of an encrypted file of ``size`` bytes; ``BadFile`` for a size no
    encrypted file has (shorter than the header, or a block without a byte)."""
    if size < HEADER_SIZE:
        raise BadFile("file is too short to be encrypted")
    blocks, rest = divmod(size - HEADER_SIZE, BLOCK_SIZE)
    if rest and rest <= TAG_SIZE:
        raise BadFile("file has truncated block header")
    return blocks * DATA_SIZE + (rest - TAG_SIZE if rest else 0)


def new_header() -> bytes:
    return MAGIC + os.urandom(NONCE_SIZE)


def header_nonce(header: bytes) -> bytes:
    """The nonce of a file's first 32 bytes; ``BadFile`` when they are no crypt header."""
    if len(header) < HEADER_SIZE:
        raise BadFile("file is too short to be encrypted")
    if header[: len(MAGIC)] != MAGIC:
        raise BadFile("not an encrypted file - bad magic string")
    return header[len(MAGIC) : HEADER_SIZE]


def nonce_at(nonce: bytes, index: int) -> bytes:
    """The nonce of block ``index``: the file's nonce plus the index, little-endian."""
    value = (int.from_bytes(nonce, "little") + index) % _NONCE_SPAN
    return value.to_bytes(NONCE_SIZE, "little")


def seal_blocks(key: bytes, nonce: bytes, index: int, plain: bytes) -> bytes:
    """Blocks ``index``, ``index + 1``, ... holding ``plain`` (only the last short)."""
    return b"".join(
        crypto_secretbox_easy(plain[at : at + DATA_SIZE], nonce_at(nonce, index + n), key)
        for n, at in enumerate(range(0, len(plain), DATA_SIZE))
    )


def open_blocks(key: bytes, nonce: bytes, index: int, sealed: bytes) -> bytes:
    """The plain bytes of the blocks from ``index`` in ``sealed``; ``BadBlock`` for one
    that does not open, ``BadFile`` for a last block cut inside its tag."""
    out = []
    for n, at in enumerate(range(0, len(sealed), BLOCK_SIZE)):
        block = sealed[at : at + BLOCK_SIZE]
        if len(block) <= TAG_SIZE:
            raise BadFile("file has truncated block header")
        try:
            out.append(crypto_secretbox_open_easy(block, nonce_at(nonce, index + n), key))
        except CryptoError as exc:
            raise BadBlock() from exc
    return b"".join(out)
