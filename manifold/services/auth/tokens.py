"""Login tokens: HS256 JWTs that survive a restart and can be revoked.

A token carries AList's claims first, in AList's order (``username``, ``pwd_ts``,
``exp``, ``nbf``, ``iat``), because clients decode it and read them; Manifold's own
follow. The user's id and token generation (``token_gen``, a random value replaced
on every password change) decide whether a token is accepted: a password change
therefore refuses every older token, and so does deleting a user: a new
account under the same name has another generation, however soon it is made.
Logout revokes one token by its ``jti``; the revocation is kept in the database
until the token would have expired anyway. ``RevocationStore`` is the interface:
this process keeps the revoked ids in memory, loaded at start, and hears of the other
processes' revocations on the change bus (or, while the bus is away, asks the
database about each id it does not know).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Protocol

import jwt

from manifold.config import Secret
from manifold.db.repos import RevocationRepo
from manifold.errors import Unauthorized
from manifold.models import User
from manifold.state.bus import Bus, MemoryBus

_REQUIRED = ["exp", "nbf", "iat", "jti", "uid", "username", "gen"]


@dataclass(frozen=True, slots=True)
class Claims:
    user_id: int
    username: str
    generation: str
    jti: str
    exp: int


class RevocationStore(Protocol):
    async def is_revoked(self, jti: str) -> bool: ...

    def known_revoked(self, jti: str) -> bool | None:
        """Whether ``jti`` is revoked, if that is known without a look-up; else None."""

    async def revoke(self, jti: str, expires_at: int) -> None: ...


class DatabaseRevocationStore:
    """Revoked ids in the database, mirrored in memory; other processes hear of each
    revocation on the bus (``learn``) and reload all on a resync (``load``). While the
    bus is not ``live`` an id not known here is looked up in the database."""

    def __init__(self, repo: RevocationRepo, bus: Bus | None = None) -> None:
        self._repo = repo
        self._bus: Bus = bus or MemoryBus()
        self._revoked: dict[str, int] = {}

    async def load(self) -> None:
        now = int(time.time())
        await self._repo.purge(now)
        self._revoked = await self._repo.active(now)

    def known_revoked(self, jti: str) -> bool | None:
        if jti in self._revoked:
            return True
        return False if self._bus.live else None

    async def is_revoked(self, jti: str) -> bool:
        known = self.known_revoked(jti)
        if known is not None:
            return known
        expires_at = await self._repo.expiry(jti, int(time.time()))
        if expires_at is not None:
            self.learn(jti, expires_at)
        return expires_at is not None

    async def revoke(self, jti: str, expires_at: int) -> None:
        self._revoked[jti] = expires_at
        await self._repo.add(jti, expires_at)
        await self._bus.publish("revoked", {"jti": jti, "exp": expires_at})

    def learn(self, jti: str, expires_at: int) -> None:
        """Another process revoked ``jti``."""
        if expires_at > time.time():
            self._revoked[jti] = expires_at


# Tokens whose signature was checked, kept with their claims: every page load presents
# the same token several times, and checking it again costs more than the rest of /api/me.
DECODED_KEPT = 4096


class TokenService:
    def __init__(self, secret: Secret, lifetime_hours: int, store: RevocationStore) -> None:
        self._secret = secret
        self._lifetime = lifetime_hours * 3600
        self._store = store
        self._decoded: dict[str, Claims] = {}

    def issue(self, user: User) -> str:
        now = int(time.time())
        claims = {
            "username": user.username,
            "pwd_ts": user.pwd_ts,
            "exp": now + self._lifetime,
            "nbf": now,
            "iat": now,
            "uid": user.id,
            "gen": user.token_gen,
            "jti": secrets.token_hex(16),
        }
        return jwt.encode(claims, self._secret.reveal(), algorithm="HS256")

    async def parse(self, token: str) -> Claims:
        claims = self._decode(token)
        return _unless_revoked(claims, await self._store.is_revoked(claims.jti))

    def parse_known(self, token: str) -> Claims | None:
        """``parse`` when nothing needs looking up (the revocations are known), else None."""
        claims = self._decode(token)
        revoked = self._store.known_revoked(claims.jti)
        return None if revoked is None else _unless_revoked(claims, revoked)

    def still_valid(self, claims: Claims) -> bool:
        """Whether the token ``claims`` were decoded from is unexpired and known not to
        be revoked (False when that is not known without a look-up)."""
        return claims.exp > time.time() and self._store.known_revoked(claims.jti) is False

    async def revoke(self, token: str) -> None:
        try:
            claims = self._decode(token)
        except Unauthorized:
            return
        await self._store.revoke(claims.jti, claims.exp)

    def _decode(self, token: str) -> Claims:
        """The claims of a valid token. A token checked before is looked up, its expiry
        checked again; ``nbf`` and ``iat`` need no second look once passed."""
        known = self._decoded.get(token)
        if known is not None:
            if known.exp > time.time():
                return known
            del self._decoded[token]
        claims = self._verify(token)
        if len(self._decoded) >= DECODED_KEPT:
            self._decoded.pop(next(iter(self._decoded)))
        self._decoded[token] = claims
        return claims

    def _verify(self, token: str) -> Claims:
        try:
            raw = jwt.decode(
                token,
                self._secret.reveal(),
                algorithms=["HS256"],
                options={"require": _REQUIRED},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthorized("token is expired") from None
        except jwt.ImmatureSignatureError:
            raise Unauthorized("token not active yet") from None
        except jwt.PyJWTError:
            raise Unauthorized("token is invalidated") from None
        if (type(raw["uid"]), type(raw["username"]), type(raw["gen"])) != (int, str, str):
            raise Unauthorized("token is invalidated")
        return Claims(raw["uid"], raw["username"], raw["gen"], str(raw["jti"]), int(raw["exp"]))


def _unless_revoked(claims: Claims, revoked: bool) -> Claims:
    if revoked:
        raise Unauthorized("token is invalidated")
    return claims
