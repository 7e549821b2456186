from __future__ import annotations

import re

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from manifold.services.auth import passwords
from manifold.services.auth.passwords import (
    hash_static,
    hash_static_async,
    static_hash,
    verify_static,
    verify_static_async,
)


def test_static_hash_of_admin_matches_alist() -> None:
    expected = "6fcb57cd10b2c11d765dcf16148d99130afd895082af83725ee8bb181b1d2b0f"
    assert static_hash("admin") == expected


def test_static_hash_is_lowercase_hex() -> None:
    hashed = static_hash("Ünïcödé pässwörd")
    assert re.fullmatch(r"[0-9a-f]{64}", hashed)


@settings(max_examples=15, deadline=None)
@given(password=st.text(), other=st.text())
def test_round_trip(password: str, other: str) -> None:
    assume(password != other)
    stored = hash_static(static_hash(password))
    assert verify_static(stored, static_hash(password)) is True
    assert verify_static(stored, static_hash(other)) is False


def test_hash_is_argon2id() -> None:
    assert hash_static(static_hash("pw")).startswith("$argon2id$")


def test_hashes_are_salted() -> None:
    static = static_hash("pw")
    first, second = hash_static(static), hash_static(static)
    assert first != second
    assert verify_static(first, static) and verify_static(second, static)


def test_empty_stored_hash_never_verifies() -> None:
    assert verify_static("", static_hash("")) is False
    assert verify_static("", "") is False


def test_malformed_stored_hash_does_not_verify() -> None:
    assert verify_static("not-a-hash", static_hash("pw")) is False
    assert verify_static("$argon2id$v=19$m=65536,t=3,p=4$abc", static_hash("pw")) is False


def test_plain_password_does_not_match_its_static_hash() -> None:
    stored = hash_static(static_hash("pw"))
    assert verify_static(stored, "pw") is False


async def test_async_variants_agree() -> None:
    stored = await hash_static_async(static_hash("pw"))
    assert stored.startswith("$argon2id$")
    assert await verify_static_async(stored, static_hash("pw")) is True
    assert await verify_static_async(stored, static_hash("other")) is False


def test_a_hash_made_with_other_costs_still_verifies() -> None:
    made = passwords.hash_static("s3cret-static")  # the suite's cheap parameters
    passwords.use_cost(time_cost=2, memory_cost=19456)
    try:
        assert "m=19456,t=2" in passwords.hash_static("x")
        assert passwords.verify_static(made, "s3cret-static")
        assert not passwords.verify_static(made, "other")
    finally:
        passwords.use_cost(time_cost=1, memory_cost=8)
