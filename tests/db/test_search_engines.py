"""The search index on every engine: the same answers from SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from manifold.db.engine import migrate, open_engine
from manifold.db.search_repo import Node, NodeQuery, SearchRepo


@pytest.fixture
async def repo(database_url: str) -> AsyncIterator[SearchRepo]:
    engine = open_engine(database_url)
    await migrate(engine)
    yield SearchRepo(engine)
    await engine.dispose()


def file(parent: str, name: str) -> Node:
    return Node(parent, name, False, 7)


async def found(repo: SearchRepo, parent: str, *keywords: str, full_text: bool = True) -> set[str]:
    nodes, total = await repo.search(NodeQuery(parent, keywords), 1, 0, full_text)
    assert total == len(nodes)
    return {n.path for n in nodes}


async def test_each_engine_has_its_keyword_index(repo: SearchRepo) -> None:
    dialect = repo.engine.dialect.name
    async with repo.engine.connect() as conn:
        if dialect == "sqlite":
            query = "SELECT count(*) FROM sqlite_master WHERE name = 'search_fts'"
        elif dialect == "postgresql":
            index = "ix_search_nodes_name_key_trgm"
            query = f"SELECT count(*) FROM pg_indexes WHERE indexname = '{index}'"
        else:
            query = (
                "SELECT count(*) FROM information_schema.columns WHERE table_schema = DATABASE() "
                "AND table_name = 'search_nodes' AND collation_name = 'utf8mb4_nopad_bin'"
            )
        count = (await conn.execute(text(query))).scalar()
    assert count == (3 if dialect == "mysql" else 1)


@pytest.mark.parametrize("full_text", [True, False], ids=["full_text", "like"])
async def test_keywords_ignore_case_and_wildcards_match_themselves(
    repo: SearchRepo, full_text: bool
) -> None:
    names = ["ÉCOLE Straße.txt", "ПРИВЕТ.doc", "年度报告.xlsx", "100%.txt", "1000.txt"]
    names += ["a_b", "axb", "it's", 'say "hi"', "back\\slash", "plain"]
    await repo.insert([file("/", n) for n in names])
    cases = {
        "école": {"/ÉCOLE Straße.txt"},
        "STRASSE": {"/ÉCOLE Straße.txt"},
        "привет": {"/ПРИВЕТ.doc"},
        "报告": {"/年度报告.xlsx"},
        "%": {"/100%.txt"},
        "_": {"/a_b"},
        "'": {"/it's"},
        '"hi"': {'/say "hi"'},
        "\\": {"/back\\slash"},
        "e": {"/ÉCOLE Straße.txt"},
        "ecole": set(),
    }
    for keyword, expected in cases.items():
        assert await found(repo, "/", keyword, full_text=full_text) == expected, keyword
    assert await found(repo, "/", "ÉCOLE", "txt", full_text=full_text) == {"/ÉCOLE Straße.txt"}


async def test_paths_are_exact_on_every_engine(repo: SearchRepo) -> None:
    await repo.insert([file("/a", "x"), file("/A", "x"), file("/a ", "x"), file("/ab", "x")])
    await repo.insert([file("/a_", "x"), file("/a%", "x"), file("/a/deep", "x")])
    assert await found(repo, "/a") == {"/a/x", "/a/deep/x"}
    assert await found(repo, "/a_") == {"/a_/x"}
    await repo.delete_tree("/a")
    assert await found(repo, "/") == {"/A/x", "/a /x", "/ab/x", "/a_/x", "/a%/x"}


async def test_names_differing_in_case_or_trailing_space_are_distinct(repo: SearchRepo) -> None:
    await repo.insert([file("/", "a.txt"), file("/", "A.txt"), file("/", "a.txt ")])
    await repo.replace([file("/", "a.txt")])
    await repo.delete_tree("/A.txt")
    assert await found(repo, "/") == {"/a.txt", "/a.txt "}


async def test_move_and_paging_on_every_engine(repo: SearchRepo) -> None:
    await repo.insert(
        [Node("/", "src", True, 0), *(file("/src/in", f"n{i:02d}") for i in range(12))]
    )
    assert await repo.move_tree("/src", "/dst%")
    nodes, total = await repo.search(NodeQuery("/dst%", ("n",)), 2, 5, True)
    assert total == 12
    assert [n.path for n in nodes] == [f"/dst%/in/n{i:02d}" for i in range(5, 10)]
    assert await found(repo, "/src") == set()
