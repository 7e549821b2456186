"""The search index repository on SQLite: keywords (FTS5 and LIKE), folders, writes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from manifold.db import search_repo
from manifold.db.engine import migrate, open_engine
from manifold.db.search_repo import (
    SCOPE_FILES,
    SCOPE_FOLDERS,
    Node,
    NodeQuery,
    SearchRepo,
)

FOLDER = True
FILE = False


@pytest.fixture
async def repo(tmp_path: Path) -> AsyncIterator[SearchRepo]:
    engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'index.db'}")
    await migrate(engine)
    yield SearchRepo(engine)
    await engine.dispose()


@pytest.fixture(params=[True, False], ids=["fts", "like"])
def full_text(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def file(parent: str, name: str, size: int = 1) -> Node:
    return Node(parent, name, FILE, size)


def folder(parent: str, name: str) -> Node:
    return Node(parent, name, FOLDER, 0)


async def paths(
    repo: SearchRepo, full_text: bool = True, parent: str = "/", *keywords: str, scope: int = 0
) -> list[str]:
    found, total = await repo.search(NodeQuery(parent, keywords, scope), 1, 0, full_text)
    assert total == len(found)
    return [n.path for n in found]


async def fts_consistent(repo: SearchRepo) -> None:
    """FTS5's own check that the trigram index matches the rows it indexes."""
    async with repo.engine.begin() as conn:
        await conn.execute(text("INSERT INTO search_fts(search_fts) VALUES ('integrity-check')"))


# -- keywords -----------------------------------------------------------------


async def test_the_migration_creates_the_fts_table(repo: SearchRepo) -> None:
    async with repo.engine.connect() as conn:
        found = await conn.execute(text("SELECT name FROM sqlite_master WHERE name='search_fts'"))
        assert found.scalar() == "search_fts"


async def test_every_keyword_must_appear(repo: SearchRepo, full_text: bool) -> None:
    await repo.insert(
        [file("/", "holiday report 2021.pdf"), file("/", "holiday.jpg"), file("/", "report.txt")]
    )
    assert await paths(repo, full_text, "/", "holiday", "report") == ["/holiday report 2021.pdf"]
    assert await paths(repo, full_text, "/", "rep") == ["/holiday report 2021.pdf", "/report.txt"]
    assert await paths(repo, full_text, "/", "po", "day") == ["/holiday report 2021.pdf"]
    assert await paths(repo, full_text, "/", "missing") == []


async def test_no_keyword_finds_everything_below_the_folder(
    repo: SearchRepo, full_text: bool
) -> None:
    await repo.insert([file("/", "b"), file("/", "a"), folder("/", "c"), file("/c", "d")])
    assert await paths(repo, full_text) == ["/a", "/b", "/c", "/c/d"]


@pytest.mark.parametrize(
    ("name", "keyword"),
    [
        ("ÉCOLE.txt", "école"),
        ("école.txt", "ÉCOLE"),
        ("Straße.md", "STRASSE"),
        ("ПРИВЕТ мир.doc", "привет"),
        ("Ωmega.bin", "ω"),
        ("年度报告.xlsx", "报告"),
        ("年度报告.xlsx", "年度报告"),
        ("MiXeD.CaSe", "mixed.case"),
    ],
)
async def test_keywords_ignore_case_in_every_script(
    repo: SearchRepo, full_text: bool, name: str, keyword: str
) -> None:
    await repo.insert([file("/", name), file("/", "other")])
    assert await paths(repo, full_text, "/", keyword) == [f"/{name}"]


@pytest.mark.parametrize(
    ("keyword", "expected"),
    [
        ("%", ["/100%.txt"]),
        ("_", ["/a_b"]),
        ("a_b", ["/a_b"]),
        ("0%.", ["/100%.txt"]),
        ("'", ["/it's"]),
        ('"', ['/say "hi"']),
        ('"hi"', ['/say "hi"']),
        ("/", []),
        ("\\", ["/back\\slash"]),
        ("*", ["/st*r"]),
        ("[x]", ["/[x]"]),
    ],
)
async def test_wildcards_and_quotes_in_keywords_match_themselves(
    repo: SearchRepo, full_text: bool, keyword: str, expected: list[str]
) -> None:
    names = ["100%.txt", "1000.txt", "a_b", "axb", "it's", 'say "hi"', "say hi", "back\\slash"]
    names += ["st*r", "star", "[x]", "x"]
    await repo.insert([file("/", n) for n in names])
    assert await paths(repo, full_text, "/", keyword) == expected


