"""Users: the default admin and guest, AList's rules for changing them, and a cache.

The cache holds users by name, and the admin and guest by role too: nearly every
request of a public site is the guest's, and the admin token's requests name no
user. An entry is dropped on every change made through this service, here and, told
by the change bus, in every other process. While the bus is not ``live`` (Redis away)
another process's change may not reach this one, so the cache is not trusted: each
lookup reads the database. Changes made behind its back (the command line editing
the database of a running server) are noticed through ``UserChanges``
(``notice_changes``), which drops them all.
"""

from __future__ import annotations

import secrets
import string
import time
from dataclasses import dataclass, replace

from manifold.db.passkey_repo import PasskeyRepo
from manifold.db.repos import SshKeyRepo, UserRepo
from manifold.errors import BadRequest, ServerError
from manifold.models import ADMIN_DEFAULT_PERMISSION, Role, SsoIdentity, User
from manifold.paths import clean_path
from manifold.services.auth.changes import UserChanges
from manifold.services.auth.passwords import hash_static_async, static_hash
from manifold.state.bus import Bus, MemoryBus

_ALPHABET = string.ascii_letters + string.digits


def random_password(length: int = 12) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


@dataclass(slots=True)
class UserInput:
    """The fields of a user a client may set."""

    username: str
    password: str = ""
    base_path: str = "/"
    role: int = Role.GENERAL
    disabled: bool = False
    permission: int = 0
    sso_id: str = ""
    # Set by single sign-on only (an auto-registered account); no route reads it.
    sso_issuer: str = ""


