"""A user's SSH public keys, for the SFTP server's public-key logins."""

from __future__ import annotations

from datetime import UTC, datetime

from manifold.db.repos import DuplicateError, SshKeyRepo
from manifold.errors import BadRequest, NotFound, ServerError, Unauthorized
from manifold.models import SshKey, User
from manifold.services.auth.pubkeys import InvalidPublicKey, parse_public_key

DUPLICATE_TITLE = "key with the same title already exists"


class SshKeyService:
    def __init__(self, repo: SshKeyRepo) -> None:
        self._repo = repo

    async def page(self, user: User, page: int, per_page: int) -> tuple[list[SshKey], int]:
        _check_not_guest(user)
        return await self._repo.page(user.id, page, per_page)

    async def add(self, user: User, title: str, key_text: str) -> SshKey:
        _check_not_guest(user)
        if not title.strip() or not key_text.strip():
            raise BadRequest("request invalid")
        existing, _ = await self._repo.page(user.id, 1, 0)
        if any(k.title == title for k in existing):
            raise ServerError(DUPLICATE_TITLE)
        try:
            parsed = parse_public_key(key_text)
        except InvalidPublicKey:
            raise BadRequest("provided key invalid") from None
        if any(k.fingerprint == parsed.fingerprint for k in existing):
            raise BadRequest("this key is already added")
        now = datetime.now(UTC)
        key = SshKey(0, user.id, title, parsed.fingerprint, key_text.strip(), now, now)
        try:
            return await self._repo.create(key)
        except DuplicateError:
            raise ServerError(DUPLICATE_TITLE) from None

    async def delete_own(self, user: User, key_id: int) -> None:
        _check_not_guest(user)
        key = await self._repo.get(key_id)
        # Another user's key answers exactly like a missing one: ids are not a probe.
        if key is None or key.user_id != user.id:
            raise NotFound("failed to get public key")
        await self._repo.delete(key_id)

    async def delete_any(self, key_id: int) -> None:
        await self._repo.delete(key_id)

    async def page_for(self, user_id: int, page: int, per_page: int) -> tuple[list[SshKey], int]:
        return await self._repo.page(user_id, page, per_page)

    async def matching(self, user: User, blob: bytes) -> SshKey | None:
        """The user's registered key whose wire form is ``blob`` (an SFTP login's key)."""
        keys, _ = await self._repo.page(user.id, 1, 0)
        for key in keys:
            try:
                if parse_public_key(key.key_str).blob == blob:
                    return key
            except InvalidPublicKey:
                continue
        return None

    async def touch(self, key: SshKey, when: datetime) -> None:
        await self._repo.touch(key.id, when)


def _check_not_guest(user: User) -> None:
    if user.is_guest:
        raise Unauthorized("user invalid")
