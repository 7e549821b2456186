"""What an offline download leaves, and what it may not touch: no file of a download
stays in the data folder after any end (success, failure, the size limit, cancel, a
stop of the server), no task error shows a server path, names from the server are
cleaned and shortened, and an existing name is never replaced."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from manifold.models import TaskState
from tests.api.fs_helpers import make_tree, mount_local
from tests.api.offline_helpers import (
    BIG,
    SMALL,
    Aria2Process,
    add,
    cancel_forgets,
    finished,
    leftovers,
    running,
    set_aria2,
    settle,
    started,
)
from tests.conftest import Api


async def cancel(api: Api, task_id: str) -> None:
    answer = await api.post(f"/api/admin/task/offline_download/cancel?tid={task_id}")
    assert answer["code"] == 200, answer
    assert (await finished(api, task_id)).state == TaskState.CANCELED


# -- nothing left behind ---------------------------------------------------------------


async def test_a_cancelled_simple_http_download_leaves_nothing(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    body = await add(api, [f"{files_url}/slow/big.bin"], "/local", "SimpleHttp")
    task_id = body["data"]["tasks"][0]["id"]
    await started(api, task_id)
    await cancel(api, task_id)
    assert leftovers(api) == []


async def test_a_missing_url_fails_its_task_and_leaves_nothing(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    body = await add(api, [f"{files_url}/nothing-here"], "/local", "SimpleHttp")
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.FAILED
    assert task.error == "http status code 404"
    assert leftovers(api) == []


@pytest.mark.parametrize("path", ["big.bin", "nolength/big.bin"])
async def test_the_size_limit_stops_a_download_and_leaves_nothing(
    api: Api, world: tuple[Path, Path], files_url: str, path: str
) -> None:
    local, _ = world
    await api.post(
        "/api/admin/setting/save", [{"key": "offline_download_max_size", "value": "100000"}]
    )
    body = await add(api, [f"{files_url}/{path}"], "/local", "SimpleHttp")
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.FAILED
    assert "larger than the limit of 100000 bytes" in task.error
    assert not (local / "big.bin").exists()
    assert leftovers(api) == []


async def test_a_download_whose_files_were_moved_leaves_nothing(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    local, _ = world
    urls = [f"{files_url}/big.bin", f"{files_url}/small.txt"]
    body = await add(api, urls, "/local", "SimpleHttp", "delete_on_upload_succeed")
    for info in body["data"]["tasks"]:
        assert (await settle(api, info["id"])).state == TaskState.SUCCEEDED
    assert (local / "big.bin").read_bytes() == BIG
    assert leftovers(api) == []


async def test_a_cancelled_aria2_download_leaves_nothing(
    api: Api, world: tuple[Path, Path], aria2: Aria2Process, files_url: str
) -> None:
    assert (await set_aria2(api, aria2))["code"] == 200
    body = await add(api, [f"{files_url}/slow/big.bin"], "/local", "aria2")
    task_id = body["data"]["tasks"][0]["id"]
    await started(api, task_id)
    await cancel_forgets(api, task_id, "aria2")
    assert leftovers(api) == []


async def test_aria2_reports_a_missing_url_and_leaves_nothing(
    api: Api, world: tuple[Path, Path], aria2: Aria2Process, files_url: str
) -> None:
    assert (await set_aria2(api, aria2))["code"] == 200
    body = await add(api, [f"{files_url}/nothing-here"], "/local", "aria2")
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.FAILED
    assert task.error.startswith("failed to download ")
    assert leftovers(api) == []


async def test_a_download_cut_by_a_stop_starts_again_and_crash_leftovers_are_swept(
    files_url: str, tmp_path: Path
) -> None:
    local = make_tree(tmp_path / "local", {})
    async with running(tmp_path / "data") as api:
        await mount_local(api, "/local", local)
        await api.post(
            "/api/admin/setting/save", [{"key": "offline_download_allow_private", "value": "true"}]
        )
        body = await add(api, [f"{files_url}/slow/big.bin"], "/local", "SimpleHttp")
        task_id = body["data"]["tasks"][0]["id"]
        await started(api, task_id)
        assert api.services.config.data_dir == tmp_path / "data"
        first_folder = api.services.tasks.get(task_id).payload["folder"]
    # What a crash leaves (a stop removes its own download's folder on the way out).
    for crashed in ("SimpleHttp/0a1b/big.bin", "aria2/2c3d/x.bin", "aria2/2c3d/x.bin.aria2"):
        path = tmp_path / "data" / "temp" / "offline" / crashed
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"partial")
    async with running(tmp_path / "data") as api:
        await started(api, task_id)  # taken up again, from the start, in a folder of its own
        (shown,) = (await api.get("/api/admin/task/offline_download/undone"))["data"]
        assert (shown["id"], shown["state"]) == (task_id, TaskState.RUNNING)
        folder = Path(api.services.tasks.get(task_id).payload["folder"])
        assert str(folder) != first_folder
        root = tmp_path / "data" / "temp" / "offline"
        assert [p for p in leftovers(api) if not (root / p).is_relative_to(folder)] == []
        await api.post("/api/admin/task/offline_download/cancel", params={"tid": task_id})
        assert (await api.services.tasks.wait_done(task_id)).state == TaskState.CANCELED


# -- names and paths ---------------------------------------------------------------------


async def test_a_long_name_is_shortened_keeping_its_extension(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    local, _ = world
    name = "é" * 150 + ".txt"  # 304 bytes of UTF-8
    body = await add(api, [f"{files_url}/cd?name={quote(name)}"], "/local", "SimpleHttp")
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.SUCCEEDED, task.error
    (stored,) = [p.name for p in local.iterdir() if p.name != "keep.txt"]
    assert stored == "é" * 125 + ".txt"
    assert len(stored.encode()) <= 255
    assert (local / stored).read_bytes() == SMALL


async def test_control_and_bidi_characters_in_a_name_are_replaced(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    local, _ = world
    name = "invoice\u202etxt.exe\x07"
    body = await add(api, [f"{files_url}/cd?name={quote(name)}"], "/local", "SimpleHttp")
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.SUCCEEDED, task.error
    assert (local / "invoice_txt.exe_").read_bytes() == SMALL


async def test_no_task_error_shows_a_server_path(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    data = str(api.services.config.data_dir)
    # A file where SimpleHttp's folder belongs: the download fails on the file system.
    root = api.services.config.data_dir / "temp" / "offline"
    root.mkdir(parents=True, exist_ok=True)
    (root / "SimpleHttp").write_text("in the way")
    body = await add(api, [f"{files_url}/small.txt"], "/local", "SimpleHttp")
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.FAILED
    assert task.error == "Not a directory"
    for shown in (await api.get("/api/admin/task/offline_download/done"))["data"]:
        assert data not in str(shown)


async def test_an_existing_name_is_never_replaced(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    local, _ = world
    (local / "small.txt").mkdir()
    (local / "small.txt" / "inside.txt").write_text("mine")
    (local / "other").mkdir()
    (local / "report 1.txt").symlink_to(local / "other")
    urls = [f"{files_url}/small.txt", f"{files_url}/named", f"{files_url}/cd?name=keep.txt"]
    for _ in range(2):
        body = await add(api, urls, "/local", "SimpleHttp")
        for info in body["data"]["tasks"]:
            assert (await settle(api, info["id"])).state == TaskState.SUCCEEDED
    assert (local / "small.txt" / "inside.txt").read_text() == "mine"
    assert (local / "report 1.txt").is_symlink()
    assert not any((local / "other").iterdir())
    assert (local / "keep.txt").read_text() == "k"
    for stored in ("small (1).txt", "small (2).txt", "report 1 (1).txt", "report 1 (2).txt",
                   "keep (1).txt", "keep (2).txt"):  # fmt: skip
        assert (local / stored).read_bytes() == SMALL, stored


async def test_downloads_of_one_name_at_once_each_get_their_own(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    local, _ = world
    body = await add(api, [f"{files_url}/small.txt"] * 4, "/local", "SimpleHttp")
    for info in body["data"]["tasks"]:
        assert (await settle(api, info["id"])).state == TaskState.SUCCEEDED
    for stored in ("small.txt", "small (1).txt", "small (2).txt", "small (3).txt"):
        assert (local / stored).read_bytes() == SMALL, stored


# -- odd inputs ---------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://[::1", "http://host:port/x", "http://[nothing]/x"])
async def test_a_malformed_url_is_a_bad_request(
    api: Api, world: tuple[Path, Path], url: str
) -> None:
    body = await add(api, [url], "/local", "SimpleHttp")
    assert body["code"] == 400, body
    assert body["message"].startswith("invalid url")


async def test_the_number_of_urls_in_one_request_is_capped(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    too_many = await add(api, [f"{files_url}/small.txt"] * 101, "/local", "SimpleHttp")
    assert too_many["code"] == 400
    assert too_many["message"] == "too many urls: at most 100 in one request"
    assert not (await api.get("/api/admin/task/offline_download/undone"))["data"]
    body = await add(
        api, [f"{files_url}/nothing-here?{n}" for n in range(100)], "/local", "SimpleHttp"
    )
    assert body["code"] == 200
    assert len(body["data"]["tasks"]) == 100
    for info in body["data"]["tasks"]:
        await finished(api, info["id"])