class UserService:
    def __init__(
        self,
        repo: UserRepo,
        keys: SshKeyRepo,
        marks: UserChanges | None = None,
        bus: Bus | None = None,
        passkeys: PasskeyRepo | None = None,
    ) -> None:
        self._repo = repo
        # A deleted user's passkeys go with it: a later user may get the same id.
        self._passkeys = passkeys
        # Other processes drop a user changed here (``forget``) when they hear of it.
        self._bus: Bus = bus or MemoryBus()
        self._keys = keys
        self._marks = marks
        self._by_name: dict[str, User] = {}
        self._by_role: dict[int, User] = {}
        # Bumped by every ``forget``: a read that a change overtook is not cached.
        self._changes = 0

    async def ensure_defaults(self, admin_password: str | None) -> str | None:
        """Create admin and guest if missing; return the admin password when one was made."""
        created: str | None = None
        if await self._repo.by_role(Role.ADMIN) is None:
            created = admin_password or random_password()
            admin = _new_user("admin", Role.ADMIN, ADMIN_DEFAULT_PERMISSION, "/")
            await self._set_password(admin, created)
            await self._repo.create(admin)
        if await self._repo.by_role(Role.GUEST) is None:
            guest = _new_user("guest", Role.GUEST, 0, "/")
            guest.disabled = True
            await self._set_password(guest, "guest")
            await self._repo.create(guest)
        return created

    def cached(self, username: str) -> User | None:
        """The user ``username`` if held here and the cache is trusted (the bus is live)."""
        return self._by_name.get(username) if self._bus.live else None

    async def by_name(self, username: str) -> User | None:
        cached = self.cached(username)
        if cached is not None:
            return cached
        changes = self._changes
        user = await self._repo.by_name(username)
        # Only the stored spelling is cached: ``forget`` drops that one, and a
        # case-insensitive database also finds the user under other spellings.
        if user is not None and user.username == username and changes == self._changes:
            self._by_name[username] = user
        return user

    async def by_sso(self, identity: SsoIdentity) -> User | None:
        """The user bound to a single sign-on identity; never cached (a sign-in is rare)."""
        return await self._repo.by_sso(identity) if identity.subject else None

    async def get(self, user_id: int) -> User:
        user = await self._repo.get(user_id)
        if user is None:
            raise ServerError("failed get old user: record not found")
        return user

    async def admin(self) -> User:
        return await self._with_role(Role.ADMIN, "no admin user")

    async def guest(self) -> User:
        return await self._with_role(Role.GUEST, "no guest user")

    async def _with_role(self, role: int, missing: str) -> User:
        cached = self._by_role.get(role) if self._bus.live else None
        if cached is not None:
            return cached
        changes = self._changes
        user = await self._repo.by_role(role)
        if user is None:
            raise ServerError(missing)
        if changes == self._changes:
            self._by_role[role] = user
        return user

    async def page(self, page: int, per_page: int) -> tuple[list[User], int]:
        return await self._repo.page(page, per_page)

    async def create(self, data: UserInput) -> User:
        if data.role in (Role.ADMIN, Role.GUEST):
            raise BadRequest("admin or guest user can not be created")
        _check_username(data.username)
        user = _new_user(data.username, data.role, data.permission, clean_path(data.base_path))
        user.disabled = data.disabled
        user.sso_id = data.sso_id
        user.sso_issuer = data.sso_issuer
        await self._set_password(user, data.password)
        return await self._repo.create(user)

    async def update(self, user_id: int, data: UserInput) -> User:
        old = await self.get(user_id)
        if data.role != old.role:
            raise BadRequest("role can not be changed")
        if old.is_admin and data.disabled:
            raise BadRequest("admin user can not be disabled")
        _check_username(data.username)
        new = replace(
            old,
            username=data.username,
            base_path=clean_path(data.base_path),
            disabled=data.disabled,
            permission=data.permission,
            sso_id=data.sso_id,
            # An id the admin changes is no OIDC subject any more (nor was it given by one).
            sso_issuer=old.sso_issuer if data.sso_id == old.sso_id else "",
        )
        if data.password:
            await self._set_password(new, data.password)
        await self._save(old, new)
        return new

    async def update_profile(
        self, user: User, username: str, password: str, sso: SsoIdentity
    ) -> None:
        _check_username(username)
        new = replace(user, username=username, sso_id=sso.subject, sso_issuer=sso.issuer)
        if password:
            await self._set_password(new, password)
        await self._save(user, new)

    async def set_password(self, user: User, password: str) -> None:
        new = replace(user)
        await self._set_password(new, password)
        await self._save(user, new)

    async def upgrade_hash(self, user: User, static: str) -> None:
        """Store an argon2id hash of ``static``, the password just verified against an
        imported AList hash; the password is the same, so tokens stay valid."""
        await self._save(user, replace(user, pwd_hash=await hash_static_async(static)))

    async def set_otp_secret(self, user: User, secret: str) -> None:
        await self._save(user, replace(user, otp_secret=secret))

    async def delete(self, user_id: int) -> None:
        user = await self.get(user_id)
        if user.role in (Role.ADMIN, Role.GUEST):
            raise ServerError("cannot delete admin or guest")
        await self._keys.delete_for_user(user.id)
        if self._passkeys is not None:
            await self._passkeys.delete_for_user(user.id)
        await self._repo.delete(user.id)
        self.forget(user.username)
        await self._bus.publish("user", {"name": user.username})

    def forget(self, username: str) -> None:
        """Drop ``username`` and the admin and guest: a change made elsewhere may have
        renamed either, and reading them again costs one query each."""
        self._by_name.pop(username, None)
        self._by_role.clear()
        self._changes += 1

    def notice_changes(self, now: bool = False) -> None:
        """Drop every cached user if the command line changed users meanwhile; unless
        ``now``, this looks at most once a second (see ``UserChanges``)."""
        if self._marks is not None and self._marks.changed(now):
            self.forget_all()

    def forget_all(self) -> None:
        self._by_name.clear()
        self._by_role.clear()
        self._changes += 1

    async def _save(self, old: User, new: User) -> None:
        await self._repo.save(new)
        self.forget(old.username)
        self.forget(new.username)
        for name in {old.username, new.username}:
            await self._bus.publish("user", {"name": name})

    async def _set_password(self, user: User, password: str) -> None:
        user.pwd_hash = await hash_static_async(static_hash(password))
        # Clients compare the token's ``pwd_ts`` to see a password change, so it moves
        # on every change, even two within one second.
        user.pwd_ts = max(int(time.time()), user.pwd_ts + 1)
        user.token_gen = new_token_gen()


def new_token_gen() -> str:
    """A fresh generation: every login token issued before it is refused."""
    return secrets.token_hex(16)


def _new_user(username: str, role: int, permission: int, base_path: str) -> User:
    return User(
        id=0,
        username=username,
        pwd_hash="",
        pwd_ts=0,
        base_path=base_path,
        role=role,
        disabled=False,
        permission=permission,
        otp_secret="",
        sso_id="",
        token_gen=new_token_gen(),
    )


def _check_username(username: str) -> None:
    if not username.strip():
        raise BadRequest("username is empty")
    if len(username) > 255:
        raise BadRequest("username is too long")
