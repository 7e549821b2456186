"""``manifold import-alist FILE``: storages, users, metas and settings from AList v3.

Two sources are read:

* the backup file of AList's manage page ("Backup & Restore"): a JSON object with
  ``settings``, ``users``, ``storages`` and ``metas``, each as AList's admin list
  endpoints answer them; a file made with an encryption password (its ``encrypted``
  field set) is refused, make one without;
* AList's own SQLite database (``data/data.db``, tables ``x_setting_items``,
  ``x_users``, ``x_storages``, ``x_meta``), read without changing it.

AList keeps a password as ``sha256_hex(static + "-" + salt)``, where ``static`` is
the static hash both servers share, and never puts the hash or its salt in an API
answer, so the manage page's backup has no password to carry. A user entry holding
``pwd_hash`` and ``salt`` (the database, or a backup completed from it) keeps its
password: the hash verifies as it is and becomes argon2id at the user's next login.
An entry with a plain ``password`` (backups of old AList versions) gets it hashed
here; any other user is imported without a password and named in the summary, for an
admin to set one.

What exists already is kept: a storage at a taken mount path, a meta at a taken path
or a user with a taken name is skipped and named. The admin and guest accounts are
updated in place (base path, permissions, disabled, and the admin's password when the
entry has one) rather than created. Settings that do not exist here are skipped;
``version`` and ``index_progress`` describe the old server and are never imported.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import insert, select

from manifold.config import ConfigError
from manifold.container import Services
from manifold.db import tables
from manifold.db.engine import writing
from manifold.errors import ManifoldError
from manifold.models import Role, User
from manifold.services.auth.passwords import alist_hash, hash_static_async, static_hash
from manifold.services.auth.users import new_token_gen

SQLITE_MAGIC = b"SQLite format 3\x00"
SKIPPED_SETTINGS = frozenset({"version", "index_progress"})
STORAGE_FIELDS = tuple(c.name for c in tables.storages.columns if c.name != "id")
META_FIELDS = tuple(c.name for c in tables.metas.columns if c.name != "id")


class AListImportError(ConfigError):
    """The file is not an AList backup this importer can read."""


@dataclass(slots=True)
class Report:
    imported: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("settings", "users", "storages", "metas"), 0))  # fmt: skip
    skipped: list[str] = field(default_factory=list)
    without_password: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        counts = ", ".join(f"{count} {name}" for name, count in self.imported.items())
        out = [f"imported {counts}"]
        out += [f"skipped {what}" for what in self.skipped]
        if self.without_password:
            names = ", ".join(self.without_password)
            out.append(f"users without a password (set one as admin): {names}")
        return out


def read_source(path: Path, table_prefix: str = "x_") -> dict[str, list[dict[str, Any]]]:
    """The four lists from an AList backup file or an AList SQLite database."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise AListImportError(f"cannot read {path}: {exc.strerror}") from exc
    if head == SQLITE_MAGIC:
        return _from_database(path, table_prefix)
    return _from_backup(path)


def _from_backup(path: Path) -> dict[str, list[dict[str, Any]]]:
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise AListImportError(f"{path} is neither JSON nor an SQLite database") from exc
    if not isinstance(data, dict) or not any(
        k in data for k in ("users", "storages", "metas", "settings")
    ):
        raise AListImportError(f"{path} is not an AList backup (no users, storages, metas)")
    if data.get("encrypted"):
        raise AListImportError(
            "the backup is encrypted: make it again in AList without an encryption password"
        )
    found: dict[str, list[dict[str, Any]]] = {}
    for key in ("settings", "users", "storages", "metas"):
        items = data.get(key) or []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise AListImportError(f"the backup's {key} is not a list of objects")
        found[key] = items
    return found


def _from_database(path: Path, prefix: str) -> dict[str, list[dict[str, Any]]]:
    names = {"settings": "setting_items", "users": "users", "storages": "storages",
             "metas": "meta"}  # fmt: skip
    found: dict[str, list[dict[str, Any]]] = {}
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise AListImportError(f"cannot open {path}: {exc}") from exc
    try:
        conn.row_factory = sqlite3.Row
        for key, name in names.items():
            try:
                rows = conn.execute(f'SELECT * FROM "{prefix}{name}"').fetchall()  # noqa: S608
            except sqlite3.Error as exc:
                raise AListImportError(f"{path} has no AList table {prefix}{name}") from exc
            found[key] = [dict(row) for row in rows]
    finally:
        conn.close()
    return found


