"""Logging in, 2FA, and turning an Authorization header into a user."""

from __future__ import annotations

import base64
import io
import secrets
from dataclasses import dataclass, replace
from typing import Literal

import pyotp
import qrcode

from manifold.concurrency import CPU_POOL, run_in
from manifold.errors import BadRequest, Forbidden, TooManyAttempts, TwoFactorRequired, Unauthorized
from manifold.models import Role, User
from manifold.paths import join_base
from manifold.services.admin.settings import SettingsService
from manifold.services.auth import ldap, ldap_login
from manifold.services.auth.limiter import LoginLimiter
from manifold.services.auth.passwords import needs_upgrade, static_hash, verify_static_async
from manifold.services.auth.tokens import Claims, TokenService
from manifold.services.auth.users import UserService

OTP_ISSUER = "Manifold"
DISABLED = "Current user is disabled, replace please"
# Longer usernames are refused when an account is made or renamed.
_MAX_NAME = 255


# The front end a request came through: the WebDAV and FTP/SFTP servers have
# permission bits of their own (AList's 8-11), checked in the file services.
Protocol = Literal["api", "webdav", "ftp", "sftp", "s3"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking, passed explicitly to every service call.

    ``root``, when set, is a folder below the user's base path that this caller is held
    in (a full tree path): paths are resolved onto it and links may not leave it, as
    they may not leave a base path. A protocol that serves one folder of a user's tree
    as a whole (S3's bucket) says so with ``rooted`` instead of checking paths itself.
    """

    user: User
    client: str
    token: str = ""
    protocol: Protocol = "api"
    root: str = ""

    @property
    def base(self) -> str:
        """The folder the caller's paths are below: ``root``, else the base path."""
        return self.root or self.user.base_path

    def rooted(self, path: str) -> Caller:
        """This caller held in ``path`` (named as this caller names paths)."""
        return replace(self, root=join_base(self.base, path))


@dataclass(frozen=True, slots=True)
class Known:
    """What ``AuthService.known_user`` accepted a header on."""

    claims: Claims
    user: User
    admin_token: str


# Headers ``known_user`` keeps what it accepted them on; past this the oldest goes.
KNOWN_KEPT = 4096


class AuthService:
    def __init__(
        self,
        users: UserService,
        tokens: TokenService,
        settings: SettingsService,
        limiter: LoginLimiter,
        setup_limiter: LoginLimiter,
    ) -> None:
        self._users = users
        self._tokens = tokens
        self._settings = settings
        self.limiter = limiter
        # Wrong codes while turning 2FA on are counted apart from logins, per user.
        self._setup_limiter = setup_limiter
        self._known: dict[str, Known] = {}

    async def login(self, username: str, password: str, otp_code: str, client: str) -> str:
        return await self.login_hashed(username, static_hash(password), otp_code, client)

    async def login_hashed(self, username: str, hashed: str, otp_code: str, client: str) -> str:
        self._users.notice_changes(now=True)
        user = await self._users.by_name(username) if username else None
        name = _limit_key(user, username)
        # Count the attempt before the slow check, so parallel guesses cannot slip past.
        if not await self.limiter.attempt(client, name):
            raise TooManyAttempts()
        user = await _check_credentials(username, user, hashed, otp_code)
        await self.limiter.record_success(client, name)
        if needs_upgrade(user.pwd_hash):
            await self._users.upgrade_hash(user, hashed)
        return self._tokens.issue(user)

    async def login_ldap(self, username: str, password: str, otp_code: str, client: str) -> str:
        """A login the directory checks (``ldap_*`` settings); the lock-out is shared.

        Unlike AList, the local admin and guest are not reached through the directory
        (whoever holds its entry of that name would hold them), and a disabled user or
        one with 2FA is treated as at the password login.
        """
        if not self._settings.get_bool("ldap_login_enabled"):
            raise Forbidden("ldap is not enabled")
        self._users.notice_changes(now=True)
        local = await self._users.by_name(username) if username else None
        name = _limit_key(local, username)
        if not await self.limiter.attempt(client, name):
            raise TooManyAttempts()
        if not username:
            raise BadRequest("username is empty")
        await ldap.check_password(ldap_login.directory(self._settings), username, password)
        user = local or await ldap_login.register(self._users, self._settings, username)
        if user.role in (Role.ADMIN, Role.GUEST):
            raise Forbidden("login via ldap is not allowed")
        if user.otp_secret and not _otp_ok(user.otp_secret, otp_code):
            raise TwoFactorRequired()
        if user.disabled:
            raise Forbidden(DISABLED)
        await self.limiter.record_success(client, name)
        return self._tokens.issue(user)

    async def logout(self, caller: Caller) -> None:
        if caller.token and not self._is_admin_token(caller.token):
            await self._tokens.revoke(caller.token)

    async def authenticate(self, header: str, client: str) -> Caller:
        """The caller for a request's Authorization header value (empty = guest)."""
        self._users.notice_changes()
        token = _token_of(header)
        if token and self._is_admin_token(token):
            return Caller(await self._users.admin(), client, token)
        if not token:
            guest = await self._users.guest()
            if guest.disabled:
                raise Unauthorized("Guest user is disabled, login please")
            return Caller(guest, client)
        claims = await self._tokens.parse(token)
        user = await self._users.by_name(claims.username)
        return Caller(_holder(claims, user), client, token)

    def known_user(self, header: str) -> User | None:
        """The user ``authenticate`` finds for a login token when every check it makes
        can be made from memory (no look-up, no wait), else None; a refusal raises as
        ``authenticate`` would.

        A header accepted before is accepted again while what it was accepted on still
        holds (``_holds``): the checks that depend on nothing else are not made again.
        """
        self._users.notice_changes()
        known = self._known.get(header)
        if known is not None and self._holds(known):
            return known.user
        return self._first_known(header)

    def _holds(self, known: Known) -> bool:
        """Whether what a header was accepted on still is: the same admin token (the
        very string), the token unexpired and not revoked, and its user the very object
        the cache holds (a change to a user in any way replaces the object)."""
        return (
            known.admin_token is self._settings.get("token")
            and self._tokens.still_valid(known.claims)
            and self._users.cached(known.claims.username) is known.user
        )

    def _first_known(self, header: str) -> User | None:
        """``known_user`` with every check made."""
        token = _token_of(header)
        if not token or self._is_admin_token(token):
            return None
        claims = self._tokens.parse_known(token)
        user = self._users.cached(claims.username) if claims is not None else None
        if claims is None or user is None:
            return None
        known = Known(claims, _holder(claims, user), self._settings.get("token"))
        if len(self._known) >= KNOWN_KEPT:
            self._known.pop(next(iter(self._known)))
        self._known[header] = known
        return known.user

    def _is_admin_token(self, token: str) -> bool:
        admin_token = self._settings.get("token")
        return bool(admin_token) and secrets.compare_digest(token.encode(), admin_token.encode())

    async def generate_2fa(self, caller: Caller) -> tuple[str, str]:
        """A new secret and its QR code as a PNG data URL; nothing is stored yet."""
        if caller.user.is_guest:
            raise Forbidden("Guest user can not generate 2FA code")
        secret = pyotp.random_base32(32)
        uri = pyotp.TOTP(secret).provisioning_uri(name=caller.user.username, issuer_name=OTP_ISSUER)
        # Drawing and compressing the PNG takes milliseconds of CPU: not on the loop.
        return secret, await run_in(CPU_POOL, _qr_data_url, uri)

    async def verify_2fa(self, caller: Caller, code: str, secret: str) -> None:
        if caller.user.is_guest:
            raise Forbidden("Guest user can not generate 2FA code")
        attempt = (caller.client, str(caller.user.id))
        if not await self._setup_limiter.attempt(*attempt):
            raise TooManyAttempts()
        if not _otp_ok(secret, code):
            raise BadRequest("Invalid 2FA code")
        await self._setup_limiter.record_success(*attempt)
        await self._users.set_otp_secret(caller.user, _normalise_secret(secret))


def _token_of(header: str) -> str:
    return header[7:].strip() if header[:7].lower() == "bearer " else header.strip()


def _holder(claims: Claims, user: User | None) -> User:
    """``user`` if it still is the one the token of ``claims`` was issued to."""
    # A same-name account made after the token's one was deleted is someone else.
    if user is None or user.id != claims.user_id:
        raise Unauthorized("failed find user: record not found")
    if not user.token_gen or not secrets.compare_digest(claims.generation, user.token_gen):
        raise Unauthorized("Password has been changed, login please")
    if user.disabled:
        raise Unauthorized(DISABLED)
    return user


async def _check_credentials(username: str, user: User | None, hashed: str, otp_code: str) -> User:
    """The user if every check passes; the order of checks is AList's."""
    if not username:
        raise BadRequest("username is empty")
    if user is None:
        raise BadRequest("failed find user: record not found")
    if not hashed:
        raise BadRequest("password is empty")
    if not await verify_static_async(user.pwd_hash, hashed):
        raise BadRequest("password is incorrect")
    if user.otp_secret and not _otp_ok(user.otp_secret, otp_code):
        raise TwoFactorRequired()
    # Last, so only someone holding every credential learns the account is disabled.
    if user.disabled:
        raise Forbidden(DISABLED)
    return user


def _limit_key(user: User | None, username: str) -> str:
    """The name failures are counted under.

    A case-insensitive database finds ``ADMIN`` as ``admin``; both count as ``admin``.
    Names that cannot exist are cut short so that a huge one costs no memory.
    """
    return user.username if user is not None else username[: _MAX_NAME + 1]


def _normalise_secret(secret: str) -> str:
    secret = secret.strip().upper().replace(" ", "")
    return secret + "=" * (-len(secret) % 8)


def _otp_ok(secret: str, code: str) -> bool:
    code = code.strip()
    if not code.isdigit() or len(code) != 6:
        return False
    try:
        return pyotp.TOTP(_normalise_secret(secret)).verify(code, valid_window=1)
    except (ValueError, TypeError):
        return False


def _qr_data_url(uri: str) -> str:
    image = qrcode.make(uri, box_size=10, border=2)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
