"""Password hashing.

AList clients send (or let the server compute) a "static hash":
``sha256_hex(password + "-" + STATIC_SALT)``. Manifold stores an argon2id hash of
that static form, with the per-user salt argon2 embeds, so both login endpoints
work and a stolen database does not give away cheap-to-crack hashes.

Users imported from AList (``manifold import-alist``) keep AList's own hash until they
next log in: ``sha256_hex(static + "-" + salt)`` with a per-user salt, stored here as
``alist-sha256$<salt>$<hex>``. It verifies like any other, and ``needs_upgrade`` tells
the login to replace it with an argon2id hash of the same static form.
"""

from __future__ import annotations

import hashlib
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from manifold.concurrency import PASSWORD_POOL, run_in

STATIC_SALT = "https://github.com/alist-org/alist"
ALIST_PREFIX = "alist-sha256$"

# OWASP's argon2id baseline (19 MiB, 2 passes, 1 lane): strong against offline guessing,
# cheap enough that logins stay fast on a two-core machine.
_hasher = PasswordHasher(time_cost=2, memory_cost=19456, parallelism=1)


def use_cost(time_cost: int, memory_cost: int, parallelism: int = 1) -> None:
    """Hash new passwords with other argon2id parameters (a test suite's cheap ones).

    Stored hashes carry the parameters they were made with, so every hash still
    verifies whatever is chosen here; only new hashes change.
    """
    global _hasher
    _hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_cost, parallelism=parallelism)


def static_hash(password: str) -> str:
    """The SHA-256 form the AList web UI sends to ``/api/auth/login/hash``."""
    return hashlib.sha256(f"{password}-{STATIC_SALT}".encode()).hexdigest()


def hash_static(static: str) -> str:
    return _hasher.hash(static)


def alist_hash(salt: str, digest: str) -> str:
    """The stored form of an AList password hash (its salt and its hex digest)."""
    return f"{ALIST_PREFIX}{salt}${digest.lower()}"


def needs_upgrade(stored: str) -> bool:
    """Whether ``stored`` is an imported AList hash, to be replaced at the next login."""
    return stored.startswith(ALIST_PREFIX)


def _verify_alist(stored: str, static: str) -> bool:
    salt, _, digest = stored[len(ALIST_PREFIX) :].rpartition("$")
    computed = hashlib.sha256(f"{static}-{salt}".encode()).hexdigest()
    return secrets.compare_digest(computed.encode(), digest.encode())


def verify_static(stored: str, static: str) -> bool:
    if not stored:
        return False
    if needs_upgrade(stored):
        return _verify_alist(stored, static)
    try:
        return _hasher.verify(stored, static)
    except (VerificationError, InvalidHashError):
        return False


async def hash_static_async(static: str) -> str:
    # argon2 is deliberately slow; keep it off the event loop.
    return await run_in(PASSWORD_POOL, hash_static, static)


async def verify_static_async(stored: str, static: str) -> bool:
    return await run_in(PASSWORD_POOL, verify_static, stored, static)
