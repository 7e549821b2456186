"""Search: /api/fs/search and /api/admin/index/* over Local storages, and index updates."""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.db.repos import SettingRepo
from manifold.drivers.base import DriverConfig
from manifold.drivers.local.driver import LocalDriver
from manifold.drivers.local.meta import Addition as LocalOptions
from manifold.models import Obj
from tests.api.fs_helpers import RELATIVE, add_meta, make_tree, mount_local, save_settings
from tests.conftest import Api

USER_PW = "user-password-1"
UNAVAILABLE = (500, "search not available")
RUNNING = (400, "index is running")

TREE: dict[str, bytes | str] = {
    "docs/report-2021.pdf": "a",
    "docs/report-2022.pdf": "bb",
    "docs/notes.txt": "ccc",
    "music/report.mp3": "dddd",
    "music/song.mp3": "e",
    "secret/report-secret.txt": "f",
    "hidden-stuff/report-hidden.txt": "g",
    "hidden-file.txt": "h",
    "deep/l1/l2/l3/report-deep.txt": "i",
    "empty/": "",
}


@pytest.fixture
async def admin(admin: Api) -> Api:
    """The shared admin (``TREE`` at /local) with the database index chosen."""
    await save_settings(admin, search_index="database")
    return admin


async def build(api: Api) -> dict[str, Any]:
    body = await api.post("/api/admin/index/build", token=await api.login())
    assert body == {"code": 200, "message": "success", "data": None}
    await api.services.search.indexer.settled()
    return await progress(api)


async def progress(api: Api) -> dict[str, Any]:
    body = await api.get("/api/admin/index/progress", token=await api.login())
    assert body["code"] == 200, body
    data: dict[str, Any] = body["data"]
    return data


async def search(api: Api, token: str | None = None, **fields: Any) -> dict[str, Any]:
    # The index is written in the background: what was changed before is written first.
    await api.services.search.indexer.settled()
    request = {"parent": "/", "keywords": "", "scope": 0, "page": 1, "per_page": 100}
    request["password"] = ""
    return await api.post("/api/fs/search", {**request, **fields}, token=token)


def found(body: dict[str, Any]) -> list[str]:
    assert body["code"] == 200, body
    return [f"{h['parent'].rstrip('/')}/{h['name']}" for h in body["data"]["content"]]


async def user_token(api: Api, name: str = "reader", **fields: Any) -> str:
    fields.setdefault("permission", 0)
    await api.make_user(name, USER_PW, **fields)
    return await api.login(name, USER_PW)


def error(body: dict[str, Any]) -> tuple[int, str]:
    return body["code"], body["message"]


REPORTS = [
    "/local/docs/report-2021.pdf",
    "/local/docs/report-2022.pdf",
    "/local/deep/l1/l2/l3/report-deep.txt",
    "/local/hidden-stuff/report-hidden.txt",
    "/local/secret/report-secret.txt",
    "/local/music/report.mp3",
]


# -- availability and validation ---------------------------------------------------


INDEX_CALLS: list[tuple[str, str, Any]] = [
    ("POST", "/api/admin/index/build", None),
    ("POST", "/api/admin/index/update", {"paths": ["/"], "max_depth": 1}),
    ("POST", "/api/admin/index/stop", None),
    ("POST", "/api/admin/index/clear", None),
]


async def test_search_and_index_are_unavailable_without_an_index(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    assert error(await search(api, keywords="report")) == UNAVAILABLE
    for method, path, body in INDEX_CALLS:
        assert error(await api.call(method, path, json=body)) == UNAVAILABLE, path


async def test_an_index_kind_manifold_lacks_is_refused_on_save(api: Api) -> None:
    await api.as_admin()
    for kind in ("bleve", "meilisearch"):
        body = await api.post("/api/admin/setting/save", [{"key": "search_index", "value": kind}])
        assert body["code"] == 400
        assert body["message"].startswith(f"search index {kind} is not available")
    assert api.services.settings.get("search_index") == "none"


async def test_an_unavailable_kind_from_an_alist_database_counts_as_none(
    admin: Api, services: Services
) -> None:
    stored = services.settings.items_for(["search_index"])[0]
    stored.value = "bleve"
    await SettingRepo(services.engine).upsert([stored])  # as an AList database holds it
    await services.settings.start()
    assert services.settings.get("search_index") == "bleve"
    assert error(await search(admin, keywords="report")) == UNAVAILABLE


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"page": 0}, (400, "page can't < 1")),
        ({"page": -3}, (400, "page can't < 1")),
        ({"per_page": 0}, (400, "per_page can't < 1")),
        ({"parent": "/local/../.."}, (400, RELATIVE)),
        ({"page": "1"}, (400, "page: Input should be a valid integer")),
    ],
)
async def test_invalid_requests_answer_400(
    admin: Api, fields: dict[str, Any], expected: tuple[int, str]
) -> None:
    body = await search(admin, **fields)
    assert error(body) == expected
    assert body["data"] is None


