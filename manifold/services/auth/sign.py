"""Download signatures: HMAC-SHA256 over ``path:expire``, keyed by the admin token.

The format is AList's (``base64url(mac) + ":" + expire``), so links it would make
verify here; resetting the token invalidates every sign.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable

from manifold.errors import Unauthorized
from manifold.services.admin.settings import SettingsService


class Signer:
    """Signs with the admin token; archive members (``/ae``) use a second signer whose
    key is the token plus ``-archive``, as AList's, so the two signs never pass for
    each other."""

    def __init__(self, settings: SettingsService, key_suffix: str = "") -> None:
        self._settings = settings
        self._suffix = key_suffix

    def _key(self) -> str:
        return self._settings.get("token") + self._suffix

    def sign(self, path: str) -> str:
        return self.batch()(path)

    def needed(self, signed: bool) -> bool:
        """Whether links carry a sign: ``signed`` (the storage signs, or a password
        covers the path) or the ``sign_all`` setting. The one rule for ``/d`` links."""
        return signed or self._settings.get_bool("sign_all")

    def batch(self) -> Callable[[str], str]:
        """A signing function for many paths at once (a listing): key and expiry fixed."""
        hours = self._settings.get_int("link_expiration", 0)
        expire = int(time.time()) + hours * 3600 if hours > 0 else 0
        inner, outer = _hmac_states(self._key().encode())
        suffix = f":{expire}"

        def sign(path: str) -> str:
            # HMAC from its two keyed SHA-256 states: copying them is a third cheaper
            # than copying an hmac object, which counts in listings of many files.
            mac = inner.copy()
            mac.update(f"{path}{suffix}".encode())
            digest = outer.copy()
            digest.update(mac.digest())
            return base64.urlsafe_b64encode(digest.digest()).decode() + suffix

        return sign

    def verify(self, path: str, sign: str) -> None:
        """Raise ``Unauthorized`` with AList's message unless ``sign`` is valid for ``path``."""
        verify_sign(self._key(), path, sign, int(time.time()))


def _hmac_states(key: bytes) -> tuple[hashlib._Hash, hashlib._Hash]:
    """The SHA-256 states after the inner and outer padded keys of HMAC (RFC 2104)."""
    if len(key) > _BLOCK:
        key = hashlib.sha256(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
    outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))
    return inner, outer


_BLOCK = 64  # SHA-256's block size


def sign_path(key: str, path: str, expire: int) -> str:
    mac = hmac.new(key.encode(), f"{path}:{expire}".encode(), hashlib.sha256).digest()
    return f"{base64.urlsafe_b64encode(mac).decode()}:{expire}"


def verify_sign(key: str, path: str, sign: str, now: int) -> None:
    _, _, expire_text = sign.rpartition(":")
    if not expire_text:
        raise Unauthorized("expire missing")
    try:
        expire = int(expire_text)
    except ValueError:
        raise Unauthorized("expire invalid") from None
    if expire != 0 and expire < now:
        raise Unauthorized("sign expired")
    if not hmac.compare_digest(sign, sign_path(key, path, expire)):
        raise Unauthorized("sign invalid")
