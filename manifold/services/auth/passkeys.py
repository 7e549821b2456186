"""Passkeys (WebAuthn): registering an authenticator and logging in with it.

The request and answer shapes are AList's: a ceremony begins with ``{options,
session}`` and the browser sends ``session`` back with its answer. AList puts the
whole ceremony state (the challenge among it) into ``session`` and believes what
comes back; here ``session`` is only a random name and the challenge stays on the
server (``ChallengeStore``), bound to the user, the purpose and the relying party,
for one use within ``CHALLENGE_SECONDS``. Every login must raise the authenticator's
signature counter over the stored one (unless the authenticator counts nothing), and
of two uses that report the same count only one gets in.

A user's handle is AList's: the user id as 8 little-endian bytes.

Unfinished ceremonies are bounded per client (``client_key``: its address, a trusted
proxy's forwarded one as for the lock-out, or an IPv6 client's /64; a registration
counts against its signed-in user instead) and in pools (see ``ChallengeRepo.put``),
so that one client's flood of logins answers 429 to that client only, and a flood
from many leaves room for registrations and for logins that name a user.

A login begun for a name answers alike whether the name is a user's with passkeys or
not (AList says which names exist): a name with no passkey gets a decoy credential,
the same for that name each time, and its ceremony ends as one answered with a
passkey of someone else's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import secrets
import struct
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import options_to_json_dict, parse_authentication_credential_json
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticationCredential,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from manifold.concurrency import CPU_POOL, run_in
from manifold.config import Secret
from manifold.db.passkey_repo import PasskeyRepo
from manifold.errors import BadRequest, Forbidden, ServerError, TooManyAttempts
from manifold.models import Challenge, Passkey, User
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.tokens import TokenService
from manifold.services.auth.users import UserService

ENABLED_SETTING = "webauthn_login_enabled"
CHALLENGE_SECONDS = 300
# Ceremonies begun and not finished, at most, in each pool (see ``ChallengeRepo.put``):
# beginning a login needs no account, and a flood of them must not fill the database.
CHALLENGES_KEPT = 10_000
# ... and per client address or signed-in user: a browser has one or two at a time.
CHALLENGES_PER_CLIENT = 32
# The user id of a login begun for a name with no passkey: nobody's, so it ends as a
# login answered with another user's passkey does.
NOBODY = -1
TIMEOUT_MS = 120_000
REGISTER, LOGIN = "register", "login"
EXPIRED = "passkey request expired or already used, please try again"


class ChallengeStore(Protocol):
    """Where begun ceremonies wait for their answer; shared by every instance."""

    async def put(
        self, session: str, challenge: Challenge, now: float, per_owner: int, per_pool: int
    ) -> bool:
        """Keep ``challenge``; False when its owner, or its pool, has as many unexpired
        ones as allowed already."""
        ...

    async def take(self, session: str, now: float) -> Challenge | None:
        """The challenge under ``session``, removed; None if absent or expired."""
        ...


@dataclass(frozen=True, slots=True)
class RelyingParty:
    """The site as the browser sees it: AList takes it from ``site_url`` or the request."""

    id: str
    origin: str
    name: str


def user_handle(user_id: int) -> bytes:
    return struct.pack("<Q", user_id)


def fingerprint(aaguid: str) -> str:
    """The AAGUID as AList shows it: uppercase hex bytes separated by spaces."""
    return " ".join(f"{b:02X}" for b in uuid.UUID(aaguid).bytes)


def listed_id(key: Passkey) -> str:
    """A credential id as AList lists it and ``delete`` takes it: standard base64."""
    return base64.b64encode(key.credential_id).decode()


class PasskeyService:
    def __init__(
        self,
        keys: PasskeyRepo,
        challenges: ChallengeStore,
        users: UserService,
        tokens: TokenService,
        settings: SettingsService,
        secret: Secret,
    ) -> None:
        self._keys = keys
        self._challenges = challenges
        self._users = users
        self._tokens = tokens
        self._settings = settings
        # A key of its own: the decoys must be the same on every instance, and secret.
        self._decoy_key = hmac.new(
            secret.reveal().encode(), b"passkey decoys", hashlib.sha256
        ).digest()

    async def begin_registration(self, user: User, rp: RelyingParty) -> tuple[dict[str, Any], str]:
        self._check_enabled()
        _not_guest(user)
        existing = await self._keys.for_user(user.id)
        options = generate_registration_options(
            rp_id=rp.id,
            rp_name=rp.name,
            user_name=user.username,
            user_id=user_handle(user.id),
            user_display_name=user.username,
            timeout=TIMEOUT_MS,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.PREFERRED,
                user_verification=UserVerificationRequirement.PREFERRED,
            ),
            exclude_credentials=[_descriptor(k) for k in existing],
        )
        owner = f"user:{user.id}"
        session = await self._remember(REGISTER, user.id, options.challenge, rp, owner)
        return {"publicKey": options_to_json_dict(options)}, session

    async def finish_registration(self, user: User, session: str, answer: str) -> None:
        self._check_enabled()
        _not_guest(user)
        challenge = await self._take(session, REGISTER, user.id)
        try:
            verified = await run_in(
                CPU_POOL,
                verify_registration_response,
                credential=answer,
                expected_challenge=challenge.challenge,
                expected_rp_id=challenge.rp_id,
                expected_origin=challenge.origin,
            )
        except (WebAuthnException, ValueError, TypeError, KeyError) as exc:
            raise BadRequest(f"passkey registration failed: {exc}") from exc
        now = time.time()
        key = Passkey(
            id=0,
            user_id=user.id,
            credential_id=verified.credential_id,
            public_key=verified.credential_public_key,
            sign_count=verified.sign_count,
            aaguid=verified.aaguid,
            transports=_transports(answer),
            created=now,
            last_used=0.0,
        )
        await self._keys.add(key)

    async def begin_login(
        self, username: str, rp: RelyingParty, client: str
    ) -> tuple[dict[str, Any], str]:
        """Options for a login as ``username``, or, without one, as whoever the
        authenticator holds a passkey for (a discoverable credential); ``client`` is
        the caller's address."""
        self._check_enabled()
        user_id, allowed = await self._allowed(username)
        options = generate_authentication_options(
            rp_id=rp.id,
            timeout=TIMEOUT_MS,
            allow_credentials=allowed,
            user_verification=UserVerificationRequirement.PREFERRED,
        )
        owner = client_key(client)
        session = await self._remember(LOGIN, user_id, options.challenge, rp, owner)
        return {"publicKey": options_to_json_dict(options)}, session

    async def finish_login(self, username: str, session: str, answer: str) -> str:
        """A login token for the owner of the passkey that signed the challenge."""
        self._check_enabled()
        challenge = await self._take(session, LOGIN, None)
        credential = _parse_assertion(answer)
        key = await self._keys.by_credential(credential.raw_id)
        if key is None:
            raise BadRequest("passkey not found")
        user = await self._owner(key)
        if user is None or (challenge.user_id and challenge.user_id != user.id):
            raise BadRequest("passkey not found")
        if username and username != user.username:
            raise BadRequest("passkey not found")
        handle = credential.response.user_handle
        if handle and handle != user_handle(user.id):
            raise BadRequest("passkey does not belong to this user")
        await self._verify_assertion(credential, challenge, key)
        if user.disabled:
            raise Forbidden("Current user is disabled, replace please")
        return self._tokens.issue(user)

    async def credentials(self, user: User) -> list[Passkey]:
        return await self._keys.for_user(user.id)

    async def delete(self, user: User, credential_id: str) -> None:
        """Remove one of ``user``'s passkeys, named by its id in standard base64 as
        ``credentials`` lists it."""
        try:
            raw = base64.b64decode(credential_id, validate=True)
        except (binascii.Error, ValueError):
            raise BadRequest("invalid passkey id") from None
        if not raw or not await self._keys.delete_own(user.id, raw):
            raise BadRequest("passkey not found")

    def _check_enabled(self) -> None:
        if not self._settings.get_bool(ENABLED_SETTING):
            raise Forbidden("WebAuthn is not enabled")

    async def _owner(self, key: Passkey) -> User | None:
        try:
            return await self._users.get(key.user_id)
        except ServerError:
            return None

    async def _allowed(self, username: str) -> tuple[int, list[PublicKeyCredentialDescriptor]]:
        """Whose login this is and the credentials it allows: nobody's and none without
        a name, ``NOBODY``'s and a decoy for a name with no passkey."""
        if not username:
            return 0, []
        user = await self._users.by_name(username)
        keys = await self._keys.for_user(user.id) if user is not None else []
        if user is None or not keys:
            return NOBODY, [self._decoy(username)]
        return user.id, [_descriptor(k) for k in keys]

    def _decoy(self, username: str) -> PublicKeyCredentialDescriptor:
        """A credential id no authenticator holds, as long as a common passkey's."""
        raw = hmac.new(self._decoy_key, username.encode(), hashlib.sha256).digest()
        hints = [AuthenticatorTransport.INTERNAL, AuthenticatorTransport.HYBRID]
        return PublicKeyCredentialDescriptor(id=raw, transports=hints)

    async def _remember(
        self, purpose: str, user_id: int, raw: bytes, rp: RelyingParty, owner: str
    ) -> str:
        now = time.time()
        session = secrets.token_urlsafe(32)
        expires = now + CHALLENGE_SECONDS
        challenge = Challenge(purpose, user_id, raw, rp.id, rp.origin, expires, owner)
        kept = await self._challenges.put(
            session, challenge, now, CHALLENGES_PER_CLIENT, CHALLENGES_KEPT
        )
        if not kept:
            raise TooManyAttempts("too many passkey requests in progress, try again later")
        return session

    async def _take(self, session: str, purpose: str, user_id: int | None) -> Challenge:
        challenge = await self._challenges.take(session, time.time()) if session else None
        if challenge is None or challenge.purpose != purpose:
            raise BadRequest(EXPIRED)
        if user_id is not None and challenge.user_id != user_id:
            raise BadRequest(EXPIRED)
        return challenge

    async def _verify_assertion(
        self, credential: AuthenticationCredential, challenge: Challenge, key: Passkey
    ) -> None:
        try:
            verified = await run_in(
                CPU_POOL,
                verify_authentication_response,
                credential=credential,
                expected_challenge=challenge.challenge,
                expected_rp_id=challenge.rp_id,
                expected_origin=challenge.origin,
                credential_public_key=key.public_key,
                credential_current_sign_count=key.sign_count,
            )
        except (WebAuthnException, ValueError, TypeError, KeyError) as exc:
            raise BadRequest(f"passkey login failed: {exc}") from exc
        if not await self._keys.advance(key.id, verified.new_sign_count, time.time()):
            raise BadRequest("passkey login failed: the signature counter did not advance")


