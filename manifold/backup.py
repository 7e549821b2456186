"""``manifold backup`` and ``manifold restore``: the database and the config in one file.

The file is JSON lines. The first line is a header: the format's name and version, the
schema revision the rows were read at, and the config file's values (the JWT secret
included, so tokens stay valid; the database URL left out, since a backup moves between
databases). Every other line is one row: ``{"table": name, "row": {column: value}}``,
dates as ISO 8601 text. Rows are read and written through the schema in ``db.tables``,
never as a copy of a database file, so a backup of SQLite restores into PostgreSQL or
MySQL and back.

The file holds password hashes, the admin token and the JWT secret: it is created
``0600`` and belongs with the data folder's other secrets.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy import DateTime, Table, delete, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from manifold.config import Config, ConfigError, load_config
from manifold.db import tables
from manifold.db.engine import migrate, open_engine

FORMAT = "manifold-backup"
VERSION = 1
BATCH = 500
# Config keys a restore leaves as the target has them: where its database is, and
# where it listens (the target machine's own business).
KEPT_KEYS = frozenset({"database_url", "address", "port"})


class BackupError(ConfigError):
    """A backup file that cannot be used, or a restore that would overwrite data."""


@dataclass(slots=True)
class Summary:
    rows: dict[str, int]

    def line(self) -> str:
        counted = ", ".join(f"{name} {count}" for name, count in self.rows.items() if count)
        return counted or "no rows"


def default_name() -> str:
    return datetime.now(UTC).strftime("manifold-backup-%Y%m%d-%H%M%S.jsonl")


async def backup(config: Config, out: Path) -> Summary:
    """Write every table's rows and the config to ``out`` (through a temporary name)."""
    engine = open_engine(config.effective_database_url)
    temp = out.with_name(out.name + ".tmp")
    counts: dict[str, int] = {}
    try:
        await migrate(engine)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            async with engine.connect() as conn:
                handle.write(_line(_header(config, await _revision(conn))))
                for table in tables.metadata.sorted_tables:
                    counts[table.name] = await _dump(conn, table, handle)
        os.replace(temp, out)
    finally:
        temp.unlink(missing_ok=True)
        await engine.dispose()
    return Summary(counts)


async def restore(data_dir: Path, source: Path, force: bool) -> Summary:
    """Load ``source`` into the database of the config in ``data_dir``; the config file
    takes the backup's values except ``KEPT_KEYS``. Refuses a database that holds rows
    unless ``force`` (then every row is replaced)."""
    with source.open("rb") as handle:
        header = _read_header(handle)
        config = load_config(data_dir)
        engine = open_engine(config.effective_database_url)
        try:
            await migrate(engine)
            async with engine.begin() as conn:
                if await _holds_rows(conn) and not force:
                    raise BackupError(
                        "the database is not empty; restore with --force to replace it"
                    )
                for table in reversed(tables.metadata.sorted_tables):
                    await conn.execute(delete(table))
                counts = await _load(conn, _rows(handle))
                await _reset_sequences(conn)
        finally:
            await engine.dispose()
    _restore_config(data_dir, header.get("config", {}))
    return Summary(counts)


def _header(config: Config, revision: str) -> dict[str, Any]:
    stored = orjson.loads(config.config_path.read_bytes()) if config.config_path.exists() else {}
    return {
        "format": FORMAT,
        "version": VERSION,
        "revision": revision,
        "created": datetime.now(UTC).isoformat(),
        "config": {k: v for k, v in stored.items() if k not in KEPT_KEYS},
    }


async def _revision(conn: AsyncConnection) -> str:
    row = (await conn.execute(text("SELECT version_num FROM alembic_version"))).first()
    return str(row[0]) if row else ""


async def _dump(conn: AsyncConnection, table: Table, handle: IO[bytes]) -> int:
    count = 0
    order = list(table.primary_key.columns)
    result = await conn.stream(select(table).order_by(*order))
    async for row in result:
        values = {str(key): _plain(value) for key, value in row._mapping.items()}
        handle.write(_line({"table": table.name, "row": values}))
        count += 1
    return count


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _line(value: Any) -> bytes:
    return orjson.dumps(value) + b"\n"


def _read_header(handle: IO[bytes]) -> dict[str, Any]:
    first = handle.readline()
    try:
        header = orjson.loads(first)
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise BackupError("not a Manifold backup file (its first line is no backup header)")
    if header.get("version") != VERSION:
        raise BackupError(f"backup format version {header.get('version')} is not supported")
    return header


def _rows(handle: IO[bytes]) -> Iterator[tuple[str, dict[str, Any]]]:
    for number, raw in enumerate(handle, start=2):
        if not raw.strip():
            continue
        try:
            line = orjson.loads(raw)
            yield str(line["table"]), dict(line["row"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise BackupError(f"line {number} of the backup is not a row") from exc


async def _holds_rows(conn: AsyncConnection) -> bool:
    for table in tables.metadata.sorted_tables:
        count = (await conn.execute(select(func.count()).select_from(table))).scalar_one()
        if count:
            return True
    return False


Rows = Iterator[tuple[str, dict[str, Any]]]


async def _load(conn: AsyncConnection, rows: Rows) -> dict[str, int]:
    known = {table.name: table for table in tables.metadata.sorted_tables}
    counts = dict.fromkeys(known, 0)
    batch: list[dict[str, Any]] = []
    current: Table | None = None
    async for name, row in _aiter(rows):
        table = known.get(name)
        if table is None:
            raise BackupError(f"the backup has rows of an unknown table {name!r}")
        if current is not None and (table is not current or len(batch) >= BATCH):
            await conn.execute(insert(current), batch)
            batch = []
        current = table
        batch.append(_typed(table, row))
        counts[name] += 1
    if current is not None and batch:
        await conn.execute(insert(current), batch)
    return counts


async def _aiter(rows: Rows) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    for item in rows:
        yield item


def _typed(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in row.items():
        column = table.columns.get(key)
        if column is None:
            raise BackupError(f"the backup's table {table.name} has an unknown column {key!r}")
        if isinstance(column.type, DateTime) and isinstance(value, str):
            value = datetime.fromisoformat(value)
        values[key] = value
    return values


async def _reset_sequences(conn: AsyncConnection) -> None:
    """PostgreSQL's id sequences do not follow explicit ids: move each past the largest."""
    if conn.dialect.name != "postgresql":
        return
    for table in tables.metadata.sorted_tables:
        for column in table.primary_key.columns:
            if column.autoincrement is True or (
                column.autoincrement == "auto" and column.type.python_type is int
            ):
                quoted = f'"{table.name}"'
                # Names from the schema in ``db.tables``, never from the file.
                biggest = f"COALESCE((SELECT MAX({column.name}) FROM {quoted}), 0)"  # noqa: S608
                sequence = f"pg_get_serial_sequence('{quoted}', '{column.name}')"
                sql = f"SELECT setval({sequence}, {biggest} + 1, false)"
                await conn.execute(text(sql))


def _restore_config(data_dir: Path, values: dict[str, Any]) -> None:
    config = load_config(data_dir)
    stored = orjson.loads(config.config_path.read_bytes())
    stored.update({k: v for k, v in values.items() if k not in KEPT_KEYS})
    temp = config.config_path.with_suffix(".json.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(orjson.dumps(stored, option=orjson.OPT_INDENT_2) + b"\n")
    os.replace(temp, config.config_path)
    load_config(data_dir)  # checks the values, and writes the file in its usual shape
