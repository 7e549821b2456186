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
"""

from __future__ import annotations

import base64
import binascii
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
from manifold.db.passkey_repo import PasskeyRepo
from manifold.errors import BadRequest, Forbidden, ServerError, TooManyAttempts
from manifold.models import Challenge, Passkey, User
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.tokens import TokenService
from manifold.services.auth.users import UserService

ENABLED_SETTING = "webauthn_login_enabled"
CHALLENGE_SECONDS = 300
# Ceremonies begun and not finished, at most: beginning a login needs no account, and a
# flood of them must not fill the database.
CHALLENGES_KEPT = 10_000
TIMEOUT_MS = 120_000
REGISTER, LOGIN = "register", "login"
EXPIRED = "passkey request expired or already used, please try again"


class ChallengeStore(Protocol):
    """Where begun ceremonies wait for their answer; shared by every instance."""

    async def put(self, session: str, challenge: Challenge, now: float, most: int) -> bool:
        """Keep ``challenge``; False when ``most`` unexpired ones are kept already."""
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
    ) -> None:
        self._keys = keys
        self._challenges = challenges
        self._users = users
        self._tokens = tokens
        self._settings = settings

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
        session = await self._remember(REGISTER, user.id, options.challenge, rp)
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

    async def begin_login(self, username: str, rp: RelyingParty) -> tuple[dict[str, Any], str]:
        """Options for a login as ``username``, or, without one, as whoever the
        authenticator holds a passkey for (a discoverable credential)."""
        self._check_enabled()
        allowed: list[PublicKeyCredentialDescriptor] = []
        user_id = 0
        if username:
            user = await self._user_named(username)
            keys = await self._keys.for_user(user.id)
            if not keys:
                raise BadRequest("Found no credentials for user")
            allowed = [_descriptor(k) for k in keys]
            user_id = user.id
        options = generate_authentication_options(
            rp_id=rp.id,
            timeout=TIMEOUT_MS,
            allow_credentials=allowed,
            user_verification=UserVerificationRequirement.PREFERRED,
        )
        session = await self._remember(LOGIN, user_id, options.challenge, rp)
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

    async def _user_named(self, username: str) -> User:
        user = await self._users.by_name(username)
        if user is None:
            raise BadRequest("failed find user: record not found")
        return user

    async def _remember(self, purpose: str, user_id: int, raw: bytes, rp: RelyingParty) -> str:
        now = time.time()
        session = secrets.token_urlsafe(32)
        challenge = Challenge(purpose, user_id, raw, rp.id, rp.origin, now + CHALLENGE_SECONDS)
        if not await self._challenges.put(session, challenge, now, CHALLENGES_KEPT):
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
