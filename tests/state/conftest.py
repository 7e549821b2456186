"""The shared-state back ends under test: memory, the database (SQLite and
PostgreSQL) and a private Redis started once per session."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from manifold.config import load_config
from manifold.container import Services
from manifold.db.engine import migrate, open_engine
from tests.conftest import ADMIN_PASSWORD
from tests.db.conftest import postgresql_server  # noqa: F401 - a fixture


async def fresh_database(server_url: str) -> str:
    name = "s_" + secrets.token_hex(6)
    engine = create_async_engine(server_url, isolation_level="AUTOCOMMIT")
    async with engine.connect() as conn:
        await conn.execute(text(f"CREATE DATABASE {name}"))
    await engine.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


async def database_at(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> str:
    """A migrated, empty database of ``kind`` (sqlite or postgresql)."""
    if kind == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / f'state-{secrets.token_hex(3)}.db'}"
    else:
        url = await fresh_database(request.getfixturevalue("postgresql_server").url)
    engine = open_engine(url)
    await migrate(engine)
    await engine.dispose()
    return url


# One secret for every instance of a test's cluster: a token made by one is read by all.
SHARED_SECRET = "a-secret-both-instances-share-0123456789abcdef"


@contextlib.asynccontextmanager
async def instances(
    request: pytest.FixtureRequest, tmp_path: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[list[Services]]:
    """Two instances ("one", "two") started on one SQLite database, as behind a load
    balancer, each with a data folder of its own; stopped at the end."""
    shared = {
        "MANIFOLD_DATABASE_URL": await database_at(request, tmp_path, "sqlite"),
        "MANIFOLD_JWT_SECRET": SHARED_SECRET,
        **(env or {}),
    }
    async with contextlib.AsyncExitStack() as stack:
        made = []
        for name in ("one", "two"):
            config = load_config(tmp_path / name, {**shared, "MANIFOLD_INSTANCE_ID": name})
            services = Services.build(config, shared=True)
            await services.start(admin_password=ADMIN_PASSWORD)
            stack.push_async_callback(services.stop)
            made.append(services)
        yield made


@pytest.fixture
async def engine_of(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Opens engines on a migrated database of a kind; disposed at the end."""
    opened: list[AsyncEngine] = []

    async def make(kind: str) -> AsyncEngine:
        engine = open_engine(await database_at(request, tmp_path, kind))
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        await engine.dispose()