async def import_alist(services: Services, source: dict[str, list[dict[str, Any]]]) -> Report:
    """Add what ``source`` holds to a started server's database (see the module's text)."""
    report = Report()
    await _settings(services, source["settings"], report)
    for entry in source["users"]:
        await _user(services, entry, report)
    await _rows(services, tables.storages, "mount_path", STORAGE_FIELDS, source["storages"],
                "storages", report)  # fmt: skip
    await _rows(services, tables.metas, "path", META_FIELDS, source["metas"], "metas", report)
    return report


async def _settings(services: Services, items: list[dict[str, Any]], report: Report) -> None:
    known = {item.key for item in services.settings.all_items()}
    changes: list[tuple[str, str]] = []
    for item in items:
        key = str(item.get("key", ""))
        if key in SKIPPED_SETTINGS:
            continue
        if key not in known:
            report.skipped.append(f"setting {key} (not a setting here)")
            continue
        changes.append((key, str(item.get("value", ""))))
    for key, value in changes:
        try:
            await services.settings.save([(key, value)])
            report.imported["settings"] += 1
        except ManifoldError as exc:
            report.skipped.append(f"setting {key} ({exc.message})")


async def _user(services: Services, entry: dict[str, Any], report: Report) -> None:
    name = str(entry.get("username", ""))
    role = int(entry.get("role", Role.GENERAL))
    pwd_hash = await _password_hash(entry)
    existing = await services.users.by_name(name)
    if role in (Role.ADMIN, Role.GUEST):
        current = await (services.users.admin() if role == Role.ADMIN else services.users.guest())
        await _update_builtin(services, current, entry, pwd_hash)
        report.imported["users"] += 1
        return
    if existing is not None or not name:
        report.skipped.append(f"user {name or '(no name)'} (the name is taken)")
        return
    user = User(
        id=0,
        username=name,
        pwd_hash=pwd_hash,
        pwd_ts=int(entry.get("pwd_ts") or 0),
        base_path=str(entry.get("base_path") or "/"),
        role=Role.GENERAL,
        disabled=bool(entry.get("disabled", False)),
        permission=int(entry.get("permission", 0)),
        otp_secret=str(entry.get("otp_secret") or ""),
        sso_id=str(entry.get("sso_id") or ""),
        token_gen=new_token_gen(),
    )
    await _insert(services, tables.users, _user_row(user))
    services.users.forget(name)
    report.imported["users"] += 1
    if not pwd_hash:
        report.without_password.append(name)


async def _update_builtin(
    services: Services, current: User, entry: dict[str, Any], pwd_hash: str
) -> None:
    changed = replace(
        current,
        base_path=str(entry.get("base_path") or current.base_path),
        permission=int(entry.get("permission", current.permission)),
        disabled=bool(entry.get("disabled", current.disabled)) and current.role != Role.ADMIN,
    )
    if pwd_hash and current.role == Role.ADMIN:
        changed.pwd_hash = pwd_hash
        changed.token_gen = new_token_gen()
    async with writing(services.engine) as conn:
        values = _user_row(changed)
        await conn.execute(
            tables.users.update().where(tables.users.c.id == current.id).values(**values)
        )
    services.users.forget(current.username)


async def _password_hash(entry: dict[str, Any]) -> str:
    digest = str(entry.get("pwd_hash") or "")
    salt = entry.get("salt", entry.get("Salt"))
    if digest and isinstance(salt, str):
        return alist_hash(salt, digest)
    password = str(entry.get("password") or "")
    if password:
        return await hash_static_async(static_hash(password))
    return ""


def _user_row(user: User) -> dict[str, Any]:
    return {c.name: getattr(user, c.name) for c in tables.users.columns if c.name != "id"}


async def _rows(
    services: Services,
    table: Any,
    key: str,
    fields: tuple[str, ...],
    items: list[dict[str, Any]],
    label: str,
    report: Report,
) -> None:
    async with services.engine.connect() as conn:
        taken = set((await conn.execute(select(table.c[key]))).scalars().all())
    for item in items:
        value = str(item.get(key, ""))
        if not value or value in taken:
            report.skipped.append(f"{label[:-1]} {value or '(none)'} (already here)")
            continue
        row = {name: _column_value(table, name, item[name]) for name in fields if name in item}
        await _insert(services, table, row)
        taken.add(value)
        report.imported[label] += 1


def _column_value(table: Any, name: str, value: Any) -> Any:
    if name == "modified" and isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(table.c[name].type.python_type, type) and table.c[name].type.python_type is bool:
        return bool(value)
    return value


async def _insert(services: Services, table: Any, row: dict[str, Any]) -> None:
    async with writing(services.engine) as conn:
        await conn.execute(insert(table).values(**row))
