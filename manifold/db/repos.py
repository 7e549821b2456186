"""Repositories: the only code that writes SQL. Each returns plain models."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from manifold.db import tables as t
from manifold.db.engine import writing
from manifold.errors import ServerError
from manifold.models import (
    Meta,
    SettingItem,
    SshKey,
    SsoIdentity,
    Storage,
    User,
    with_role_rights,
)


class DuplicateError(ServerError):
    """A unique column already holds the value."""


class Repo:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def _rows(self, stmt: Any) -> Sequence[Row[Any]]:
        async with self.engine.connect() as conn:
            return (await conn.execute(stmt)).all()

    async def _write(self, stmt: Any, duplicate: str = "") -> Any:
        try:
            async with writing(self.engine) as conn:
                return await conn.execute(stmt)
        except IntegrityError as exc:
            raise DuplicateError(duplicate or "duplicate value") from exc

    async def _count(self, table: Any, *where: Any) -> int:
        async with self.engine.connect() as conn:
            stmt = select(func.count()).select_from(table).where(*where)
            return int((await conn.execute(stmt)).scalar_one())


def _page(stmt: Any, page: int, per_page: int) -> Any:
    if per_page < 1:
        return stmt
    return stmt.limit(per_page).offset((max(page, 1) - 1) * per_page)


class UserRepo(Repo):
    async def get(self, user_id: int) -> User | None:
        rows = await self._rows(select(t.users).where(t.users.c.id == user_id))
        return _user(rows[0]) if rows else None

    async def by_name(self, username: str) -> User | None:
        rows = await self._rows(select(t.users).where(t.users.c.username == username))
        return _user(rows[0]) if rows else None

    async def by_sso(self, identity: SsoIdentity) -> User | None:
        """The first user bound to a single sign-on identity."""
        users = t.users
        stmt = (
            select(users)
            .where(users.c.sso_issuer == identity.issuer, users.c.sso_id == identity.subject)
            .order_by(users.c.id)
            .limit(1)
        )
        rows = await self._rows(stmt)
        return _user(rows[0]) if rows else None

    async def by_role(self, role: int) -> User | None:
        stmt = select(t.users).where(t.users.c.role == role).order_by(t.users.c.id).limit(1)
        rows = await self._rows(stmt)
        return _user(rows[0]) if rows else None

    async def page(self, page: int, per_page: int) -> tuple[list[User], int]:
        stmt = _page(select(t.users).order_by(t.users.c.id), page, per_page)
        users = [_user(r) for r in await self._rows(stmt)]
        return users, await self._count(t.users)

    async def create(self, user: User) -> User:
        values = asdict(user)
        values.pop("id")
        result = await self._write(insert(t.users).values(**values), _dup_user(user.username))
        user.id = int(result.inserted_primary_key[0])
        return user

    async def save(self, user: User) -> None:
        values = asdict(user)
        stmt = update(t.users).where(t.users.c.id == user.id).values(**values)
        await self._write(stmt, _dup_user(user.username))

    async def delete(self, user_id: int) -> None:
        await self._write(delete(t.users).where(t.users.c.id == user_id))


def _dup_user(username: str) -> str:
    return f"user {username!r} already exists"


class SettingRepo(Repo):
    async def all(self) -> list[SettingItem]:
        rows = await self._rows(select(t.settings).order_by(t.settings.c.index))
        return [SettingItem(**r._mapping) for r in rows]

    async def upsert(self, items: Iterable[SettingItem]) -> None:
        """Insert the new rows and update the changed ones, each kind in one batch.

        Every start merges the defaults in: comparing with what is stored first keeps
        an unchanged database to one SELECT instead of one UPDATE a setting.
        """
        async with writing(self.engine) as conn:
            stored = {r.key: r._mapping for r in await conn.execute(select(t.settings))}
            fresh, changed = [], []
            for item in items:
                values = asdict(item)
                row = stored.get(item.key)
                if row is None:
                    fresh.append(values)
                elif any(row[k] != v for k, v in values.items()):
                    changed.append({**values, "_key": item.key})
            if fresh:
                await conn.execute(insert(t.settings), fresh)
            if changed:
                stmt = update(t.settings).where(t.settings.c.key == bindparam("_key"))
                await conn.execute(stmt, changed)

    async def delete(self, key: str) -> None:
        await self._write(delete(t.settings).where(t.settings.c.key == key))


class MetaRepo(Repo):
    async def all(self) -> list[Meta]:
        return [Meta(**r._mapping) for r in await self._rows(select(t.metas))]

    async def page(self, page: int, per_page: int) -> tuple[list[Meta], int]:
        stmt = _page(select(t.metas).order_by(t.metas.c.id), page, per_page)
        metas = [Meta(**r._mapping) for r in await self._rows(stmt)]
        return metas, await self._count(t.metas)

    async def get(self, meta_id: int) -> Meta | None:
        rows = await self._rows(select(t.metas).where(t.metas.c.id == meta_id))
        return Meta(**rows[0]._mapping) if rows else None

    async def create(self, meta: Meta) -> Meta:
        values = asdict(meta)
        values.pop("id")
        result = await self._write(insert(t.metas).values(**values), _dup_meta(meta.path))
        meta.id = int(result.inserted_primary_key[0])
        return meta

    async def save(self, meta: Meta) -> None:
        stmt = update(t.metas).where(t.metas.c.id == meta.id).values(**asdict(meta))
        await self._write(stmt, _dup_meta(meta.path))

    async def delete(self, meta_id: int) -> None:
        await self._write(delete(t.metas).where(t.metas.c.id == meta_id))


def _dup_meta(path: str) -> str:
    return f"a meta for path {path!r} already exists"


class SshKeyRepo(Repo):
    async def page(self, user_id: int, page: int, per_page: int) -> tuple[list[SshKey], int]:
        where = t.ssh_keys.c.user_id == user_id
        stmt = _page(select(t.ssh_keys).where(where).order_by(t.ssh_keys.c.id), page, per_page)
        keys = [_ssh_key(r) for r in await self._rows(stmt)]
        return keys, await self._count(t.ssh_keys, where)

    async def get(self, key_id: int) -> SshKey | None:
        rows = await self._rows(select(t.ssh_keys).where(t.ssh_keys.c.id == key_id))
        return _ssh_key(rows[0]) if rows else None

    async def create(self, key: SshKey) -> SshKey:
        values = asdict(key)
        values.pop("id")
        message = "key with the same title already exists"
        result = await self._write(insert(t.ssh_keys).values(**values), message)
        key.id = int(result.inserted_primary_key[0])
        return key

    async def delete(self, key_id: int) -> None:
        await self._write(delete(t.ssh_keys).where(t.ssh_keys.c.id == key_id))

    async def delete_for_user(self, user_id: int) -> None:
        await self._write(delete(t.ssh_keys).where(t.ssh_keys.c.user_id == user_id))

    async def touch(self, key_id: int, when: datetime) -> None:
        stmt = update(t.ssh_keys).where(t.ssh_keys.c.id == key_id).values(last_used_time=when)
        await self._write(stmt)


def _ssh_key(row: Row[Any]) -> SshKey:
    key = SshKey(**row._mapping)
    # SQLite and MySQL hand back naive datetimes; every time we store is UTC.
    key.added_time = _as_utc(key.added_time)
    key.last_used_time = _as_utc(key.last_used_time)
    return key


def _as_utc(when: datetime) -> datetime:
    return when if when.tzinfo else when.replace(tzinfo=UTC)


class RevocationRepo(Repo):
    async def active(self, now: int) -> dict[str, int]:
        stmt = select(t.revoked_tokens).where(t.revoked_tokens.c.expires_at > now)
        return {r.jti: r.expires_at for r in await self._rows(stmt)}

    async def expiry(self, jti: str, now: int) -> int | None:
        """When the token revoked as ``jti`` expires; None if it is not revoked."""
        table = t.revoked_tokens
        stmt = select(table.c.expires_at).where(table.c.jti == jti, table.c.expires_at > now)
        rows = await self._rows(stmt)
        return int(rows[0].expires_at) if rows else None

    async def add(self, jti: str, expires_at: int) -> None:
        try:
            await self._write(insert(t.revoked_tokens).values(jti=jti, expires_at=expires_at))
        except DuplicateError:
            return

    async def purge(self, now: int) -> None:
        await self._write(delete(t.revoked_tokens).where(t.revoked_tokens.c.expires_at <= now))


class SsoFlowRepo(Repo):
    """Single sign-on flows that came back, so that each is accepted once."""

    async def use(self, flow: str, expires_at: int, now: int) -> bool:
        """Mark ``flow`` used; False if it was already."""
        await self._write(delete(t.sso_flows).where(t.sso_flows.c.expires <= now))
        try:
            await self._write(insert(t.sso_flows).values(flow=flow, expires=expires_at))
        except DuplicateError:
            return False
        return True


class StorageRepo(Repo):
    async def all(self) -> list[Storage]:
        rows = await self._rows(select(t.storages).order_by(t.storages.c.order, t.storages.c.id))
        return [_storage(r) for r in rows]

    async def page(self, page: int, per_page: int) -> tuple[list[Storage], int]:
        stmt = select(t.storages).order_by(t.storages.c.order, t.storages.c.id)
        storages = [_storage(r) for r in await self._rows(_page(stmt, page, per_page))]
        return storages, await self._count(t.storages)

    async def get(self, storage_id: int) -> Storage | None:
        rows = await self._rows(select(t.storages).where(t.storages.c.id == storage_id))
        return _storage(rows[0]) if rows else None

    async def create(self, storage: Storage) -> Storage:
        values = asdict(storage)
        values.pop("id")
        message = f"mount path {storage.mount_path!r} is already used"
        result = await self._write(insert(t.storages).values(**values), message)
        storage.id = int(result.inserted_primary_key[0])
        return storage

    async def save(self, storage: Storage) -> None:
        stmt = update(t.storages).where(t.storages.c.id == storage.id).values(**asdict(storage))
        await self._write(stmt, f"mount path {storage.mount_path!r} is already used")

    async def delete(self, storage_id: int) -> None:
        await self._write(delete(t.storages).where(t.storages.c.id == storage_id))


def _user(row: Row[Any]) -> User:
    return with_role_rights(User(**row._mapping))


def _storage(row: Row[Any]) -> Storage:
    storage = Storage(**row._mapping)
    if storage.modified is not None:
        storage.modified = _as_utc(storage.modified)
    return storage