async def test_a_missing_page_is_refused_as_alist_does(admin: Api) -> None:
    body = await admin.post("/api/fs/search", {"keywords": "x"})
    assert error(body) == (400, "page can't < 1")


async def test_index_administration_needs_an_admin(admin: Api) -> None:
    token = await user_token(admin)
    for method, path, body in INDEX_CALLS:
        refused = await admin.call(method, path, json=body, token=token)
        assert refused["code"] == 403, path


# -- building and searching ------------------------------------------------------------


async def test_build_then_search_by_keyword(admin: Api) -> None:
    done = await build(admin)
    assert done["is_done"] is True
    assert done["error"] == ""
    assert done["obj_count"] == 19  # /local, its 7 entries and the 11 below them
    assert datetime.fromisoformat(done["last_done_time"]) <= datetime.now(UTC)
    body = await search(admin, keywords="report")
    assert found(body) == REPORTS
    assert body["data"]["total"] == len(REPORTS)
    mp3 = body["data"]["content"][-1]
    assert mp3 == {
        "parent": "/local/music",
        "name": "report.mp3",
        "is_dir": False,
        "size": 4,
        "type": 3,
    }
    types = {h["name"]: h["type"] for h in body["data"]["content"]}
    assert types == {
        "report-2021.pdf": 0,
        "report-2022.pdf": 0,
        "report-deep.txt": 4,
        "report-hidden.txt": 4,
        "report-secret.txt": 4,
        "report.mp3": 3,
    }


async def test_keywords_all_must_appear_ignoring_case(admin: Api) -> None:
    await build(admin)
    assert found(await search(admin, keywords="REPORT 2022")) == ["/local/docs/report-2022.pdf"]
    assert found(await search(admin, keywords="  song   MP3 ")) == ["/local/music/song.mp3"]
    assert found(await search(admin, keywords="report nothing")) == []


async def test_scope_and_parent_narrow_the_search(admin: Api) -> None:
    await build(admin)
    folders = found(await search(admin, keywords="e", scope=1))
    assert folders == ["/local/deep", "/local/empty", "/local/hidden-stuff", "/local/secret"]
    files = found(await search(admin, parent="/local/docs", scope=2))
    assert files == [
        "/local/docs/notes.txt",
        "/local/docs/report-2021.pdf",
        "/local/docs/report-2022.pdf",
    ]
    assert found(await search(admin, parent="/local/doc")) == []


async def test_pages_are_full_and_total_is_constant(admin: Api) -> None:
    await build(admin)
    pages = [await search(admin, keywords="report", page=p, per_page=4) for p in (1, 2, 3)]
    assert [p["data"]["total"] for p in pages] == [6, 6, 6]
    assert found(pages[0]) + found(pages[1]) == REPORTS
    assert pages[2]["data"]["content"] == []


async def test_fields_may_come_from_the_query_string(admin: Api) -> None:
    await build(admin)
    query = {"parent": "/local/music", "keywords": "report", "page": "1", "per_page": "5"}
    body = await admin.get("/api/fs/search", params=query)
    assert found(body) == ["/local/music/report.mp3"]


async def test_both_database_kinds_answer_alike(admin: Api) -> None:
    await build(admin)
    for keywords in ("report", "re", "2021 pdf", "Ü", "mp3 song"):
        full_text = await search(admin, keywords=keywords)
        await save_settings(admin, search_index="database_non_full_text")
        like = await search(admin, keywords=keywords)
        await save_settings(admin, search_index="database")
        assert found(like) == found(full_text), keywords


# -- who sees what ------------------------------------------------------------------------


async def test_a_user_searches_below_their_base_path_only(admin: Api) -> None:
    await build(admin)
    token = await user_token(admin, base_path="/local/docs")
    body = await search(admin, token, keywords="report")
    assert found(body) == ["/local/docs/report-2021.pdf", "/local/docs/report-2022.pdf"]
    assert body["data"]["total"] == 2
    assert body["data"]["content"][0]["parent"] == "/local/docs"
    escaped = await search(admin, token, parent="/../music", keywords="report")
    assert error(escaped) == (400, RELATIVE)


