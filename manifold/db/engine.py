"""Opening the database and bringing its schema up to date with Alembic."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from manifold.concurrency import SQLITE_POOL, run_in
from manifold.config import make_private
from manifold.errors import ServerError

T = TypeVar("T")
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


def write_gate(engine: AsyncEngine) -> asyncio.Lock:
    """The lock SQLite writers of this process queue on (see ``writing``)."""
    gate = _WRITE_GATES.get(engine.sync_engine)
    if gate is None:
        gate = _WRITE_GATES[engine.sync_engine] = asyncio.Lock()
    return gate


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
    async with write_gate(engine), engine.begin() as conn:
        yield conn


async def transact(engine: AsyncEngine, work: Callable[[Connection], T]) -> T:
    """Run ``work`` in one write transaction, committed when it returns.

    On an SQLite file the whole transaction is ONE trip to a worker thread, on a
    connection of its own: through the async driver every statement is several trips
    between the event loop and the driver's thread, each waiting its turn behind the
    loop's ready callbacks (a busy upload has many), while the writer holds the write
    gate. Elsewhere it runs on the async engine's connection, statement by statement.
    """
    sync = _sync_engine(engine)
    if sync is None:
        async with writing(engine) as conn:
            return await conn.run_sync(work)
    async with write_gate(engine):
        return await run_in(SQLITE_POOL, _transaction, sync, work)


async def dispose(engine: AsyncEngine) -> None:
    """Close every connection ``engine`` and its plain companion hold."""
    sync = _SYNC_ENGINES.pop(engine.sync_engine, None)
    if sync is not None:
        sync.dispose()
    await engine.dispose()


def _transaction(sync: Engine, work: Callable[[Connection], T]) -> T:
    with sync.begin() as conn:
        return work(conn)


# A plain engine on the same SQLite file as an async one, for ``transact``.
_SYNC_ENGINES: weakref.WeakKeyDictionary[Any, Engine | None] = weakref.WeakKeyDictionary()


def _sync_engine(engine: AsyncEngine) -> Engine | None:
    """The plain engine of an SQLite database file; None for other databases. Its
    connections are kept between transactions (opening one costs the pragmas and a
    parse of the schema); ``dispose`` closes them."""
    if engine.sync_engine in _SYNC_ENGINES:
        return _SYNC_ENGINES[engine.sync_engine]
    sync: Engine | None = None
    if _sqlite_file(engine) is not None:
        sync = create_engine(engine.url.set(drivername="sqlite"), pool_size=1, max_overflow=3)
        event.listen(sync, "connect", _sqlite_pragmas)
    _SYNC_ENGINES[engine.sync_engine] = sync
    return sync


class SqliteReader:
    """Reads of an SQLite database file answered in one trip to a worker thread.

    Through the async driver a query is four or five trips between the event loop
    and the connection's thread (cursor, execute, fetch, close, rollback), and under
    load each trip waits its turn behind every ready callback of the loop. Here a
    compiled statement runs and fetches in one call on the default executor, on a
    connection of that worker thread's own, in autocommit: every read sees what was
    committed before it started. ``open_reader`` gives one only for a database file.
    """

    def __init__(self, engine: AsyncEngine, database: str) -> None:
        self._dialect = engine.dialect
        self._database = database
        self._local = threading.local()  # a connection per worker thread
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def compile(self, statement: Any) -> tuple[str, tuple[str, ...]]:
        """``statement``'s SQL text and the names of its parameters, in order."""
        compiled = statement.compile(dialect=self._dialect)
        return str(compiled), tuple(compiled.positiontup or ())

    async def rows(
        self, compiled: tuple[str, tuple[str, ...]], params: dict[str, Any]
    ) -> list[Any]:
        sql, names = compiled
        return await run_in(SQLITE_POOL, self._rows, sql, [params[name] for name in names])

    def _rows(self, sql: str, args: list[Any]) -> list[Any]:
        try:
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = self._open()
            return conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            # As the async driver would raise it; the parameters stay out of its text.
            raise DBAPIError.instance(sql, None, exc, sqlite3.Error, hide_parameters=True) from exc

    def close(self) -> None:
        """Close every connection opened so far; a later read opens new ones."""
        with self._lock:
            opened, self._opened, self._local = self._opened, [], threading.local()
        for conn in opened:
            conn.close()  # closable from here: opened with check_same_thread=False

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._database, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_MS)}")
        conn.execute("PRAGMA query_only=ON")
        with self._lock:
            self._opened.append(conn)
        return conn


def open_reader(engine: AsyncEngine) -> SqliteReader | None:
    """A one-trip reader for an SQLite database file; None for other databases."""
    database = _sqlite_file(engine)
    return None if database is None else SqliteReader(engine, database)


def _sqlite_file(engine: AsyncEngine) -> str | None:
    """The path of an SQLite database file; None for another database or a memory one."""
    database = engine.url.database or ""
    if engine.dialect.name != "sqlite" or database in ("", ":memory:"):
        return None
    return None if database.startswith("file:") else database


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
