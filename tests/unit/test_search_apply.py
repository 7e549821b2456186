"""Index writes applied as one transaction: the same answers on an SQLite file (its
one-trip writer) and through the engine (an in-memory database)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.db.engine import migrate, open_engine
from manifold.db.search_repo import DeleteTree, MoveTree, Node, NodeQuery, Replace, SearchRepo

WRITES = [
    Replace([Node("/", "a", True, 0), Node("/a", "one.txt", False, 1)]),
    Replace([Node("/a", "two.txt", False, 2), Node("/", "b", True, 0)]),
    Replace([Node("/a", "two.txt", False, 3)]),  # written again: one node, the new size
    MoveTree("/a", "/b/a"),  # into a folder: the subtree follows
    MoveTree("/missing", "/c"),  # nothing to move
    MoveTree("/b", "/b/a/inside"),  # into itself: refused
    Replace([Node("/", "x_*?[.txt", False, 4)]),
    DeleteTree("/b/a/one.txt"),
    Replace([Node("/b", "a", True, 0)]),  # a folder replaced: what was below goes
]


@pytest.fixture(params=["file", "memory"])
async def repo(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SearchRepo]:
    where = f"/{tmp_path / 'index.db'}" if request.param == "file" else ""
    engine = open_engine(f"sqlite+aiosqlite://{where}")
    await migrate(engine)
    found = SearchRepo(engine)
    yield found
    found.close()
    await engine.dispose()


async def everything(repo: SearchRepo) -> list[Node]:
    return (await repo.search(NodeQuery("/"), 1, 0))[0]


async def test_writes_apply_in_order_in_one_call(repo: SearchRepo) -> None:
    assert await repo.apply(WRITES) == [True, True, True, True, False, False, True, True, True]
    assert await everything(repo) == [
        Node("/b", "a", True, 0),
        Node("/", "b", True, 0),
        Node("/", "x_*?[.txt", False, 4),
    ]
    assert (await repo.search(NodeQuery("/", ("*?[",)), 1, 10))[1] == 1


async def test_the_root_clears_everything(repo: SearchRepo) -> None:
    await repo.apply(WRITES[:2])
    assert await repo.apply([DeleteTree("/")]) == [True]
    assert await everything(repo) == []


async def test_nothing_to_write_is_no_transaction(repo: SearchRepo) -> None:
    assert await repo.apply([]) == []
