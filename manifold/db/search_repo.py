"""The search index in the database: one row per object, found by keywords below a folder.

Keywords are matched against ``name_key``, the name case-folded here in Python, so that
matching ignores case for every script on every engine (SQLite's LIKE and PostgreSQL's
``lower()`` under the C locale fold ASCII only). Every keyword must occur in the name:

- SQLite, full text: the FTS5 trigram table ``search_fts`` (migration 0003) answers keywords
  of three characters or more; shorter ones fall back to LIKE.
- everywhere else: LIKE ``%keyword%`` with the wildcards escaped. PostgreSQL answers it from a
  trigram index when ``pg_trgm`` could be installed; MySQL and MariaDB scan, because their
  FULLTEXT indexes hold whole words and cannot find a keyword inside a word.

Paths compare exactly: on SQLite through GLOB (its LIKE ignores ASCII case), and MySQL's
columns are binary-collated by migration 0003.

Writes come as a list of ``IndexWrite``s applied in order in one transaction (``apply``).
On an SQLite file that transaction runs in one trip to a thread of its own
(``SqliteIndexWriter``): through the async driver each statement is a trip back to the
event loop, and under load each trip waits behind every ready callback, so a batch of
a few hundred changes took seconds and the index fell behind the uploads.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import (
    ColumnElement,
    String,
    and_,
    bindparam,
    column,
    delete,
    false,
    func,
    insert,
    literal,
    not_,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from manifold.db import engine as db_engine
from manifold.db import tables as t
from manifold.db.engine import open_reader, write_gate, writing
from manifold.db.repos import Repo
from manifold.paths import split_path

log = logging.getLogger("manifold.search")

nodes = t.search_nodes

MAX_PARENT = 768
MAX_NAME = 512
MAX_KEY = 1024
TRIGRAM = 3  # FTS5's trigram tokenizer cannot find anything shorter

SCOPE_ALL, SCOPE_FOLDERS, SCOPE_FILES = 0, 1, 2

# Index writes run beside uploads, tasks and settings writes; SQLite takes one writer at
# a time and may refuse at once (a read turned write), so a refused write is tried again.
WRITE_ATTEMPTS = 5
FIRST_BACKOFF = 0.05
# Texts of lock conflicts worth a retry: SQLite's, MySQL's and MariaDB's, PostgreSQL's.
_CONTENTION = ("database is locked", "database is busy", "deadlock", "lock wait timeout")

T = TypeVar("T")


def is_contention(exc: BaseException) -> bool:
    """Whether ``exc`` is a lock conflict with another writer, which passes if retried."""
    if not isinstance(exc, OperationalError):
        return False
    text = str(exc.orig).lower()  # classified only; never logged (it may hold parameters)
    return any(marker in text for marker in _CONTENTION)


async def retrying(write: Callable[[], Awaitable[T]]) -> T:
    """Run ``write`` (a whole transaction), again after a lock conflict, a bounded number
    of times with growing pauses; the last conflict propagates."""
    for attempt in range(WRITE_ATTEMPTS - 1):
        try:
            return await write()
        except OperationalError as exc:
            if not is_contention(exc):
                raise
        pause = FIRST_BACKOFF * 2**attempt
        await asyncio.sleep(pause + random.uniform(0, pause))  # jitter spreads racing writers
    return await write()


class Node(NamedTuple):
    """One indexed object; a tuple, because a search may build tens of thousands."""

    parent: str
    name: str
    is_dir: bool
    size: int

    @property
    def path(self) -> str:
        return f"{self.parent.rstrip('/')}/{self.name}"


@dataclass(frozen=True, slots=True)
class Replace:
    """Each node takes the place of whatever was at its path, and of everything below."""

    nodes: Sequence[Node]


@dataclass(frozen=True, slots=True)
class DeleteTree:
    """The node at ``path`` and everything below it; the root clears the index."""

    path: str


@dataclass(frozen=True, slots=True)
class MoveTree:
    """``src`` and its subtree re-parented to ``dst``, replacing what ``dst`` held;
    nothing changes when ``src`` is not in the index (``apply`` answers False)."""

    src: str
    dst: str


IndexWrite = Replace | DeleteTree | MoveTree


def _movable(move: MoveTree) -> bool:
    src, dst = move.src, move.dst
    return not (src == "/" or src == dst or dst.startswith(src.rstrip("/") + "/"))


class NameMatch(NamedTuple):
    """Names holding ``text`` (case counts), at their start or end when asked."""

    text: str
    at_start: bool = False
    at_end: bool = False


@dataclass(frozen=True, slots=True)
class NodeQuery:
    """Nodes below ``parent`` (at any depth) whose names hold every keyword.

    ``excluded`` folders keep their own node but lose everything below them; with
    ``folders``, only the nodes directly in one of those folders count; with
    ``names``, only the nodes whose name is one of those matches.
    """

    parent: str = "/"
    keywords: tuple[str, ...] = ()
    scope: int = SCOPE_ALL
    excluded: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    names: tuple[NameMatch, ...] = ()


def fold(value: str) -> str:
    """The form names and keywords are compared in."""
    return value.casefold()


def _glob_escape(value: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in value)


# LIKE's escape character, as SQLAlchemy's ``autoescape`` uses it.
_ESCAPE = "/"


def _like_escape(value: str) -> str:
    """``value`` matching itself in a LIKE pattern with ``ESCAPE '/'``."""
    return value.replace("/", "//").replace("%", "/%").replace("_", "/_")


class _Shape(NamedTuple):
    """What a search statement's text depends on (its values are parameters)."""

    root: bool  # below "/": no folder condition
    excluded: tuple[bool, ...]  # per excluded folder: whether it is "/"
    scope: int
    fts: bool
    likes: int  # keywords matched by LIKE
    folders: int  # folders the matches must be directly in (0: any)
    names: int  # name matches of which one must hold (0: any name)


