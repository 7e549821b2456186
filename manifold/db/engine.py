"""Opening the database and bringing its schema up to date with Alembic."""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from manifold.config import make_private
from manifold.errors import ServerError

MIGRATIONS = Path(__file__).parent / "migrations"
# How long an SQLite statement waits for another connection's write lock.
BUSY_TIMEOUT_MS = 5000
# SQLite makes these beside the database, with the database file's permissions.
_SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


class DatabaseError(ServerError):
    default_message = "database error"


def open_engine(url: str) -> AsyncEngine:
    """Create the engine for ``url``; SQLite gets WAL mode and a busy timeout."""
    _quiet_driver_loggers()
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseError(f"invalid database URL: {exc}") from exc
    options: dict[str, Any] = {"pool_pre_ping": parsed.get_backend_name() != "sqlite"}
    if parsed.get_backend_name() == "mysql":
        options["pool_recycle"] = 3600
    engine = create_async_engine(parsed, **options)
    if parsed.get_backend_name() == "sqlite":
        _private_sqlite_files(parsed.database or "")
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


# One writer at a time per SQLite database in this process (see ``writing``).
_WRITE_GATES: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()


@asynccontextmanager
async def writing(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A write transaction, committed when the block ends.

    SQLite lets one connection write at a time and makes the others spin in its busy
    handler, each holding a pooled connection and a thread. Here its writers queue on
    one lock instead, before they take a connection, so a write never waits on
    another inside the database and never meets its busy timeout. PostgreSQL and
    MySQL keep their own concurrency.
    """
    if engine.dialect.name != "sqlite":
        async with engine.begin() as conn:
            yield conn
        return
    gate = _WRITE_GATES.get(engine.sync_engine)
    if gate is None:
        gate = _WRITE_GATES[engine.sync_engine] = asyncio.Lock()
    async with gate, engine.begin() as conn:
        yield conn


def _private_sqlite_files(database: str) -> None:
    """Create the database file ``0600`` before SQLite does; tighten an existing one.

    SQLite gives its WAL and shared-memory files the database file's mode, so a
    private database file keeps them private too.
    """
    if database in ("", ":memory:") or database.startswith("file:"):
        return
    try:
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT, 0o600))
        for suffix in _SQLITE_COMPANIONS:
            make_private(database + suffix)
    except OSError as exc:
        raise DatabaseError(f"cannot open database file: {exc.strerror}") from exc


def _quiet_driver_loggers() -> None:
    # Database drivers log statements with their parameters at DEBUG: password
    # hashes and the admin token would reach the log. Keep them at INFO at least.
    for name in ("aiosqlite", "asyncpg", "aiomysql"):
        driver_log = logging.getLogger(name)
        if driver_log.level == logging.NOTSET or driver_log.level < logging.INFO:
            driver_log.setLevel(logging.INFO)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_MS)}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


async def migrate(engine: AsyncEngine) -> None:
    """Apply every migration not yet applied. Forward only."""
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade)
    except SQLAlchemyError as exc:
        raise DatabaseError(f"database migration failed: {exc.__class__.__name__}") from exc


def _upgrade(connection: Connection) -> None:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")
