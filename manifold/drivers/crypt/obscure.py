"""rclone's "obscure": how its config files keep a password unreadable at a glance.

AES-256-CTR under a key rclone publishes in its source (so this hides, it does not
protect), a random IV in front, the whole in URL-safe base64 without padding. The
Crypt storage keeps its passwords so, behind AList's marker, as AList does: a value
with the marker is obscured, any other is plain text typed in the form.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from manifold.errors import InvalidRequest

# AList's marker in front of an obscured value.
MARKER = "___Obfuscated___"
_KEY = bytes.fromhex("9c935b48730a554d6bfd7c63c886a92bd390198eb8128afbf4de162b8b95f638")
_IV = 16


def _ctr(iv: bytes, data: bytes) -> bytes:
    cipher = Cipher(algorithms.AES(_KEY), modes.CTR(iv)).encryptor()
    return cipher.update(data) + cipher.finalize()


def obscure(plain: str, iv: bytes | None = None) -> str:
    iv = os.urandom(_IV) if iv is None else iv
    sealed = iv + _ctr(iv, plain.encode())
    return base64.urlsafe_b64encode(sealed).decode("ascii").rstrip("=")


def reveal(obscured: str) -> str:
    """The plain text of an obscured value; ``InvalidRequest`` for one that is not."""
    try:
        sealed = base64.b64decode(obscured + "=" * (-len(obscured) % 4), b"-_", validate=True)
        if len(sealed) < _IV:
            raise ValueError("too short")
        return _ctr(sealed[:_IV], sealed[_IV:]).decode()
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest("the stored password is not an obscured value") from exc


def stored(value: str) -> str:
    """``value`` as the storage keeps it: obscured behind the marker (already so: kept)."""
    if value.startswith(MARKER) or not value:
        return value
    return MARKER + obscure(value)


def plain(value: str) -> str:
    """The password a stored value stands for."""
    return reveal(value[len(MARKER) :]) if value.startswith(MARKER) else value