# Statement kinds: every match, one page with the total, the total alone, the number
# of matches in each folder.
_ALL, _PAGE, _COUNT, _PARENTS = 0, 1, 2, 3
# Statements kept by shape; an odd query (dozens of keywords) may pass it, then all go.
STATEMENTS_KEPT = 256


def _row(node: Node) -> dict[str, Any]:
    return {
        "parent": node.parent,
        "name": node.name,
        "is_dir": node.is_dir,
        "size": node.size,
        "name_key": fold(node.name)[:MAX_KEY],
    }


def _fits(node: Node) -> bool:
    if len(node.parent) <= MAX_PARENT and len(node.name) <= MAX_NAME:
        return True
    log.debug("not indexed, path too long: %s", node.path)
    return False


def _fts_phrase(keyword: str) -> str:
    return '"' + keyword.replace('"', '""') + '"'


class SearchRepo(Repo):
    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self._dialect: str = engine.dialect.name
        self._has_fts: bool | None = None
        self._statements: dict[tuple[_Shape, int], Any] = {}
        self._reader = open_reader(engine)
        self._writer = SqliteIndexWriter.open(engine)
        self.rows_read = 0  # rows the searches have fetched, for tests and benchmarks
        self.statements_built = 0  # statements built from a search's shape, likewise

    @property
    def statements_kept(self) -> int:
        """How many built statements are kept for reuse (at most ``STATEMENTS_KEPT``)."""
        return len(self._statements)

    @property
    def reads_in_one_trip(self) -> bool:
        """Whether searches go through the one-trip reader (an SQLite file) rather
        than the engine."""
        return self._reader is not None

    def close(self) -> None:
        """Close the one-trip reader's and writer's connections (before the engine is
        disposed)."""
        if self._reader is not None:
            self._reader.close()
        if self._writer is not None:
            self._writer.close()

    # -- writing ---------------------------------------------------------------

    # Each write is one transaction run through ``retrying``.

    async def apply(self, writes: Sequence[IndexWrite]) -> list[bool]:
        """Apply ``writes`` in order in one transaction; for each, whether it changed
        what it names (False only for a ``MoveTree`` whose source is not indexed)."""
        if not writes:
            return []
        writer = self._writer
        if writer is None:
            return await retrying(lambda: self._apply(writes))
        gate = write_gate(self.engine)
        return await retrying(lambda: writer.apply(writes, gate))

    async def _apply(self, writes: Sequence[IndexWrite]) -> list[bool]:
        async with writing(self.engine) as conn:
            return [await self._apply_one(conn, write) for write in writes]

    async def _apply_one(self, conn: AsyncConnection, write: IndexWrite) -> bool:
        if isinstance(write, Replace):
            await self._replace_in(conn, write.nodes)
            return True
        if isinstance(write, DeleteTree):
            await conn.execute(delete(nodes).where(self._tree(write.path)))
            return True
        return _movable(write) and await self._move_in(conn, write.src, write.dst)

    async def insert(self, batch: Sequence[Node]) -> int:
        """Add nodes as they are; the caller makes sure none is there already."""
        rows = [_row(n) for n in batch if _fits(n)]
        if rows:
            await retrying(lambda: self._insert(rows))
        return len(rows)

    async def _insert(self, rows: list[dict[str, Any]]) -> None:
        async with writing(self.engine) as conn:
            await conn.execute(insert(nodes), rows)

    async def replace(self, batch: Sequence[Node]) -> None:
        """Each node takes the place of whatever was at its path, and of everything
        below it; one transaction for the batch."""
        await self.apply([Replace(batch)])

    async def _replace_in(self, conn: AsyncConnection, batch: Sequence[Node]) -> None:
        for node in batch:
            await conn.execute(delete(nodes).where(self._tree(node.path)))
        rows = [_row(node) for node in batch if _fits(node)]
        if rows:
            await conn.execute(insert(nodes), rows)

    async def delete_tree(self, path: str) -> None:
        """The node at ``path`` and everything below it; the root clears the index."""
        await self.apply([DeleteTree(path)])

    async def move_tree(self, src: str, dst: str) -> bool:
        """Re-parent ``src`` and its subtree to ``dst``, replacing what ``dst`` held.

        False, changing nothing, when ``src`` is not in the index.
        """
        return (await self.apply([MoveTree(src, dst)]))[0]

    async def _move_in(self, conn: AsyncConnection, src: str, dst: str) -> bool:
        src_parent, src_name = split_path(src)
        dst_parent, dst_name = split_path(dst)
        found = await conn.execute(select(nodes.c.id).where(_at(src_parent, src_name)))
        node_id = found.scalar()
        if node_id is None:
            return False
        await conn.execute(delete(nodes).where(self._tree(dst)))
        renamed = {"parent": dst_parent, "name": dst_name, "name_key": fold(dst_name)}
        await conn.execute(update(nodes).where(nodes.c.id == node_id).values(**renamed))
        tail = func.substr(nodes.c.parent, len(src) + 1, type_=String)
        moved = literal(dst, type_=String) + tail
        await conn.execute(update(nodes).where(self._below(src)).values(parent=moved))
        return True

    async def clear(self) -> None:
        await retrying(lambda: self._write(delete(nodes)))

    # -- reading ---------------------------------------------------------------

    async def count(self) -> int:
        return await self._count(nodes)

    async def children(self, parent: str) -> list[Node]:
        stmt = select(*_NODE_COLUMNS).where(nodes.c.parent == parent).order_by(nodes.c.name)
        return [_node(row) for row in await self._rows(stmt)]

    async def search(
        self, query: NodeQuery, page: int, per_page: int, full_text: bool = True
    ) -> tuple[list[Node], int]:
        """One page of matches ordered by name, and how many match in all.

        ``per_page < 1`` returns every match.
        """
        if full_text and self._has_fts is None:
            await self._fts_ready()
        shape, params = self._shape(query, full_text)
        if per_page < 1:
            found = [_node(row) for row in await self._query(shape, _ALL, params)]
            return found, len(found)
        # The page and the number of matches in one query (a window count).
        params["limit"] = per_page
        params["offset"] = (max(page, 1) - 1) * per_page
        rows = await self._query(shape, _PAGE, params)
        if rows:
            return [_node(row) for row in rows], int(rows[0][4])
        if page <= 1:
            return [], 0
        counted = await self._query(shape, _COUNT, params)  # past the end
        return [], int(counted[0][0])

    async def parents(self, query: NodeQuery, full_text: bool = True) -> list[tuple[str, int]]:
        """The folders holding matches, each with how many it holds."""
        if full_text and self._has_fts is None:
            await self._fts_ready()
        shape, params = self._shape(query, full_text)
        return [(row[0], int(row[1])) for row in await self._query(shape, _PARENTS, params)]

    async def _query(self, shape: _Shape, kind: int, params: dict[str, Any]) -> Sequence[Any]:
        """The rows of a search statement: on an SQLite file in one trip to a worker
        thread (``SqliteReader``), else through the engine."""
        statement = self._statement(shape, kind)
        if self._reader is None:
            async with self.engine.connect() as conn:
                rows: Sequence[Any] = (await conn.execute(statement, params)).all()
        else:
            rows = await self._reader.rows(statement, params)
        self.rows_read += len(rows)
        return rows

    # -- conditions ------------------------------------------------------------

    # A search's statement depends only on its shape (is the folder the root, which
    # excluded folders are, the scope, full text or not, how many LIKE keywords);
    # the values go in as parameters. Statements are built once per shape and kept,
    # so a search costs SQLAlchemy no building and no cache-key walk.

    def _shape(self, query: NodeQuery, full_text: bool) -> tuple[_Shape, dict[str, Any]]:
        """The statement's shape and values; full text once ``_fts_ready`` was asked."""
        params: dict[str, Any] = {}
        if query.parent != "/":
            params["parent"], params["under"] = query.parent, self._under(query.parent)
        for index, folder in enumerate(query.excluded):
            if folder != "/":
                params[f"x{index}"], params[f"xu{index}"] = folder, self._under(folder)
        keywords = [fold(k) for k in query.keywords if k]
        long = [k for k in keywords if len(k) >= TRIGRAM]
        fts = full_text and bool(long) and bool(self._has_fts)
        if fts:
            keywords = [k for k in keywords if len(k) < TRIGRAM]
            params["match"] = " ".join(_fts_phrase(k) for k in long)
        for index, keyword in enumerate(keywords):
            params[f"k{index}"] = f"%{_like_escape(keyword)}%"
        for index, folder in enumerate(query.folders):
            params[f"f{index}"] = folder
        for index, match in enumerate(query.names):
            params[f"n{index}"] = self._name_pattern(match)
        shape = _Shape(
            query.parent == "/",
            tuple(folder == "/" for folder in query.excluded),
            query.scope,
            fts,
            len(keywords),
            len(query.folders),
            len(query.names),
        )
        return shape, params

    def _statement(self, shape: _Shape, kind: int) -> Any:
        """The statement of this shape and kind, built once; compiled to SQLite's own
        text and parameter order when the one-trip reader runs it."""
        key = (shape, kind)
        stmt = self._statements.get(key)
        if stmt is None:
            if len(self._statements) >= STATEMENTS_KEPT:
                self._statements.clear()  # shapes are few; only odd queries get here
            stmt = self._build(shape, kind)
            self.statements_built += 1
            if self._reader is not None:
                stmt = self._reader.compile(stmt)
            self._statements[key] = stmt
        return stmt

    def _build(self, shape: _Shape, kind: int) -> Any:
        where: list[ColumnElement[bool]] = []
        if not shape.root:
            where.append(self._below_param("parent", "under"))
        for index, excluded_root in enumerate(shape.excluded):
            if excluded_root:
                where.append(false())
            else:
                where.append(not_(self._below_param(f"x{index}", f"xu{index}")))
        if shape.scope == SCOPE_FOLDERS:
            where.append(nodes.c.is_dir == true())
        elif shape.scope == SCOPE_FILES:
            where.append(nodes.c.is_dir == false())
        if shape.fts:
            fts = text("SELECT rowid FROM search_fts WHERE search_fts MATCH :match")
            where.append(nodes.c.id.in_(fts.columns(column("rowid"))))
        for index in range(shape.likes):
            where.append(nodes.c.name_key.like(bindparam(f"k{index}"), escape=_ESCAPE))
        if shape.folders:
            where.append(nodes.c.parent.in_([bindparam(f"f{i}") for i in range(shape.folders)]))
        if shape.names:
            where.append(or_(*(self._name_param(f"n{i}") for i in range(shape.names))))
        if kind == _COUNT:
            return select(func.count()).select_from(nodes).where(*where)
        if kind == _PARENTS:
            stmt = select(nodes.c.parent, func.count()).where(*where)
            return stmt.group_by(nodes.c.parent)
        order = (nodes.c.name, nodes.c.id)
        if kind == _ALL:
            return select(*_NODE_COLUMNS).where(*where).order_by(*order)
        total = func.count().over().label("total")
        stmt = select(*_NODE_COLUMNS, total).where(*where).order_by(*order)
        return stmt.limit(bindparam("limit")).offset(bindparam("offset"))

    def _name_pattern(self, match: NameMatch) -> str:
        """``match`` as a GLOB pattern on SQLite (its LIKE ignores ASCII case), else as a
        LIKE pattern with ``ESCAPE '/'`` (case-sensitive: see the module's docstring)."""
        if self._dialect == "sqlite":
            text, anything = _glob_escape(match.text), "*"
        else:
            text, anything = _like_escape(match.text), "%"
        return ("" if match.at_start else anything) + text + ("" if match.at_end else anything)

    def _name_param(self, name: str) -> ColumnElement[bool]:
        if self._dialect == "sqlite":
            return nodes.c.name.op("GLOB")(bindparam(name))
        return nodes.c.name.like(bindparam(name), escape=_ESCAPE)

    def _under(self, folder: str) -> str:
        """The pattern of paths strictly below ``folder`` (see ``_below_param``)."""
        prefix = folder.rstrip("/") + "/"
        if self._dialect == "sqlite":
            return _glob_escape(prefix) + "*"
        return _like_escape(prefix) + "%"

    def _below_param(self, folder: str, under: str) -> ColumnElement[bool]:
        """``_below`` with the folder and its ``_under`` pattern as parameters."""
        inside: ColumnElement[bool]
        if self._dialect == "sqlite":
            inside = nodes.c.parent.op("GLOB")(bindparam(under))
        else:
            inside = nodes.c.parent.like(bindparam(under), escape=_ESCAPE)
        return or_(nodes.c.parent == bindparam(folder), inside)

    async def _fts_ready(self) -> None:
        """Find out, once, whether the FTS5 table exists (SQLite only)."""
        if self._dialect != "sqlite":
            self._has_fts = False
            return
        found = text("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_fts'")
        async with self.engine.connect() as conn:
            self._has_fts = (await conn.execute(found)).first() is not None

    def _below(self, folder: str) -> ColumnElement[bool]:
        """Rows whose parent is ``folder`` or lies below it."""
        if folder == "/":
            return true()
        prefix = folder.rstrip("/") + "/"
        under: ColumnElement[bool]
        if self._dialect == "sqlite":
            under = nodes.c.parent.op("GLOB")(_glob_escape(prefix) + "*")
        else:
            under = nodes.c.parent.startswith(prefix, autoescape=True)
        return or_(nodes.c.parent == folder, under)

    def _tree(self, path: str) -> ColumnElement[bool]:
        """The node at ``path`` and everything below it."""
        if path == "/":
            return true()
        parent, name = split_path(path)
        return or_(_at(parent, name), self._below(path))


