"""The manual scan of the Indexes page (/api/admin/scan/*) and the index progress shown
on every visit of that page."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.api.test_search import build, found, search
from tests.conftest import Api

STUCK = 120  # seconds after which a scan that has not finished is taken as stuck

TREE: dict[str, bytes | str] = {
    "a.txt": "a",
    "docs/b.txt": "b",
    "docs/deeper/c.txt": "c",
    "docs/deeper/deepest/": "",
    "music/d.mp3": "d",
}


async def scan_progress(api: Api) -> dict[str, Any]:
    body = await api.get("/api/admin/scan/progress")
    assert body["code"] == 200, body
    data: dict[str, Any] = body["data"]
    return data


async def scanned(api: Api, path: str, limit: float = 0) -> dict[str, Any]:
    """Start a scan of ``path`` and wait until it is done; its last progress."""
    body = await api.post("/api/admin/scan/start", {"path": path, "limit": limit})
    assert body == {"code": 200, "message": "success", "data": None}, body
    async with asyncio.timeout(STUCK):
        while not (progress := await scan_progress(api))["is_done"]:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return progress


async def test_a_scan_lists_every_folder_below_its_path(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", make_tree(tmp_path / "root", TREE))
    assert await scan_progress(api) == {"obj_count": 0, "is_done": True}
    # a.txt docs music | b.txt deeper | c.txt deepest | d.mp3
    assert await scanned(api, "/local") == {"obj_count": 8, "is_done": True}
    assert await scanned(api, "/local/docs") == {"obj_count": 4, "is_done": True}
    # From the root: the virtual folder's one entry, then the storage's.
    assert (await scanned(api, "/"))["obj_count"] == 9


async def test_a_scan_brings_the_index_up_to_date(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    root = make_tree(tmp_path / "root", TREE)
    await mount_local(api, "/local", root)
    await save_settings(api, search_index="database", auto_update_index="true")
    await build(api)
    make_tree(root, {"docs/deeper/deepest/made-behind.txt": "x"})
    (root / "music" / "d.mp3").unlink()
    await scanned(api, "/local")
    await api.services.storages.settled()
    assert found(await search(api, keywords="made-behind")) == [
        "/local/docs/deeper/deepest/made-behind.txt"
    ]
    assert found(await search(api, keywords="d.mp3")) == []


async def test_a_scan_can_be_stopped_and_runs_once_at_a_time(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    many = {f"f{n:03}/x.txt": "x" for n in range(50)}
    await mount_local(api, "/local", make_tree(tmp_path / "root", many))
    # One listing a second: the scan is still running when stopped.
    assert (await api.post("/api/admin/scan/start", {"path": "/local", "limit": 1}))["code"] == 200
    again = await api.post("/api/admin/scan/start", {"path": "/local"})
    assert (again["code"], again["message"]) == (400, "manual scan is running, please try later")
    assert (await scan_progress(api))["is_done"] is False
    assert (await api.post("/api/admin/scan/stop"))["code"] == 200
    progress = await scan_progress(api)
    assert progress["is_done"] is True
    assert progress["obj_count"] < 100
    stopped = await api.post("/api/admin/scan/stop")
    assert (stopped["code"], stopped["message"]) == (400, "manual scan is not running")


async def test_a_folder_that_cannot_be_listed_is_skipped(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", make_tree(tmp_path / "root", TREE))
    assert await scanned(api, "/nowhere") == {"obj_count": 0, "is_done": True}


async def test_the_scan_is_for_the_admin_only(api: Api) -> None:
    await api.make_user("plain", "plain-password-1", permission=0xFFFF)
    token = await api.login("plain", "plain-password-1")
    for method, path in (("POST", "start"), ("POST", "stop"), ("GET", "progress")):
        body = await api.call(method, f"/api/admin/scan/{path}", json={}, token=token)
        assert body["code"] == 403, path


async def test_index_progress_is_shown_while_search_is_off(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", make_tree(tmp_path / "root", TREE))
    before = await api.get("/api/admin/index/progress")
    assert before["code"] == 200, before
    assert before["data"]["obj_count"] == 0
    await save_settings(api, search_index="database")
    built = await build(api)
    assert built["obj_count"] > 0
    await save_settings(api, search_index="none")
    after = await api.get("/api/admin/index/progress")
    assert after == {"code": 200, "message": "success", "data": built}
    # The other index calls still need an index.
    build_body = await api.post("/api/admin/index/build")
    assert (build_body["code"], build_body["message"]) == (500, "search not available")