async def test_scope_picks_folders_or_files(repo: SearchRepo, full_text: bool) -> None:
    await repo.insert([folder("/", "music"), file("/music", "music.mp3")])
    assert await paths(repo, full_text, "/", "music", scope=SCOPE_FOLDERS) == ["/music"]
    assert await paths(repo, full_text, "/", "music", scope=SCOPE_FILES) == ["/music/music.mp3"]
    assert len(await paths(repo, full_text, "/", "music", scope=7)) == 2


async def test_pages_are_ordered_by_name_and_total_counts_all(
    repo: SearchRepo, full_text: bool
) -> None:
    await repo.insert([file(f"/d{i % 3}", f"item-{i:02d}") for i in range(25)])
    query = NodeQuery("/", ("item",))
    first, total = await repo.search(query, 1, 10, full_text)
    third, _ = await repo.search(query, 3, 10, full_text)
    beyond, again = await repo.search(query, 4, 10, full_text)
    assert total == again == 25
    assert [n.name for n in first] == [f"item-{i:02d}" for i in range(10)]
    assert [n.name for n in third] == [f"item-{i:02d}" for i in range(20, 25)]
    assert beyond == []


# -- folders -----------------------------------------------------------------


async def test_parent_matches_whole_segments_and_exact_case(
    repo: SearchRepo, full_text: bool
) -> None:
    await repo.insert(
        [file("/a", "x"), file("/a/b", "x"), file("/ab", "x"), file("/A", "x"), file("/A/b", "x")]
    )
    assert await paths(repo, full_text, "/a", "x") == ["/a/x", "/a/b/x"]
    assert await paths(repo, full_text, "/A", "x") == ["/A/x", "/A/b/x"]
    assert await paths(repo, full_text, "/a/b", "x") == ["/a/b/x"]


@pytest.mark.parametrize("special", ["100%", "x_y", "st*r", "q?", "[br]", "it's", "é ü"])
async def test_wildcards_in_folder_names_match_themselves(
    repo: SearchRepo, full_text: bool, special: str
) -> None:
    lookalikes = {"100%": "1000", "x_y": "xzy", "st*r": "star", "q?": "qq", "[br]": "b"}
    other = lookalikes.get(special, "plain")
    await repo.insert([file(f"/{special}/in", "f"), file(f"/{other}/in", "f")])
    assert await paths(repo, full_text, f"/{special}", "f") == [f"/{special}/in/f"]
    await repo.delete_tree(f"/{special}")
    assert await paths(repo, full_text, "/", "f") == [f"/{other}/in/f"]


async def test_excluded_folders_keep_their_own_node(repo: SearchRepo, full_text: bool) -> None:
    await repo.insert([folder("/", "locked"), file("/locked", "in"), file("/locked/deep", "in")])
    await repo.insert([folder("/", "locked2"), file("/locked2", "in")])
    query = NodeQuery("/", (), excluded=("/locked",))
    found, total = await repo.search(query, 1, 10, full_text)
    assert [n.path for n in found] == ["/locked2/in", "/locked", "/locked2"]
    assert total == 3


# -- writes --------------------------------------------------------------------


async def test_delete_tree_takes_the_node_and_everything_below(repo: SearchRepo) -> None:
    await repo.insert([folder("/", "a"), file("/a", "f"), file("/a/b/c", "g"), file("/", "ab")])
    await repo.insert([file("/ab", "h"), file("/", "a.txt")])
    await repo.delete_tree("/a")
    assert await paths(repo) == ["/a.txt", "/ab", "/ab/h"]
    await fts_consistent(repo)
    await repo.delete_tree("/")
    assert await repo.count() == 0


async def test_a_replaced_node_drops_what_was_below(repo: SearchRepo) -> None:
    await repo.insert([folder("/", "x"), file("/x", "inside"), file("/", "x")])
    await repo.replace([file("/", "x", size=9)])
    found, _ = await repo.search(NodeQuery("/"), 1, 0)
    assert found == [file("/", "x", size=9)]
    await repo.replace([folder("/", "x")])
    assert await repo.children("/") == [folder("/", "x")]


