"""Search for a user below a base path, where links can lead out of it: every page
right, the total right by the last page, and a page reads about a page of the index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.api.test_search import build, found, search, user_token
from tests.conftest import Api

TEAM = [f"item-{n:03d}.txt" for n in range(300)]
# Names sorting after every name of the team: what links take out comes last.
CAROL = [f"item-carol-{n:02d}.txt" for n in range(20)]


@pytest.fixture(params=["/local/team", "/mirror"])
async def reader(api: Api, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Api, str]:
    """A user whose base path is a folder with a folder link and a file link out of it,
    reached directly or through an Alias of it."""
    files = {f"team/{name}": "x" for name in TEAM} | {f"carol/{name}": "c" for name in CAROL}
    root = make_tree(tmp_path / "root", files)
    (root / "team/lc").symlink_to("../carol")
    (root / "team/item-link.txt").symlink_to("../carol/item-carol-00.txt")
    await api.as_admin()
    await mount_local(api, "/local", root)
    addition = json.dumps({"paths": "/local/team"})
    body = {"mount_path": "/mirror", "driver": "Alias", "addition": addition}
    assert (await api.post("/api/admin/storage/create", body))["code"] == 200
    await save_settings(api, search_index="database")
    await build(api)
    return api, await user_token(api, base_path=str(request.param))


@pytest.mark.parametrize("per_page", [7, 50, 1000])
async def test_every_page_leaves_out_what_links_take_out(
    reader: tuple[Api, str], per_page: int
) -> None:
    api, token = reader
    pages: list[str] = []
    last_total = None
    for page in range(1, len(TEAM) // per_page + 3):
        body = await search(api, token, keywords="item", page=page, per_page=per_page)
        hits = found(body)
        assert len(hits) == min(per_page, max(0, len(TEAM) - (page - 1) * per_page))
        total = body["data"]["total"]
        # Never fewer than the hits shown, never more than the matches.
        assert len(TEAM) <= total <= len(TEAM) + len(CAROL) + 1, total
        pages += hits
        last_total = total
    assert [p.rsplit("/", 1)[1] for p in pages] == TEAM
    assert {p.rsplit("/", 1)[0] for p in pages} <= {"/local/team", "/mirror"}
    assert last_total == len(TEAM)


async def test_a_page_reads_about_a_page(reader: tuple[Api, str]) -> None:
    api, token = reader
    await api.services.search.indexer.settled()
    before = api.services.search.rows_read
    body = await search(api, token, keywords="item", per_page=10)
    assert [p.rsplit("/", 1)[1] for p in found(body)] == TEAM[:10]
    read = api.services.search.rows_read - before
    assert read < 120, read  # one chunk, not the 300 and more matches


async def test_the_last_match_read_makes_the_total_exact(reader: tuple[Api, str]) -> None:
    api, token = reader
    body = await search(api, token, keywords="carol")
    assert body["data"] == {"content": [], "total": 0}
    body = await search(api, token, keywords="item", per_page=1000)
    assert len(found(body)) == len(TEAM)
    assert body["data"]["total"] == len(TEAM)
