"""Offline downloads with SimpleHttp and a real aria2: into a Local storage and, by
transfer tasks, into an Alias; delete policies, cancel, a tool that stops, SSRF."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from manifold.models import Perm, TaskState
from manifold.services.offline import simple_http
from manifold.services.offline.tools import ToolError
from tests.api.fs_helpers import make_tree, mount_local
from tests.api.offline_helpers import (
    BIG,
    POLICIES,
    SMALL,
    USER_PW,
    Aria2Process,
    add,
    cancel_forgets,
    finished,
    free_port,
    running,
    set_aria2,
    settle,
    task_ident,
    transfers,
)
from tests.conftest import Api

# -- SimpleHttp ------------------------------------------------------------------------


async def test_simple_http_into_local_and_into_an_alias(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    local, behind_alias = world
    body = await add(api, [f"{files_url}/big.bin", f"{files_url}/named"], "/local", "SimpleHttp")
    assert body["code"] == 200, body
    names = [t["name"] for t in body["data"]["tasks"]]
    assert names == [
        f"download {files_url}/big.bin to (/local)",
        f"download {files_url}/named to (/local)",
    ]
    for info in body["data"]["tasks"]:
        task = await settle(api, info["id"])
        assert task.state == TaskState.SUCCEEDED, task.error
    assert (local / "big.bin").read_bytes() == BIG
    assert (local / "report 1.txt").read_bytes() == SMALL  # from Content-Disposition

    body = await add(api, [f"{files_url}/hop"], "/alias", "SimpleHttp", "delete_on_upload_succeed")
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.SUCCEEDED, task.error
    assert (behind_alias / "small.txt").read_bytes() == SMALL  # the redirect's target
    assert any(t["name"].endswith("to [/alias](/)") for t in await transfers(api))


async def test_simple_http_resumes_a_dropped_connection(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    local, _ = world
    body = await add(api, [f"{files_url}/drop/big.bin"], "/local", "SimpleHttp")
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.SUCCEEDED, task.error
    assert (local / "big.bin").read_bytes() == BIG


@pytest.mark.parametrize(("policy", "kept"), POLICIES)
async def test_simple_http_with_each_policy(
    api: Api, world: tuple[Path, Path], files_url: str, policy: str, kept: bool
) -> None:
    _, behind_alias = world
    body = await add(api, [f"{files_url}/small.txt"], "/alias", "SimpleHttp", policy)
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.SUCCEEDED, task.error
    assert (behind_alias / "small.txt").read_bytes() == SMALL
    assert (Path(task.payload["folder"]) / "small.txt").exists() is kept


async def test_cancel_stops_a_simple_http_download(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    local, _ = world
    body = await add(api, [f"{files_url}/slow/big.bin"], "/local", "SimpleHttp")
    task_id = body["data"]["tasks"][0]["id"]
    for _ in range(200):  # until bytes are flowing
        if api.services.tasks.get(task_id).payload.get("folder"):
            break
        await asyncio.sleep(0.05)
    cancel = await api.post(f"/api/admin/task/offline_download/cancel?tid={task_id}")
    assert cancel["code"] == 200, cancel
    task = await finished(api, task_id)
    assert task.state == TaskState.CANCELED
    assert not (local / "big.bin").exists()
    assert not (await api.get("/api/admin/task/offline_download_transfer/undone"))["data"]


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "[::1]", "[::127.0.0.1]", "[64:ff9b::7f00:1]",
             "[::ffff:0:7f00:1]", "10.0.0.1", "169.254.169.254"],
)  # fmt: skip
async def test_private_addresses_are_refused_at_submit_unless_allowed(
    api: Api, world: tuple[Path, Path], files_url: str, host: str
) -> None:
    await api.post(
        "/api/admin/setting/save", [{"key": "offline_download_allow_private", "value": "false"}]
    )
    refused = await add(api, [f"{files_url}/small.txt", f"http://{host}/x"], "/local", "SimpleHttp")
    assert refused["code"] == 400, refused
    assert "offline_download_allow_private" in refused["message"]
    assert not (await api.get("/api/admin/task/offline_download/undone"))["data"]
    assert not (await api.get("/api/admin/task/offline_download/done"))["data"]


async def test_the_private_address_setting_is_on_a_settings_tab_of_the_page(api: Api) -> None:
    await api.as_admin()
    # The page's "Traffic" tab lists group 11; the tab of group 5 shows only the tools.
    traffic = await api.get("/api/admin/setting/list", params={"group": "11"})
    keys = [item["key"] for item in traffic["data"]]
    assert {"offline_download_allow_private", "offline_download_max_size"} <= set(keys)


async def test_a_public_name_that_resolves_to_loopback_is_refused(files_url: str) -> None:
    port = int(files_url.rsplit(":", 1)[1])

    def resolver(host: str, _: int) -> list[str]:
        return ["127.0.0.1"] if host == "files.example.com" else ["93.184.216.34"]

    url = f"http://files.example.com:{port}/small.txt"
    with pytest.raises(ToolError, match="loopback, private or link-local"):
        await simple_http.download(url, "/nonexistent", 0, lambda *_: None, lambda: False, resolver)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "gopher://x/", "javascript:alert(1)", "/local/file"]
)
async def test_other_url_schemes_are_refused(api: Api, world: tuple[Path, Path], url: str) -> None:
    body = await add(api, [url], "/local", "SimpleHttp")
    assert body["code"] == 400
    assert "is not allowed" in body["message"]
    magnet = await add(api, ["magnet:?xt=urn:btih:abc"], "/local", "SimpleHttp")
    assert magnet["code"] == 400


async def test_offline_downloads_need_the_bit_and_write_access(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    await api.make_user("nobit", USER_PW, permission=int(Perm.WRITE), base_path="/")
    await api.make_user("nowrite", USER_PW, permission=int(Perm.OFFLINE_DOWNLOAD), base_path="/")
    for user in ("nobit", "nowrite"):
        token = await api.login(user, USER_PW)
        body = {"urls": [f"{files_url}/small.txt"], "path": "/local", "tool": "SimpleHttp"}
        refused = await api.post("/api/fs/add_offline_download", body, token=token)
        assert (refused["code"], refused["message"]) == (403, "permission denied"), user
    # As AList, the bit is checked before the body is read: a malformed body is 403 too.
    token = await api.login("nobit", USER_PW)
    malformed = await api.post("/api/fs/add_offline_download", {"urls": "x"}, token=token)
    assert (malformed["code"], malformed["message"]) == (403, "permission denied")
    wrong_type = await api.post("/api/fs/add_offline_download", {"urls": "x", "path": "/local"})
    assert wrong_type["code"] == 400  # with the bit: the body is judged
    escape = await api.post(
        "/api/fs/add_offline_download",
        {"urls": [f"{files_url}/small.txt"], "path": "/../local", "tool": "SimpleHttp"},
    )
    assert escape["code"] == 403


async def test_unknown_tools_and_paths_answer_alists_errors(
    api: Api, world: tuple[Path, Path], files_url: str
) -> None:
    url = f"{files_url}/small.txt"
    unknown = await add(api, [url], "/local", "Nope")
    assert (unknown["code"], unknown["message"]) == (500, "failed get tool: tool Nope not found")
    nowhere = await add(api, [url], "/nowhere", "SimpleHttp")
    assert nowhere["message"].startswith("failed get storage: storage not found")
    file_target = await add(api, [url], "/local/keep.txt", "SimpleHttp")
    assert (file_target["code"], file_target["message"]) == (500, "not a folder")


async def test_the_tools_list_shows_simple_http_always(api: Api) -> None:
    body = await api.get("/api/public/offline_download_tools")
    assert "SimpleHttp" in body["data"]
    assert "aria2" not in body["data"]  # nothing listens on aria2's default port here


# -- aria2 -------------------------------------------------------------------------------


async def test_set_aria2_checks_the_connection(api: Api, aria2: Aria2Process) -> None:
    await api.as_admin()
    wrong = await set_aria2(api, aria2, "not-the-secret")
    assert wrong["code"] == 500
    assert wrong["message"].startswith("failed get aria2 version: ")
    assert "not-the-secret" not in wrong["message"]
    assert "aria2" not in (await api.get("/api/public/offline_download_tools"))["data"]
    bad = await api.post("/api/admin/setting/set_aria2", {"uri": "ftp://x/", "secret": ""})
    assert bad["message"] == "failed to init aria2 client: invalid parameter"
    good = await set_aria2(api, aria2)
    assert good["code"] == 200
    assert good["data"].startswith("aria2 version: 1.")
    assert (await api.get("/api/public/offline_download_tools"))["data"] == ["SimpleHttp", "aria2"]
    # As AList: what was typed is saved, then tested; the test's error is the answer.
    assert (await set_aria2(api, aria2, "wrong-again"))["code"] == 500
    assert api.services.settings.get("aria2_secret") == "wrong-again"
    assert (await api.get("/api/public/offline_download_tools"))["data"] == ["SimpleHttp"]


async def test_a_failed_set_aria2_keeps_what_was_typed(api: Api, aria2: Aria2Process) -> None:
    await api.as_admin()
    wrong_port = aria2.uri.replace(f":{aria2.port}/", f":{free_port()}/")
    answer = await api.post(
        "/api/admin/setting/set_aria2", {"uri": wrong_port, "secret": "typed-secret"}
    )
    assert answer["code"] == 500
    assert answer["message"] == "failed get aria2 version: aria2 is unreachable: ConnectError"
    listed = await api.get("/api/admin/setting/list", params={"group": "5"})
    values = {item["key"]: item["value"] for item in listed["data"]}
    assert (values["aria2_uri"], values["aria2_secret"]) == (wrong_port, "typed-secret")


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("set_aria2", {"uri": "http://[::1", "secret": "pw"},
         "failed to init aria2 client: invalid parameter"),
        ("set_qbit", {"url": "http://a:pw@[::1", "seedtime": "0"},
         "failed to login into qBittorrent webui with url: (not a URL)"),
        ("set_qbit", {"url": "ftp://a:pw@host/", "seedtime": "0"},
         "failed to login into qBittorrent webui with url: ftp://a:***@host/"),
        ("set_transmission", {"uri": "http://a:pw@[::1", "seedtime": "0"},
         "failed get transmission version: invalid transmission uri: (not a URL)"),
        ("set_transmission", {"uri": "ftp://a:pw@host/rpc", "seedtime": "0"},
         "failed get transmission version: invalid transmission uri: ftp://a:***@host/rpc"),
    ],
)  # fmt: skip
async def test_a_tool_address_that_is_no_url_is_refused_without_its_password(
    api: Api, path: str, body: dict[str, str], message: str
) -> None:
    await api.as_admin()
    answer = await api.post(f"/api/admin/setting/{path}", body)
    assert (answer["code"], answer["message"]) == (500, message)


@pytest.mark.parametrize(("policy", "kept"), POLICIES)
async def test_aria2_into_local_and_alias_with_each_policy(
    api: Api, world: tuple[Path, Path], aria2: Aria2Process, files_url: str, policy: str, kept: bool
) -> None:
    local, behind_alias = world
    assert (await set_aria2(api, aria2))["code"] == 200
    body = await add(api, [f"{files_url}/big.bin"], "/local", "aria2", policy)
    (info,) = body["data"]["tasks"]
    task = await settle(api, info["id"])
    assert task.state == TaskState.SUCCEEDED, task.error
    assert (local / "big.bin").read_bytes() == BIG
    body = await add(api, [f"{files_url}/small.txt"], "/alias", "aria2", policy)
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.SUCCEEDED, task.error
    assert (behind_alias / "small.txt").read_bytes() == SMALL
    folder = Path(task.payload["folder"])
    assert (folder / "small.txt").exists() is kept
    assert folder.is_relative_to(api.services.config.data_dir / "temp")


async def test_cancel_removes_the_download_from_aria2(
    api: Api, world: tuple[Path, Path], aria2: Aria2Process, files_url: str
) -> None:
    assert (await set_aria2(api, aria2))["code"] == 200
    body = await add(api, [f"{files_url}/slow/big.bin"], "/local", "aria2")
    await cancel_forgets(api, body["data"]["tasks"][0]["id"], "aria2")


async def test_a_tool_that_stops_fails_the_task_which_can_be_retried(
    api: Api, world: tuple[Path, Path], files_url: str, tmp_path: Path
) -> None:
    local, _ = world
    tool = Aria2Process(tmp_path / "aria2-own")
    tool.folder.mkdir()
    tool.start()
    try:
        assert (await set_aria2(api, tool))["code"] == 200
        body = await add(api, [f"{files_url}/slow/big.bin"], "/local", "aria2")
        task_id = body["data"]["tasks"][0]["id"]
        await task_ident(api, task_id)
        tool.stop()
        task = await finished(api, task_id)
        assert task.state == TaskState.FAILED
        # Retried once by itself while aria2 was still down: either way, a clear reason.
        assert "failed to get status of" in task.error or "aria2 is unreachable" in task.error
        tool.start()  # a fresh aria2 that has forgotten the download: it is started again
        assert (await api.post(f"/api/admin/task/offline_download/retry?tid={task_id}"))[
            "code"
        ] == 200
        task = await settle(api, task_id)
        assert task.state == TaskState.SUCCEEDED, task.error
        assert (local / "big.bin").read_bytes() == BIG
    finally:
        tool.stop()


async def test_a_download_taken_over_by_another_instance_stays_with_its_tool(
    aria2: Aria2Process, files_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    local = make_tree(tmp_path / "local", {})
    async with running(tmp_path / "data") as api:
        await mount_local(api, "/local", local)
        assert (await set_aria2(api, aria2))["code"] == 200
        body = await add(api, [f"{files_url}/slow/big.bin"], "/local", "aria2")
        task_id = body["data"]["tasks"][0]["id"]
        ident = await task_ident(api, task_id)
        tasks = api.services.tasks
        tasks.heartbeat_seconds = 0.2
        # Another instance claims the task (as when this one's lease ran out on a loaded
        # machine): this run stops, and the download goes on for the new holder.
        async with api.services.engine.begin() as conn:
            await conn.execute(
                text("UPDATE tasks SET owner = 'another' WHERE id = :id"), {"id": task_id}
            )
        taken = f"task {task_id} was taken from this instance"
        async with asyncio.timeout(60):
            while taken not in caplog.text:  # noqa: ASYNC110 - the beat's own warning
                await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # what the stopped run did on its way out is done
        status = await api.services.offline.tools["aria2"].status(ident)
        assert not status.error, status.error  # not removed from aria2


async def test_a_download_survives_a_restart_of_manifold(
    aria2: Aria2Process, files_url: str, tmp_path: Path
) -> None:
    local = make_tree(tmp_path / "local", {})
    async with running(tmp_path / "data") as api:
        await mount_local(api, "/local", local)
        assert (await set_aria2(api, aria2))["code"] == 200
        body = await add(api, [f"{files_url}/slow/big.bin"], "/local", "aria2")
        task_id = body["data"]["tasks"][0]["id"]
        ident = await task_ident(api, task_id)
    async with running(tmp_path / "data") as api:
        # Let go of at the stop, the task is taken up again at the start; its folder in
        # the data folder was kept for it, and aria2 kept downloading.
        task = await settle(api, task_id)
        assert task.state == TaskState.SUCCEEDED, task.error
        assert task.payload["ident"] == ident  # the same download, followed to its end
        assert (local / "big.bin").read_bytes() == BIG