async def test_a_batch_replaces_every_node_in_one_call(repo: SearchRepo) -> None:
    await repo.insert([folder("/", "a"), file("/a", "inside"), file("/", "b", size=1)])
    await repo.replace([file("/", "a", size=2), file("/", "b", size=3), file("/", "c")])
    assert await repo.children("/") == [file("/", "a", size=2), file("/", "b", size=3),
                                        file("/", "c")]  # fmt: skip
    assert await repo.count() == 3


async def test_a_page_carries_the_count_of_every_match(repo: SearchRepo) -> None:
    await repo.insert([file("/", f"match-{i:02d}") for i in range(25)])
    first, total = await repo.search(NodeQuery("/", ("match",)), 1, 10)
    assert (len(first), total) == (10, 25)
    last, total = await repo.search(NodeQuery("/", ("match",)), 3, 10)
    assert ([n.name for n in last], total) == ([f"match-{i}" for i in range(20, 25)], 25)
    past, total = await repo.search(NodeQuery("/", ("match",)), 9, 10)
    assert (past, total) == ([], 25)
    none, total = await repo.search(NodeQuery("/", ("nothing",)), 1, 10)
    assert (none, total) == ([], 0)


async def test_move_tree_reparents_the_subtree(repo: SearchRepo, full_text: bool) -> None:
    await repo.insert([folder("/", "old"), file("/old", "one.txt"), file("/old/sub", "two.txt")])
    await repo.insert([folder("/old", "sub"), file("/", "old.txt"), file("/oldies", "three")])
    await repo.insert([folder("/new", "moved"), file("/new/moved", "stale")])
    assert await repo.move_tree("/old", "/new/moved") is True
    everything = await paths(repo, full_text)
    assert everything == [
        "/new/moved",
        "/old.txt",
        "/new/moved/one.txt",
        "/new/moved/sub",
        "/oldies/three",
        "/new/moved/sub/two.txt",
    ]
    assert await paths(repo, full_text, "/", "moved") == ["/new/moved"]
    assert await paths(repo, full_text, "/", "old") == ["/old.txt"]
    await fts_consistent(repo)


async def test_move_tree_of_an_unknown_path_changes_nothing(repo: SearchRepo) -> None:
    await repo.insert([file("/dst", "kept")])
    assert await repo.move_tree("/nowhere", "/dst") is False
    assert await repo.move_tree("/dst", "/dst/inside") is False
    assert await repo.move_tree("/", "/x") is False
    assert await paths(repo) == ["/dst/kept"]


async def test_a_rename_is_found_by_its_new_name_only(repo: SearchRepo, full_text: bool) -> None:
    await repo.insert([file("/", "draft-notes.txt")])
    await repo.move_tree("/draft-notes.txt", "/final-Résumé.txt")
    assert await paths(repo, full_text, "/", "draft") == []
    assert await paths(repo, full_text, "/", "résumé") == ["/final-Résumé.txt"]
    await fts_consistent(repo)


async def test_nodes_too_long_for_the_columns_are_left_out(repo: SearchRepo) -> None:
    deep = "/" + "d" * 800
    stored = await repo.insert([file(deep, "f"), file("/", "n" * 600), file("/", "ok")])
    assert stored == 1
    assert await paths(repo) == ["/ok"]


async def test_clear_empties_the_index(repo: SearchRepo) -> None:
    await repo.insert([file("/", f"f{i}") for i in range(1500)])
    assert await repo.count() == 1500
    await repo.clear()
    assert await repo.count() == 0
    assert await paths(repo, True, "/", "f1") == []
    await fts_consistent(repo)


async def test_full_text_answers_long_keywords_from_the_fts_table(repo: SearchRepo) -> None:
    await repo.insert([file("/", "needle.txt")])
    async with repo.engine.begin() as conn:
        await conn.execute(text("INSERT INTO search_fts(search_fts) VALUES ('delete-all')"))
    assert await paths(repo, True, "/", "needle") == []
    assert await paths(repo, True, "/", "ne") == ["/needle.txt"]
    assert await paths(repo, False, "/", "needle") == ["/needle.txt"]


