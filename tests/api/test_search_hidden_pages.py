"""Search where hide rules apply: every page and total right, and a page reads about
a page of the index, not every match."""

from __future__ import annotations

from pathlib import Path

import pytest

from manifold.db.search_repo import NameMatch
from manifold.services.search.service import name_matches
from tests.api.fs_helpers import add_meta, make_tree, mount_local, save_settings
from tests.api.test_search import build, found, search, user_token
from tests.conftest import Api

PUBLIC = [f"/local/pub/item-{n:03d}.txt" for n in range(300)]
MIXED_OK = [f"/local/mixed/item-ok-{n:02d}.txt" for n in range(20)]
MIXED_SECRET = [f"/local/mixed/item-secret-{n:02d}.txt" for n in range(20)]
HIDDEN = [f"/local/hidden-dir/item-h-{n:02d}.txt" for n in range(20)]
DEEP = [f"/local/mixed/sub/item-deep-{n}.txt" for n in range(3)]
SHOWN = sorted(PUBLIC + MIXED_OK + DEEP, key=lambda p: (p.rsplit("/", 1)[1], p))


# Hide lines that hide the same names: plain text the database tests, and patterns
# whose matches are read and tested here.
MIXED_HIDES = ["secret", "^item-secret", "\\.pdf\nsecret", "s.cret", "^item-[s]"]


@pytest.fixture(params=MIXED_HIDES)
async def reader(api: Api, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Api, str]:
    everything = PUBLIC + MIXED_OK + MIXED_SECRET + HIDDEN + DEEP
    root = make_tree(tmp_path / "root", {p.removeprefix("/local/"): "x" for p in everything})
    await api.as_admin()
    await mount_local(api, "/local", root)
    await save_settings(api, search_index="database")
    await add_meta(api, "/local", hide="^hidden")
    hide = str(request.param)
    await add_meta(api, "/local/mixed", hide=hide, h_sub=True)
    await build(api)
    return api, await user_token(api)


async def every_page(api: Api, token: str, per_page: int) -> tuple[list[str], set[int]]:
    pages: list[str] = []
    totals = set()
    for page in range(1, len(SHOWN) // per_page + 3):
        body = await search(api, token, keywords="item", page=page, per_page=per_page)
        totals.add(body["data"]["total"])
        hits = found(body)
        assert len(hits) == min(per_page, max(0, len(SHOWN) - (page - 1) * per_page))
        pages += hits
    return pages, totals


@pytest.mark.parametrize("per_page", [7, 50, 1000])
async def test_pages_and_totals_count_only_what_is_shown(
    reader: tuple[Api, str], per_page: int
) -> None:
    api, token = reader
    pages, totals = await every_page(api, token, per_page)
    assert pages == SHOWN
    assert totals == {len(SHOWN)}


async def test_a_page_reads_about_a_page(reader: tuple[Api, str]) -> None:
    api, token = reader
    await api.services.search.indexer.settled()
    before = api.services.search.rows_read
    body = await search(api, token, keywords="item", per_page=10)
    assert found(body) == SHOWN[:10]
    assert body["data"]["total"] == len(SHOWN)
    read = api.services.search.rows_read - before
    # The folder counts, the 43 matches in the folders with hide rules, one chunk.
    assert read < 120, read


async def test_a_caller_who_sees_hidden_entries_gets_every_match(
    reader: tuple[Api, str],
) -> None:
    api, _ = reader
    body = await search(api, keywords="item", per_page=5)
    assert body["data"]["total"] == len(PUBLIC + MIXED_OK + MIXED_SECRET + HIDDEN + DEEP)


async def test_a_plain_hide_rule_over_many_matches_reads_about_a_page(
    reader: tuple[Api, str],
) -> None:
    """Dot files hidden everywhere below /local/pub: its 300 matches are counted, and the
    names the rule hides too, by the database."""
    api, token = reader
    await add_meta(api, "/local/pub", hide="^\\.", h_sub=True)
    before = api.services.search.rows_read
    body = await search(api, token, keywords="item", per_page=10)
    assert found(body) == SHOWN[:10]
    assert body["data"]["total"] == len(SHOWN)
    assert api.services.search.rows_read - before < 120


@pytest.mark.parametrize(
    ("hide", "plain"),
    [
        ("secret", ("secret", False, False)),
        ("^\\.", (".", True, False)),
        ("\\.bak$", (".bak", False, True)),
        ("^a\\$b$", ("a$b", True, True)),
        ("", ("", False, False)),
        ("s.cret", None),
        ("\\d", None),
        ("a\\", None),
        ("(?i)secret", None),
        ("a$b", None),
    ],
)
def test_plain_hide_lines_become_name_matches(
    hide: str, plain: tuple[str, bool, bool] | None
) -> None:
    matches = name_matches(hide)
    assert matches == (None if plain is None else (NameMatch(*plain),))