def _node(row: Any) -> Node:
    """A node from a row of the engine or of SQLite itself (``is_dir`` as 0 or 1)."""
    return Node(row[0], row[1], bool(row[2]), row[3])


def _at(parent: str, name: str) -> ColumnElement[bool]:
    return and_(nodes.c.parent == parent, nodes.c.name == name)


_NODE_COLUMNS = (nodes.c.parent, nodes.c.name, nodes.c.is_dir, nodes.c.size)


# The index's statements in SQLite's own text, for the one-trip writer.
_SQL_INSERT = (
    "INSERT INTO search_nodes (parent, name, is_dir, size, name_key) VALUES (?, ?, ?, ?, ?)"
)
_SQL_DELETE_TREE = (
    "DELETE FROM search_nodes WHERE (parent = ? AND name = ?) OR parent = ? OR parent GLOB ?"
)
_SQL_DELETE_ALL = "DELETE FROM search_nodes"
_SQL_FIND = "SELECT id FROM search_nodes WHERE parent = ? AND name = ?"
_SQL_RENAME = "UPDATE search_nodes SET parent = ?, name = ?, name_key = ? WHERE id = ?"
_SQL_REPARENT = (
    "UPDATE search_nodes SET parent = ? || substr(parent, ?) WHERE parent = ? OR parent GLOB ?"
)


