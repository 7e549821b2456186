"""The schema and the services on every supported engine, from an empty database."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from sqlalchemy import func, insert, inspect, select, text
from sqlalchemy.engine import Connection

from manifold.db import engine as engine_module
from manifold.db import tables
from manifold.db.engine import MIGRATIONS, migrate, open_engine, writing
from tests.conftest import started_api

TABLES = {
    "users",
    "settings",
    "metas",
    "ssh_keys",
    "storages",
    "revoked_tokens",
    "tasks",
    "search_nodes",
}


def _alembic_config() -> AlembicConfig:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _upgrade_to(connection: Connection, revision: str) -> None:
    cfg = _alembic_config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, revision)


def _head_revision() -> str:
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None
    return head


async def test_migrations_create_every_table_and_are_idempotent(database_url: str) -> None:
    engine = open_engine(database_url)
    try:
        await migrate(engine)
        await migrate(engine)
        async with engine.connect() as conn:
            names = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
        assert names >= TABLES
        assert [row[0] for row in version] == [_head_revision()]
    finally:
        await engine.dispose()


INSERT_USER = text(
    "INSERT INTO users (username, pwd_hash, pwd_ts, base_path, role, disabled, permission, "
    "otp_secret, sso_id) VALUES (:name, '', 0, '/', 0, :disabled, 0, '', '')"
)


async def test_users_from_before_token_generations_each_get_a_random_one(
    database_url: str,
) -> None:
    engine = open_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade_to, "0003")
            for name in ("first", "second", "third"):
                await conn.execute(INSERT_USER, {"name": name, "disabled": False})
        await migrate(engine)
        async with engine.connect() as conn:
            generations = (await conn.execute(text("SELECT token_gen FROM users"))).scalars().all()
        assert len(set(generations)) == 3
        assert all(re.fullmatch(r"[0-9a-f]{32}", g) for g in generations)
    finally:
        await engine.dispose()


async def test_whole_foundation_survives_a_restart(database_url: str, tmp_path: Path) -> None:
    async with started_api(tmp_path / "data", database_url) as api:
        admin = await api.as_admin()
        await admin.make_user("ünïcode-user", "pw-1", base_path="/team")
        meta = {"path": "/team/docs", "password": "p", "hide": "^secret", "readme": "# hi"}
        assert (await admin.post("/api/admin/meta/create", meta))["code"] == 200
        saved = await admin.post("/api/admin/setting/save", [{"key": "site_title", "value": "Ω"}])
        assert saved["code"] == 200
        user_token = await api.login("ünïcode-user", "pw-1")
        logged_out = await api.login("ünïcode-user", "pw-1", fresh=True)
        assert (await api.get("/api/auth/logout", token=logged_out))["code"] == 200

    async with started_api(tmp_path / "data", database_url) as api:
        services = api.services
        me = await api.get("/api/me", token=user_token)
        assert me["data"]["username"] == "ünïcode-user"
        assert me["data"]["base_path"] == "/team"
        assert (await api.get("/api/me", token=logged_out))["code"] == 401
        public = await api.get("/api/public/settings")
        assert public["data"]["site_title"] == "Ω"
        assert services.metas.nearest("/team/docs/a").readme == "# hi"  # type: ignore[union-attr]
        users = await api.get("/api/admin/user/list", token=await api.login())
        assert users["data"]["total"] == 3


async def test_unique_constraints_answer_the_envelope(database_url: str, tmp_path: Path) -> None:
    async with started_api(tmp_path / "data", database_url) as api:
        admin = await api.as_admin()
        await admin.make_user("dup", "pw")
        again = await admin.post("/api/admin/user/create", {"username": "dup", "password": "x"})
        assert again["code"] == 500
        assert "dup" in again["message"]
        assert (await admin.post("/api/admin/meta/create", {"path": "/m"}))["code"] == 200
        twice = await admin.post("/api/admin/meta/create", {"path": "/m/"})
        assert twice["code"] == 500


async def test_writers_never_meet_each_other_in_the_database(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many write transactions at once, each holding its transaction a while: on SQLite
    they queue in the process (a busy timeout of 10 ms is never reached); every engine
    commits them all."""
    monkeypatch.setattr(engine_module, "BUSY_TIMEOUT_MS", 10)
    engine = open_engine(database_url)
    try:
        await migrate(engine)

        async def one(i: int) -> None:
            async with writing(engine) as conn:
                row = {"key": f"crowd-{i}", "value": "", "help": "", "type": "string",
                       "options": "", "group": 0, "flag": 0, "index": 0}  # fmt: skip
                await conn.execute(insert(tables.settings).values(**row))
                await asyncio.sleep(0.02)

        await asyncio.gather(*(one(i) for i in range(40)))
        async with engine.connect() as conn:
            crowd = select(func.count()).where(tables.settings.c.key.startswith("crowd-"))
            count = (await conn.execute(crowd)).scalar_one()
        assert count == 40
    finally:
        await engine.dispose()