def client_key(address: str) -> str:
    """What a client's ceremonies count against: its address, or for IPv6 its /64 (a
    single host commonly holds a whole /64 and may pick any address of it)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "addr:" + address[:60]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"addr:{ip.ipv4_mapped}"
        return f"net:{ipaddress.ip_network((ip, 64), strict=False)}"
    return f"addr:{ip}"


def _descriptor(key: Passkey) -> PublicKeyCredentialDescriptor:
    known = {t.value: t for t in AuthenticatorTransport}
    hints = [known[name] for name in key.transports if name in known]
    return PublicKeyCredentialDescriptor(id=key.credential_id, transports=hints or None)


def _not_guest(user: User) -> None:
    if user.is_guest:
        raise Forbidden("You are a guest")


def _parse_assertion(answer: str) -> AuthenticationCredential:
    try:
        return parse_authentication_credential_json(answer)
    except (WebAuthnException, ValueError, TypeError, KeyError) as exc:
        raise BadRequest(f"passkey login failed: {exc}") from exc


def _transports(answer: str) -> list[str]:
    """The transports the browser reported, kept to hint them at login; bad input is none."""
    try:
        found = json.loads(answer).get("response", {}).get("transports", [])
    except (ValueError, AttributeError):
        return []
    return [str(x) for x in found if isinstance(x, str)][:8] if isinstance(found, list) else []
