"""The one credential check every protocol front end uses (WebDAV, FTP, SFTP).

Each answers a ``Caller`` or raises:

* ``Unauthorized`` (401): no such user, or a wrong password or key;
* ``Forbidden`` (403): a disabled user, or one without the protocol's login bit
  (WebDAV read 8, FTP/SFTP read 10; admins too, as in AList since v3.41);
* ``TooManyAttempts`` (429): the address or the name is locked out, by the very
  limiter the API's login counts failures in, under the same keys.

A password login costs an argon2 verify, and WebDAV clients send the password with
every request. A verified password is therefore remembered for ``ttl`` seconds, as
an HMAC of the name, the password and the stored hash under a key that lives only
in this process: the plain password is never kept, and a password change (a new
stored hash) makes every remembered entry of the old one useless at once. Other
edits (disabled, permission bits, base path) need no invalidation: the user itself
is read fresh (from the users' cache, which every edit clears) on each request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

from manifold.errors import Forbidden, TooManyAttempts, Unauthorized
from manifold.models import Perm, User
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.limiter import LoginLimiter
from manifold.services.auth.passwords import needs_upgrade, static_hash, verify_static_async
from manifold.services.auth.service import DISABLED, Caller, Protocol
from manifold.services.auth.sshkeys import SshKeyService
from manifold.services.auth.users import UserService

# The bit a protocol's login needs; the API and S3 have none of their own.
LOGIN_BITS: dict[str, Perm] = {
    "webdav": Perm.WEBDAV_READ,
    "ftp": Perm.FTP_READ,
    "sftp": Perm.FTP_READ,
}
BAD_CREDENTIALS = "username or password is incorrect"
NOT_ALLOWED = "user is not allowed to access via {protocol}"
GUEST_DISABLED = "Guest user is disabled, login please"
# Longer names cannot exist (see ``users._check_username``); failures are counted
# under a cut name, so a huge one costs no memory.
_MAX_NAME = 256
_CACHE_SIZE = 4096


class Credentials:
    def __init__(
        self,
        users: UserService,
        limiter: LoginLimiter,
        settings: SettingsService,
        keys: SshKeyService,
        ttl: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._users = users
        self._limiter = limiter
        self._settings = settings
        self._keys = keys
        self._ttl = ttl
        self._clock = clock
        self._secret = secrets.token_bytes(32)
        # HMAC of (name, password, stored hash) -> when it stops counting as verified.
        self._verified: OrderedDict[bytes, float] = OrderedDict()

    async def password(
        self, username: str, password: str, client: str, protocol: Protocol
    ) -> Caller:
        self._users.notice_changes()
        user = await self._users.by_name(username) if username else None
        name = user.username if user is not None else username[:_MAX_NAME]
        key = self._cache_key(user, password) if user is not None and password else None
        if user is not None and key is not None and self._remembered(key):
            # Checked seconds ago (a WebDAV client sends it with every request): no
            # guess, nothing to count.
            if await self._limiter.is_locked(client, name):
                raise TooManyAttempts()
            return self._admit(user, client, protocol)
        # Counted before the slow check, as the API's login does, so that parallel
        # guesses cannot slip past the limit.
        if not await self._limiter.attempt(client, name):
            raise TooManyAttempts()
        if user is None or key is None:
            raise Unauthorized(BAD_CREDENTIALS)
        await self._verify(user, password, client, name)
        self._remember(key)
        return self._admit(user, client, protocol)

    async def _verify(self, user: User, password: str, client: str, name: str) -> None:
        if not await verify_static_async(user.pwd_hash, static_hash(password)):
            raise Unauthorized(BAD_CREDENTIALS)
        await self._limiter.record_success(client, name)
        if needs_upgrade(user.pwd_hash):
            await self._users.upgrade_hash(user, static_hash(password))

    async def public_key(self, username: str, key_blob: bytes, client: str) -> Caller:
        """An SFTP login by the wire form of a key the user registered."""
        self._users.notice_changes()
        user = await self._users.by_name(username) if username else None
        name = user.username if user is not None else username[:_MAX_NAME]
        if await self._limiter.is_locked(client, name):
            raise TooManyAttempts()
        if user is None or user.is_guest:
            raise Unauthorized("public key refused")
        key = await self._keys.matching(user, key_blob)
        if key is None:
            # A client offers each of its keys in turn; refusals are not guesses.
            raise Unauthorized("public key refused")
        await self._keys.touch(key, datetime.now(UTC))
        return self._admit(user, client, "sftp")

    async def guest(self, protocol: Protocol, client: str) -> Caller:
        """The guest, when it is enabled and has the protocol's login bit."""
        self._users.notice_changes()
        guest = await self._users.guest()
        if guest.disabled:
            raise Unauthorized(GUEST_DISABLED)
        return self._admit(guest, client, protocol)

    async def bearer(self, token: str, client: str, protocol: Protocol) -> Caller:
        """``Authorization: Bearer <the admin token setting>`` acts as the admin, as in
        AList (whose WebDAV lets the token in without looking at the bits)."""
        admin_token = self._settings.get("token")
        if not admin_token or not secrets.compare_digest(token.encode(), admin_token.encode()):
            raise Unauthorized(BAD_CREDENTIALS)
        self._users.notice_changes()
        return Caller(await self._users.admin(), client, token, protocol)

    @staticmethod
    def _admit(user: User, client: str, protocol: Protocol) -> Caller:
        if user.disabled:
            raise Forbidden(DISABLED)
        bit = LOGIN_BITS.get(protocol)
        if bit is not None and not user.can(bit):
            raise Forbidden(NOT_ALLOWED.format(protocol=protocol.upper()))
        return Caller(user, client, protocol=protocol)

    def forget(self) -> None:
        """Forget every verified password: a user changed in another process (a new
        password there is seen here once the user is read again; this makes it
        certain at once, disabled and deleted users included)."""
        self._verified.clear()

    def _cache_key(self, user: User, password: str) -> bytes:
        message = b"\0".join(
            (
                str(user.id).encode(),
                user.username.encode(),
                password.encode(),
                user.pwd_hash.encode(),
            )
        )
        return hmac.new(self._secret, message, hashlib.sha256).digest()

    def _remembered(self, key: bytes) -> bool:
        until = self._verified.get(key)
        if until is None:
            return False
        if self._clock() >= until:
            del self._verified[key]
            return False
        return True

    def _remember(self, key: bytes) -> None:
        self._verified[key] = self._clock() + self._ttl
        self._verified.move_to_end(key)
        while len(self._verified) > _CACHE_SIZE:
            self._verified.popitem(last=False)
