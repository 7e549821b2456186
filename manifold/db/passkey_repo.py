"""Passkeys and the challenges of WebAuthn ceremonies in progress.

Bytes (credential ids, public keys, challenges) are stored as unpadded base64url
text; times are seconds since the epoch, given by the caller.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from sqlalchemy import Row, and_, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from manifold.db import tables as t
from manifold.db.engine import writing
from manifold.db.repos import Repo
from manifold.models import Challenge, Passkey


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def from_b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def credential_key(credential_id: bytes) -> str:
    return hashlib.sha256(credential_id).hexdigest()


class PasskeyRepo(Repo):
    async def for_user(self, user_id: int) -> list[Passkey]:
        c = t.passkeys.c
        stmt = select(t.passkeys).where(c.user_id == user_id).order_by(c.id)
        return [_passkey(r) for r in await self._rows(stmt)]

    async def by_credential(self, credential_id: bytes) -> Passkey | None:
        where = t.passkeys.c.credential_key == credential_key(credential_id)
        rows = await self._rows(select(t.passkeys).where(where))
        return _passkey(rows[0]) if rows else None

    async def add(self, key: Passkey) -> None:
        values = {
            "user_id": key.user_id,
            "credential_key": credential_key(key.credential_id),
            "credential_id": b64url(key.credential_id),
            "public_key": b64url(key.public_key),
            "sign_count": key.sign_count,
            "aaguid": key.aaguid,
            "transports": ",".join(key.transports),
            "created": key.created,
            "last_used": key.last_used,
        }
        await self._write(insert(t.passkeys).values(**values), "credential already registered")

    async def delete_own(self, user_id: int, credential_id: bytes) -> bool:
        c = t.passkeys.c
        where = and_(c.user_id == user_id, c.credential_key == credential_key(credential_id))
        result = await self._write(delete(t.passkeys).where(where))
        return bool(result.rowcount)

    async def delete_for_user(self, user_id: int) -> None:
        await self._write(delete(t.passkeys).where(t.passkeys.c.user_id == user_id))

    async def advance(self, key_id: int, sign_count: int, now: float) -> bool:
        """Record a use with the authenticator's new ``sign_count``; False when another
        use already reached that count (a replayed or cloned authenticator). An
        authenticator that counts nothing reports 0 each time, which stays allowed."""
        c = t.passkeys.c
        grows = c.sign_count == 0 if sign_count == 0 else c.sign_count < sign_count
        stmt = (
            update(t.passkeys)
            .where(c.id == key_id, grows)
            .values(sign_count=sign_count, last_used=now)
        )
        return bool((await self._write(stmt)).rowcount)


def _passkey(row: Row[Any]) -> Passkey:
    m = row._mapping
    return Passkey(
        id=m["id"],
        user_id=m["user_id"],
        credential_id=from_b64url(m["credential_id"]),
        public_key=from_b64url(m["public_key"]),
        sign_count=int(m["sign_count"]),
        aaguid=m["aaguid"],
        transports=[x for x in m["transports"].split(",") if x],
        created=m["created"],
        last_used=m["last_used"],
    )


class ChallengeRepo(Repo):
    """Challenges as rows, so that every instance on the database sees them."""

    async def put(
        self, session: str, challenge: Challenge, now: float, per_owner: int, per_pool: int
    ) -> bool:
        """Keep ``challenge`` under ``session``, dropping those expired by ``now``; False,
        keeping nothing, when its owner has ``per_owner`` live ones already, or its pool
        (``_pool``) ``per_pool``."""
        table = t.webauthn_challenges
        values = {
            "session": session,
            "purpose": challenge.purpose,
            "user_id": challenge.user_id,
            "challenge": b64url(challenge.challenge),
            "rp_id": challenge.rp_id,
            "origin": challenge.origin,
            "expires": challenge.expires,
            "owner": challenge.owner,
        }
        async with writing(self.engine) as conn:
            await conn.execute(delete(table).where(table.c.expires <= now))
            if await _live(conn, table.c.owner == challenge.owner) >= per_owner:
                return False
            if await _live(conn, *_pool(challenge)) >= per_pool:
                return False
            await conn.execute(insert(table).values(**values))
        return True

    async def take(self, session: str, now: float) -> Challenge | None:
        """The challenge under ``session``, removed: of two calls for one, one gets it."""
        table = t.webauthn_challenges
        async with writing(self.engine) as conn:
            rows = (await conn.execute(select(table).where(table.c.session == session))).all()
            gone = await conn.execute(delete(table).where(table.c.session == session))
        if not rows or gone.rowcount != 1:
            return None
        m = rows[0]._mapping
        if m["expires"] <= now:
            return None
        return Challenge(
            m["purpose"], m["user_id"], from_b64url(m["challenge"]), m["rp_id"], m["origin"],
            m["expires"], m["owner"],
        )  # fmt: skip


def _pool(challenge: Challenge) -> list[Any]:
    """The ceremonies ``challenge`` shares a cap with: those of its purpose, for a known
    user or for nobody in particular. A flood of logins that name no one (which anyone
    may begin) leaves room for registrations and for logins that name a user."""
    table = t.webauthn_challenges
    anonymous = table.c.user_id == 0 if challenge.user_id == 0 else table.c.user_id != 0
    return [table.c.purpose == challenge.purpose, anonymous]


async def _live(conn: AsyncConnection, *where: Any) -> int:
    table = t.webauthn_challenges
    return int(
        (await conn.execute(select(func.count()).select_from(table).where(*where))).scalar_one()
    )