@pytest.mark.parametrize("p_sub", [True, False])
async def test_hits_in_a_password_folder_need_the_password(admin: Api, p_sub: bool) -> None:
    await add_meta(admin, "/local/secret", password="letmein", p_sub=p_sub)
    await build(admin)
    token = await user_token(admin)
    without = await search(admin, token, keywords="report")
    assert "/local/secret/report-secret.txt" not in found(without)
    assert without["data"]["total"] == len(REPORTS) - 1
    wrong = await search(admin, token, keywords="secret", password="nope")
    assert found(wrong) == ["/local/secret"]
    right = await search(admin, token, keywords="secret", password="letmein")
    assert found(right) == ["/local/secret/report-secret.txt", "/local/secret"]
    trusted = await user_token(admin, "trusted", permission=2)
    assert found(await search(admin, trusted, keywords="report")) == REPORTS


async def test_hidden_entries_and_what_is_below_them_stay_hidden(admin: Api) -> None:
    await add_meta(admin, "/local", hide="^hidden")
    await build(admin)
    token = await user_token(admin)
    body = await search(admin, token, keywords="hidden")
    assert body["data"] == {"content": [], "total": 0}
    reports = await search(admin, token, keywords="report", per_page=2)
    assert found(reports) == REPORTS[:2]
    assert reports["data"]["total"] == len(REPORTS) - 1
    last = await search(admin, token, keywords="report", page=3, per_page=2)
    assert found(last) == ["/local/music/report.mp3"]
    seer = await user_token(admin, "seer", permission=1)
    assert len(found(await search(admin, seer, keywords="hidden"))) == 3
    assert len(found(await search(admin, keywords="hidden"))) == 3


async def test_a_search_inside_a_hidden_folder_finds_nothing(admin: Api) -> None:
    await add_meta(admin, "/local", hide="^hidden")
    await build(admin)
    token = await user_token(admin)
    assert found(await search(admin, token, parent="/local/hidden-stuff")) == []


# -- index administration ------------------------------------------------------------------


async def test_clear_empties_the_index_and_resets_progress(admin: Api) -> None:
    await build(admin)
    body = await admin.post("/api/admin/index/clear")
    assert body == {"code": 200, "message": "success", "data": None}
    assert await progress(admin) == {
        "obj_count": 0,
        "is_done": True,
        "last_done_time": None,
        "error": "",
    }
    assert found(await search(admin, keywords="report")) == []


async def test_progress_before_any_build(admin: Api) -> None:
    assert await progress(admin) == {
        "obj_count": 0,
        "is_done": False,
        "last_done_time": None,
        "error": "",
    }


async def test_ignored_paths_disabled_storages_and_depth(admin: Api, tmp_path: Path) -> None:
    other = make_tree(tmp_path / "other", {"report-elsewhere.txt": "x"})
    await mount_local(admin, "/noindex", other, disable_index=True)
    await save_settings(admin, ignore_paths="/local/music\n/local/sec", max_index_depth="3")
    await build(admin)
    everything = found(await search(admin))
    assert "/noindex" not in everything
    assert not [p for p in everything if p.startswith(("/local/music", "/local/sec"))]
    assert "/local/deep/l1" in everything
    assert "/local/deep/l1/l2" not in everything
    reports = found(await search(admin, keywords="report"))
    assert reports == [*REPORTS[:2], "/local/hidden-stuff/report-hidden.txt"]


async def test_a_folder_that_fails_to_list_is_reported(admin: Api, tmp_path: Path) -> None:
    gone = make_tree(tmp_path / "gone", {"a.txt": "a"})
    await mount_local(admin, "/gone", gone)
    shutil.rmtree(gone)
    done = await build(admin)
    assert done["is_done"] is True
    assert done["error"].startswith("failed to list /gone")
    assert found(await search(admin, keywords="report")) == REPORTS


