"""Batch signing (used for listings) agrees with plain HMAC for every key length."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from manifold.services.auth.sign import Signer, sign_path, verify_sign


class FixedSettings:
    def __init__(self, token: str) -> None:
        self.token = token

    def get(self, key: str) -> str:
        assert key == "token"
        return self.token

    def get_int(self, key: str, default: int) -> int:
        return 0


@given(st.text(min_size=1, max_size=200), st.text(max_size=100))
def test_batch_signs_match_plain_hmac(token: str, path: str) -> None:
    sign = Signer(FixedSettings(token)).batch()  # type: ignore[arg-type]
    assert sign(path) == sign_path(token, path, 0)
    verify_sign(token, path, sign(path), now=10)


def test_long_keys_are_hashed_first() -> None:
    """A key longer than SHA-256's block is hashed first (RFC 2104), in batches too."""
    for key in ("k" * 64, "k" * 65, "k" * 1000):
        assert Signer(FixedSettings(key)).batch()("/a") == sign_path(key, "/a", 0)  # type: ignore[arg-type]
    assert sign_path("k" * 65, "/a", 0) != sign_path("k" * 64, "/a", 0)
