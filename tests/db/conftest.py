"""One private PostgreSQL and one MariaDB per test session; a fresh database per test."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.fixtures.dbservers import (
    RunningServer,
    have_mariadb,
    have_postgres,
    start_mariadb,
    start_postgres,
)

ENGINES = ("sqlite", "postgresql", "mariadb")


@pytest.fixture(scope="session")
def postgresql_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    if not have_postgres():
        pytest.fail("PostgreSQL is not installed: run the test command from README.md")
    server = start_postgres(tmp_path_factory.mktemp("pg"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mariadb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    if not have_mariadb():
        pytest.fail("MariaDB is not installed: run the test command from README.md")
    server = start_mariadb(tmp_path_factory.mktemp("my"))
    yield server
    server.stop()


async def _fresh_database(server_url: str) -> str:
    name = "t_" + secrets.token_hex(6)
    engine = create_async_engine(server_url, isolation_level="AUTOCOMMIT")
    async with engine.connect() as conn:
        await conn.execute(text(f"CREATE DATABASE {name}"))
    await engine.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(params=ENGINES)
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database on each engine in turn."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    server = request.getfixturevalue(f"{request.param}_server")
    return await _fresh_database(server.url)