async def test_update_walks_the_given_paths_again(admin: Api, root: Path) -> None:
    await build(admin)
    (root / "docs" / "notes.txt").unlink()
    make_tree(root, {"docs/report-2023.pdf": "new", "music/report-live.mp3": "new"})
    body = await admin.post("/api/admin/index/update", {"paths": ["/local/docs"], "max_depth": -1})
    assert body["code"] == 200, body
    await admin.services.search.indexer.settled()
    assert found(await search(admin, parent="/local/docs")) == [
        "/local/docs/report-2021.pdf",
        "/local/docs/report-2022.pdf",
        "/local/docs/report-2023.pdf",
    ]
    assert found(await search(admin, keywords="docs")) == ["/local/docs"]
    assert "/local/music/report-live.mp3" not in found(await search(admin, keywords="live"))


class Gate:
    """Holds every listing the index makes until opened."""

    def __init__(self, services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
        self.open = asyncio.Event()
        self.entered = asyncio.Event()
        listing = services.reader.list_path

        async def gated(path: str, refresh: bool = False) -> tuple[list[Obj], str]:
            self.entered.set()
            await self.open.wait()
            return await listing(path, refresh)

        monkeypatch.setattr(services.reader, "list_path", gated)


async def test_a_running_build_refuses_other_index_work(
    admin: Api, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(services, monkeypatch)
    await admin.post("/api/admin/index/build")
    await gate.entered.wait()
    assert error(await admin.post("/api/admin/index/build")) == RUNNING
    assert error(await admin.post("/api/admin/index/clear")) == RUNNING
    update = {"paths": ["/local"], "max_depth": 1}
    assert error(await admin.post("/api/admin/index/update", update)) == RUNNING
    switch = [{"key": "search_index", "value": "database_non_full_text"}]
    assert error(await admin.post("/api/admin/setting/save", switch)) == RUNNING
    running = await progress(admin)
    assert (running["is_done"], running["last_done_time"]) == (False, None)
    gate.open.set()
    await services.search.indexer.settled()
    assert (await progress(admin))["is_done"] is True
    assert (await admin.post("/api/admin/setting/save", switch))["code"] == 200


async def test_stop_ends_a_build(
    admin: Api, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert error(await admin.post("/api/admin/index/stop")) == (400, "index is not running")
    gate = Gate(services, monkeypatch)
    await admin.post("/api/admin/index/build")
    await gate.entered.wait()
    assert (await admin.post("/api/admin/index/stop"))["code"] == 200
    gate.open.set()
    await services.search.indexer.settled()
    stopped = await progress(admin)
    assert stopped["is_done"] is True
    assert stopped["obj_count"] == 1  # the first listing, of /, finished
    assert found(await search(admin)) == ["/local"]
    assert error(await admin.post("/api/admin/index/stop")) == (400, "index is not running")


async def test_an_interrupted_build_is_marked_done_at_start(admin: Api, services: Services) -> None:
    await services.settings.save([("index_progress", '{"obj_count": 5, "is_done": false}')])
    await services.search.start()
    assert await progress(admin) == {
        "obj_count": 5,
        "is_done": True,
        "last_done_time": None,
        "error": "the index build was interrupted",
    }


# -- incremental updates through the tree events ---------------------------------------------


def obj(name: str, is_dir: bool = False, size: int = 1) -> Obj:
    return Obj(name=name, size=size, is_dir=is_dir, modified=datetime.now(UTC))


async def test_created_files_and_copied_folders_are_indexed(
    admin: Api, services: Services, root: Path
) -> None:
    await build(admin)
    make_tree(root, {"docs/report-new.txt": "n"})
    await services.events.created("/local/docs/report-new.txt", obj("report-new.txt", size=1))
    assert "/local/docs/report-new.txt" in found(await search(admin, keywords="report-new"))
    make_tree(root, {"copy/a/report-copied.txt": "c", "copy/b/": ""})
    await services.events.created("/local/copy", obj("copy", is_dir=True, size=0))
    await services.search.indexer.settled()
    assert found(await search(admin, parent="/local/copy")) == [
        "/local/copy/a",
        "/local/copy/b",
        "/local/copy/a/report-copied.txt",
    ]
    await services.events.created("/local/copy", obj("copy", is_dir=True, size=0))
    await services.search.indexer.settled()
    assert len(found(await search(admin, keywords="copied"))) == 1


async def test_removed_paths_leave_with_everything_below(admin: Api, services: Services) -> None:
    await build(admin)
    await services.events.removed("/local/deep/l1")
    everything = found(await search(admin, parent="/local/deep"))
    assert everything == []
    assert "/local/deep" in found(await search(admin, keywords="deep"))
    await services.events.removed("/local/docs/notes.txt")
    assert found(await search(admin, keywords="notes")) == []


async def test_moved_folders_take_their_subtree(admin: Api, services: Services, root: Path) -> None:
    await build(admin)
    (root / "docs").rename(root / "archive")
    await services.events.moved("/local/docs", "/local/archive")
    assert found(await search(admin, keywords="2021")) == ["/local/archive/report-2021.pdf"]
    assert found(await search(admin, keywords="docs")) == []
    await save_settings(admin, ignore_paths="/local/ignored")
    (root / "archive").rename(root / "ignored")
    await services.events.moved("/local/archive", "/local/ignored")
    assert found(await search(admin, keywords="2021")) == []


async def test_a_move_into_the_index_walks_the_destination(
    admin: Api, services: Services, root: Path
) -> None:
    await save_settings(admin, ignore_paths="/local/music")
    await build(admin)
    (root / "music").rename(root / "tunes")
    await services.events.moved("/local/music", "/local/tunes")
    await services.search.indexer.settled()
    assert found(await search(admin, keywords="mp3")) == [
        "/local/tunes/report.mp3",
        "/local/tunes/song.mp3",
    ]


async def test_events_change_nothing_without_an_index(admin: Api, services: Services) -> None:
    await build(admin)
    await save_settings(admin, search_index="none")
    await services.events.removed("/local/docs")
    await save_settings(admin, search_index="database")
    assert len(found(await search(admin, keywords="2021"))) == 1


async def test_changes_during_a_build_apply_once_it_ends(
    admin: Api, services: Services, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    gate = Gate(services, monkeypatch)
    await admin.post("/api/admin/index/build")
    await gate.entered.wait()
    make_tree(root, {"docs/during.txt": "d"})
    await services.events.created("/local/docs/during.txt", obj("during.txt"))
    await services.events.removed("/local/music/song.mp3")
    gate.open.set()
    await services.search.indexer.settled()
    assert found(await search(admin, keywords="during")) == ["/local/docs/during.txt"]
    assert found(await search(admin, keywords="song")) == []


async def _refresh(api: Api, path: str) -> None:
    body = await api.post("/api/fs/list", {"path": path, "refresh": True})
    assert body["code"] == 200, body
    await api.services.storages.settled()
    await api.services.search.indexer.settled()


@pytest.mark.parametrize("auto", [True, False])
async def test_auto_update_follows_fresh_listings(admin: Api, root: Path, auto: bool) -> None:
    await save_settings(admin, auto_update_index="true" if auto else "false")
    await build(admin)
    (root / "outside-new.txt").write_text("made without Manifold")
    make_tree(root, {"newdir/inner-new.txt": "x"})
    (root / "hidden-file.txt").unlink()
    await _refresh(admin, "/local")
    hits = found(await search(admin, keywords="new"))
    gone = found(await search(admin, keywords="hidden-file"))
    if auto:
        assert {"/local/outside-new.txt", "/local/newdir", "/local/newdir/inner-new.txt"} <= set(
            hits
        )
        assert gone == []
    else:
        assert hits == []
        assert gone == ["/local/hidden-file.txt"]


async def test_auto_update_keeps_mount_points(admin: Api, root: Path, tmp_path: Path) -> None:
    await mount_local(admin, "/local/mounted", make_tree(tmp_path / "other", {"inner.txt": "i"}))
    await save_settings(admin, auto_update_index="true")
    await build(admin)
    assert "/local/mounted/inner.txt" in found(await search(admin, keywords="inner"))
    await _refresh(admin, "/local")
    assert "/local/mounted/inner.txt" in found(await search(admin, keywords="inner"))


async def test_a_driver_that_fronts_another_index_is_never_walked(
    admin: Api, services: Services, tmp_path: Path
) -> None:
    remote = make_tree(tmp_path / "remote", {"report-remote.txt": "r"})
    walled = DriverConfig(name="Fronting", no_cache=True, never_indexed=True)
    services.registry.register("Fronting", LocalDriver, LocalOptions, walled)
    addition = json.dumps({"root_folder_path": str(remote)})
    body = {"mount_path": "/fronting", "driver": "Fronting", "addition": addition}
    assert (await admin.post("/api/admin/storage/create", body))["code"] == 200
    await build(admin)
    hits = found(await search(admin, keywords="report"))
    assert "/local/music/report.mp3" in hits
    assert not [hit for hit in hits if hit.startswith("/fronting")]
