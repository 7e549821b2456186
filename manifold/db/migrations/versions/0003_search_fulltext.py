"""The search index's folded names and each engine's way of finding keywords in them.

- every engine: ``search_nodes.name_key``, the case-folded name keywords are matched against
  (rows from before this revision get ``lower(name)``; a rebuild gives the exact form);
- SQLite: ``search_fts``, an FTS5 trigram table over ``name_key`` kept by triggers
  (skipped when the SQLite library lacks FTS5 or trigrams; LIKE then answers);
- PostgreSQL: a trigram GIN index on ``name_key`` when ``pg_trgm`` can be installed;
- MySQL/MariaDB: paths and names become binary-collated (without padding where the server
  has such a collation), so that ``/A`` and ``/a`` are different folders and a removed
  ``a.txt`` takes neither ``A.txt`` nor ``a.txt `` with it.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

log = logging.getLogger("manifold.db")

SQLITE_FTS = (
    "CREATE VIRTUAL TABLE search_fts USING fts5("
    "name_key, content='search_nodes', content_rowid='id', tokenize='trigram')",
    "CREATE TRIGGER search_nodes_fts_insert AFTER INSERT ON search_nodes BEGIN "
    "INSERT INTO search_fts(rowid, name_key) VALUES (new.id, new.name_key); END",
    "CREATE TRIGGER search_nodes_fts_delete AFTER DELETE ON search_nodes BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, name_key) "
    "VALUES ('delete', old.id, old.name_key); END",
    "CREATE TRIGGER search_nodes_fts_update AFTER UPDATE OF name_key ON search_nodes BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, name_key) "
    "VALUES ('delete', old.id, old.name_key); "
    "INSERT INTO search_fts(rowid, name_key) VALUES (new.id, new.name_key); END",
    "INSERT INTO search_fts(search_fts) VALUES ('rebuild')",
)

# Binary collations, preferring those that do not pad: under utf8mb4_bin ``a`` equals ``a ``.
MYSQL_COLLATIONS = ("utf8mb4_nopad_bin", "utf8mb4_0900_bin", "utf8mb4_bin")
MYSQL_BINARY = (
    "ALTER TABLE search_nodes "
    "MODIFY parent VARCHAR(768) CHARACTER SET utf8mb4 COLLATE {0} NOT NULL, "
    "MODIFY name VARCHAR(512) CHARACTER SET utf8mb4 COLLATE {0} NOT NULL, "
    "MODIFY name_key VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE {0} NOT NULL DEFAULT ''"
)

PG_TRIGRAM_INDEX = (
    "CREATE INDEX ix_search_nodes_name_key_trgm ON search_nodes USING gin (name_key gin_trgm_ops)"
)


def upgrade() -> None:
    op.add_column(
        "search_nodes",
        sa.Column("name_key", sa.String(1024), nullable=False, server_default=""),
    )
    op.execute("UPDATE search_nodes SET name_key = lower(name)")
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _sqlite_fts()
    elif dialect == "postgresql":
        _postgres_trigram_index()
    elif dialect == "mysql":
        op.execute(MYSQL_BINARY.format(_mysql_binary_collation()))


def _sqlite_fts() -> None:
    bind = op.get_bind()
    try:
        with bind.begin_nested():
            for statement in SQLITE_FTS:
                bind.execute(sa.text(statement))
    except sa.exc.OperationalError as exc:
        log.warning("SQLite without FTS5 trigrams, search uses LIKE: %s", exc.orig)


def _mysql_binary_collation() -> str:
    rows = op.get_bind().execute(sa.text("SHOW COLLATION WHERE Charset = 'utf8mb4'"))
    known = {row[0] for row in rows}
    return next(c for c in MYSQL_COLLATIONS if c in known)


def _postgres_trigram_index() -> None:
    bind = op.get_bind()
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
            bind.execute(sa.text(PG_TRIGRAM_INDEX))
    except sa.exc.DBAPIError as exc:
        log.warning("no pg_trgm, search scans search_nodes: %s", type(exc.orig).__name__)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for name in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS search_nodes_fts_{name}")
        op.execute("DROP TABLE IF EXISTS search_fts")
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_search_nodes_name_key_trgm")
    with op.batch_alter_table("search_nodes") as batch:
        batch.drop_column("name_key")