async def test_a_statement_is_built_once_per_shape_of_query(
    repo: SearchRepo, full_text: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values are parameters: searches differing only in folder, keywords or page run
    the statement built for the first, and still find their own matches."""
    await repo.insert([folder("/", "a"), file("/a", "report.txt"), file("/b", "photo.jpg")])
    assert await paths(repo, full_text, "/a", "report") == ["/a/report.txt"]
    built = repo.statements_built
    assert built >= 1
    assert await paths(repo, full_text, "/b", "photo") == ["/b/photo.jpg"]
    assert await paths(repo, full_text, "/b", "report") == []
    assert repo.statements_built == built
    for page in (1, 2):
        await repo.search(NodeQuery("/", ("o",)), page, 1, full_text)
    assert repo.statements_built == built + 1
    monkeypatch.setattr(search_repo, "STATEMENTS_KEPT", 8)
    for count in range(1, 20):  # a shape of its own each time
        excluded = tuple(f"/x{n}" for n in range(count))
        await repo.search(NodeQuery("/", ("o",), excluded=excluded), 1, 10, full_text)
        assert repo.statements_kept <= 8
    assert repo.statements_built == built + 1 + 19


async def test_a_database_file_is_read_in_one_trip_with_the_same_answers(
    repo: SearchRepo, full_text: bool, tmp_path: Path
) -> None:
    """On an SQLite file searches go through the one-trip reader; what they find,
    their order, totals, pages and types are what the engine's own path answers."""
    assert repo.reads_in_one_trip
    await repo.insert(
        [folder("/", "docs"), file("/docs", "b_report.txt", 7), file("/docs", "a_report.md", 3)]
        + [file("/other", f"report{n}.log") for n in range(5)]
    )
    queries = [
        (NodeQuery("/", ("report",)), 1, 3),
        (NodeQuery("/", ("report",)), 3, 3),  # the last, partial page
        (NodeQuery("/", ("report",)), 9, 3),  # past the end: no rows, still the total
        (NodeQuery("/docs", ("rep", "md")), 1, 0),
        (NodeQuery("/", ("o",), SCOPE_FOLDERS), 1, 10),
        (NodeQuery("/", ("report",), excluded=("/other",)), 1, 10),
    ]
    one_trip = [await repo.search(q, page, size, full_text) for q, page, size in queries]
    # The same file named as a URI: the one-trip reader does not take those, so this
    # repository answers through the engine.
    engine = open_engine(f"sqlite+aiosqlite:///file:{tmp_path / 'index.db'}?uri=true")
    try:
        plain = SearchRepo(engine)
        assert not plain.reads_in_one_trip
        through_engine = [await plain.search(q, page, size, full_text) for q, page, size in queries]
    finally:
        await engine.dispose()
    assert one_trip == through_engine
    assert one_trip[2] == ([], 7)
    assert [type(n.is_dir) for n in one_trip[0][0]] == [bool] * 3
    assert one_trip[4] == ([folder("/", "docs")], 1)


async def test_the_one_trip_reader_sees_every_committed_write(repo: SearchRepo) -> None:
    for n in range(20):
        await repo.insert([file("/", f"new{n}.txt")])
        found, total = await repo.search(NodeQuery("/", ("new",)), 1, 100)
        assert total == n + 1 and f"new{n}.txt" in [node.name for node in found]
    await repo.delete_tree("/new0.txt")
    assert (await repo.search(NodeQuery("/", ("new0",)), 1, 100)) == ([], 0)


def open_handles(database: Path) -> int:
    """How many of this process's file descriptors are open on ``database`` or its
    companions (SQLite may keep the main file's open until the last connection to it
    closes, so a closed connection shows in its WAL handle)."""
    name = str(database.resolve())
    return sum(1 for fd in Path("/proc/self/fd").iterdir() if os.path.realpath(fd).startswith(name))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts handles through /proc")
async def test_closing_the_reader_closes_its_connections_and_reads_go_on(
    repo: SearchRepo, tmp_path: Path
) -> None:
    database = tmp_path / "index.db"
    await repo.insert([file("/", "kept.txt")])
    assert (await repo.search(NodeQuery("/", ("kept",)), 1, 10))[1] == 1
    assert repo.reads_in_one_trip
    reading = open_handles(database)
    repo.close()
    closed = open_handles(database)
    assert closed < reading
    assert (await repo.search(NodeQuery("/", ("kept",)), 1, 10))[1] == 1
    assert open_handles(database) > closed  # a later read opens its own again