def _tree_args(path: str) -> tuple[str, str, str, str]:
    """The parameters of ``_SQL_DELETE_TREE`` for the node at ``path`` and its subtree."""
    parent, name = split_path(path)
    return parent, name, path, _glob_escape(path.rstrip("/") + "/") + "*"


class SqliteIndexWriter:
    """Index transactions on an SQLite file, each in one trip to a thread of its own.

    The thread keeps one connection in autocommit and runs ``BEGIN IMMEDIATE``, every
    statement of the batch and ``COMMIT`` in one call. It waits for its turn on the
    process's SQLite write gate first, as every other writer does, so it never meets
    their locks inside the database. A thread of its own, not the shared pool: a
    writer waiting on a lock held from outside the process holds only itself.
    """

    def __init__(self, database: str) -> None:
        self._database = database
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="manifold-index-writer")
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def open(cls, engine: AsyncEngine) -> SqliteIndexWriter | None:
        """A writer for an SQLite database file; None for other databases."""
        database = engine.url.database or ""
        if engine.dialect.name != "sqlite" or database in ("", ":memory:"):
            return None
        return None if database.startswith("file:") else cls(database)

    async def apply(self, writes: Sequence[IndexWrite], gate: asyncio.Lock) -> list[bool]:
        loop = asyncio.get_running_loop()
        async with gate:
            return await loop.run_in_executor(self._thread, self._apply, writes)

    def close(self) -> None:
        """Close the connection; a later write opens another."""
        self._thread.submit(self._close).result()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _apply(self, writes: Sequence[IndexWrite]) -> list[bool]:
        conn = self._conn or self._open()
        try:
            conn.execute("BEGIN IMMEDIATE")
            done = [self._apply_one(conn, write) for write in writes]
            conn.execute("COMMIT")
            return done
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            # As the async driver would raise it; the parameters stay out of its text.
            raise DBAPIError.instance("", None, exc, sqlite3.Error, hide_parameters=True) from exc

    def _apply_one(self, conn: sqlite3.Connection, write: IndexWrite) -> bool:
        if isinstance(write, Replace):
            conn.executemany(_SQL_DELETE_TREE, [_tree_args(node.path) for node in write.nodes])
            rows = [tuple(_row(node).values()) for node in write.nodes if _fits(node)]
            conn.executemany(_SQL_INSERT, rows)
            return True
        if isinstance(write, DeleteTree):
            if write.path == "/":
                conn.execute(_SQL_DELETE_ALL)
            else:
                conn.execute(_SQL_DELETE_TREE, _tree_args(write.path))
            return True
        return _movable(write) and self._move(conn, write.src, write.dst)

    def _move(self, conn: sqlite3.Connection, src: str, dst: str) -> bool:
        found = conn.execute(_SQL_FIND, split_path(src)).fetchone()
        if found is None:
            return False
        conn.execute(_SQL_DELETE_TREE, _tree_args(dst))
        dst_parent, dst_name = split_path(dst)
        conn.execute(_SQL_RENAME, (dst_parent, dst_name, fold(dst_name)[:MAX_KEY], found[0]))
        conn.execute(_SQL_REPARENT, (dst, len(src) + 1, src, _tree_args(src)[3]))
        return True

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._database, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={int(db_engine.BUSY_TIMEOUT_MS)}")
        conn.execute("PRAGMA synchronous=NORMAL")
        self._conn = conn
        return conn
