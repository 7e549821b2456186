"""Offline downloads through a real qBittorrent and a real Transmission.

Fully offline: each test makes a torrent whose only source is a web seed (BEP 19
``url-list``) on the local HTTP server, which also serves the ``.torrent`` file.
Every tool: set-up with a wrong and a right password, into a Local and (by transfer
tasks) into an Alias with each delete policy, a torrent URL that 404s, cancel in
the middle, and the tool stopped in the middle then the task retried.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from manifold.models import TaskState
from manifold.services.offline.tools import ToolError
from tests.api.offline_helpers import (
    POLICIES,
    Files,
    add,
    cancel_forgets,
    finished,
    free_port,
    leftovers,
    settle,
    started,
    task_ident,
)
from tests.conftest import Api

PIECE = 1 << 16

pytestmark = pytest.mark.skipif(
    not (shutil.which("qbittorrent-nox") and shutil.which("transmission-daemon")),
    reason="qbittorrent-nox and transmission-daemon come from scripts/test",
)


def bencode(value: Any) -> bytes:
    if isinstance(value, int):
        return b"i%de" % value
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return b"%d:%s" % (len(value), value)
    if isinstance(value, list):
        return b"l" + b"".join(bencode(v) for v in value) + b"e"
    items = sorted(value.items())
    return b"d" + b"".join(bencode(k) + bencode(v) for k, v in items) + b"e"


def seeded(files_url: str, size: int = 1 << 20, slow: bool = False) -> tuple[str, str, bytes]:
    """A fresh file served by the local server and a torrent for it whose web seed is
    that server; returns the torrent's URL, the file's name and its bytes."""
    name = f"seeded-{secrets.token_hex(4)}.bin"
    data = os.urandom(size)
    pieces = b"".join(hashlib.sha1(data[i : i + PIECE]).digest() for i in range(0, size, PIECE))
    info = {"name": name, "length": size, "piece length": PIECE, "pieces": pieces}
    seed = f"{files_url}/{'slow' if slow else 'seed'}/"
    torrent = bencode({"info": info, "url-list": [seed], "created by": "manifold tests"})
    Files.files[name] = data
    Files.files[f"{name}.torrent"] = torrent
    return f"{files_url}/t/{name}.torrent", name, data


def _wait_answering(url: str, what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{what} exited"
        try:
            httpx.post(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"{what} did not start")


class Daemon:
    """A tool's program on private ports, started and stopped by the tests."""

    name = ""
    port = 0
    process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def probe(self) -> str:
        """A URL that answers (any status) once the program is up."""
        raise NotImplementedError

    def settings(self, password: str | None = None) -> tuple[str, dict[str, str]]:
        """The set-up endpoint and its body (with ``password`` instead of the right one)."""
        raise NotImplementedError

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait_answering(self.probe(), self.name, self.process)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


class QBitProcess(Daemon):
    name = "qBittorrent"

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.port = free_port()
        config = profile / "qBittorrent" / "config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "qBittorrent.conf").write_text(
            "[LegalNotice]\nAccepted=true\n\n"
            "[BitTorrent]\n"
            f"Session\\Port={free_port()}\nSession\\DHTEnabled=false\n"
            "Session\\LSDEnabled=false\nSession\\PeXEnabled=false\n"
            "Session\\AddTorrentPaused=false\n\n"
            "[Network]\nPortForwardingEnabled=false\n\n"
            "[Preferences]\n"
            f"WebUI\\Address=127.0.0.1\nWebUI\\Port={self.port}\n"
            "WebUI\\LocalHostAuth=true\nWebUI\\MaxAuthenticationFailCount=1000\n"
            "WebUI\\CSRFProtection=false\nWebUI\\HostHeaderValidation=false\n"
            "Connection\\UPnP=false\n"
        )

    def command(self) -> list[str]:
        return [shutil.which("qbittorrent-nox") or "qbittorrent-nox", f"--profile={self.profile}"]

    def probe(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v2/app/version"

    def settings(self, password: str | None = None) -> tuple[str, dict[str, str]]:
        url = f"http://admin:{password or 'adminadmin'}@127.0.0.1:{self.port}/"
        return "/api/admin/setting/set_qbit", {"url": url, "seedtime": "0"}


class TransmissionProcess(Daemon):
    name = "Transmission"
    password = "transmission-pw"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        folder.mkdir(parents=True, exist_ok=True)
        settings = {
            "rpc-port": self.port,
            "rpc-bind-address": "127.0.0.1",
            "rpc-whitelist-enabled": False,
            "rpc-host-whitelist-enabled": False,
            "rpc-authentication-required": True,
            "rpc-username": "manifold",
            "rpc-password": self.password,
            "peer-port": free_port(),
            "dht-enabled": False,
            "lpd-enabled": False,
            "pex-enabled": False,
            "utp-enabled": False,
            "port-forwarding-enabled": False,
            "download-dir": str(folder / "downloads"),
            "incomplete-dir-enabled": False,
            "start-added-torrents": True,
            "message-level": 0,
        }
        (folder / "settings.json").write_text(json.dumps(settings))

    def command(self) -> list[str]:
        daemon = shutil.which("transmission-daemon") or "transmission-daemon"
        return [daemon, "--foreground", "--config-dir", str(self.folder)]

    def probe(self) -> str:
        return f"http://127.0.0.1:{self.port}/transmission/rpc"

    def settings(self, password: str | None = None) -> tuple[str, dict[str, str]]:
        uri = f"http://manifold:{password or self.password}@127.0.0.1:{self.port}/transmission/rpc"
        return "/api/admin/setting/set_transmission", {"uri": uri, "seedtime": "0"}


def _started(tool: Daemon) -> Iterator[Daemon]:
    tool.start()
    try:
        yield tool
    finally:
        tool.stop()


@pytest.fixture(scope="session")
def qbit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    yield from _started(QBitProcess(tmp_path_factory.mktemp("qbit")))


@pytest.fixture(scope="session")
def transmission(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    yield from _started(TransmissionProcess(tmp_path_factory.mktemp("transmission")))


@pytest.fixture(params=["qBittorrent", "Transmission"])
def tool(request: pytest.FixtureRequest) -> Daemon:
    fixture = "qbit" if request.param == "qBittorrent" else "transmission"
    found: Daemon = request.getfixturevalue(fixture)
    return found


async def configure(api: Api, tool: Daemon, password: str | None = None) -> dict[str, Any]:
    path, body = tool.settings(password)
    return await api.post(path, body)


async def test_set_up_checks_the_password(api: Api, tool: Daemon) -> None:
    await api.as_admin()
    wrong = await configure(api, tool, "not-the-password")
    assert wrong["code"] == 500, wrong
    if tool.name == "qBittorrent":
        assert wrong["message"].startswith("failed to login into qBittorrent webui with url: ")
    else:
        assert wrong["message"].startswith("failed get transmission version: ")
    assert "not-the-password" not in wrong["message"]
    assert tool.name not in (await api.get("/api/public/offline_download_tools"))["data"]
    good = await configure(api, tool)
    assert good == {"code": 200, "message": "success", "data": "ok"}
    assert tool.name in (await api.get("/api/public/offline_download_tools"))["data"]
    # As AList: what was typed is saved, then tested; the test's error is the answer.
    _, body = tool.settings("wrong-again")
    key = "qbittorrent_url" if tool.name == "qBittorrent" else "transmission_uri"
    assert (await configure(api, tool, "wrong-again"))["code"] == 500
    assert api.services.settings.get(key) == next(iter(body.values()))
    assert tool.name not in (await api.get("/api/public/offline_download_tools"))["data"]


async def test_a_failed_set_up_keeps_what_was_typed_and_shows_the_host(
    api: Api, tool: Daemon
) -> None:
    await api.as_admin()
    path, body = tool.settings("the-secret-pw")
    key, typed = next(iter(body.items()))
    wrong_port = typed.replace(f":{tool.port}/", f":{free_port()}/")
    answer = await api.post(path, {**body, key: wrong_port})
    assert answer["code"] == 500, answer
    assert "unreachable" in answer["message"]
    setting = "qbittorrent_url" if tool.name == "qBittorrent" else "transmission_uri"
    listed = await api.get("/api/admin/setting/list", params={"group": "5"})
    assert {i["key"]: i["value"] for i in listed["data"]}[setting] == wrong_port
    if tool.name == "qBittorrent":  # the password masked, the host and port shown
        answer = await api.post(path, body)
        host = f"127.0.0.1:{tool.port}"
        assert answer["message"] == (
            f"failed to login into qBittorrent webui with url: http://admin:***@{host}/"
        )
    assert "the-secret-pw" not in str(answer)


@pytest.mark.parametrize(("policy", "kept"), POLICIES)
async def test_into_local_and_alias_with_each_policy(
    api: Api,
    world: tuple[Path, Path],
    tool: Daemon,
    files_url: str,
    policy: str,
    kept: bool,
) -> None:
    local, behind_alias = world
    assert (await configure(api, tool))["code"] == 200
    for path, folder in (("/local", local), ("/alias", behind_alias)):
        url, name, data = seeded(files_url)
        body = await add(api, [url], path, tool.name, policy)
        assert body["code"] == 200, body
        task = await settle(api, body["data"]["tasks"][0]["id"])
        assert task.state == TaskState.SUCCEEDED, task.error
        assert (folder / name).read_bytes() == data
        downloaded = Path(task.payload["folder"])
        assert downloaded.is_relative_to(api.services.config.data_dir / "temp")
        assert (downloaded / name).exists() is kept
        with pytest.raises(ToolError):  # seedtime 0: the tool has forgotten it
            await api.services.offline.tools[tool.name].status(task.payload["ident"])


async def test_a_torrent_url_that_404s_fails_at_once(
    api: Api, world: tuple[Path, Path], tool: Daemon, files_url: str
) -> None:
    assert (await configure(api, tool))["code"] == 200
    body = await add(api, [f"{files_url}/t/missing.torrent"], "/local", tool.name)
    task = await settle(api, body["data"]["tasks"][0]["id"])
    assert task.state == TaskState.FAILED
    assert "http status code 404" in task.error


async def test_cancel_removes_the_torrent_from_the_tool(
    api: Api, world: tuple[Path, Path], tool: Daemon, files_url: str
) -> None:
    assert (await configure(api, tool))["code"] == 200
    url, _, _ = seeded(files_url, size=8 << 20, slow=True)
    body = await add(api, [url], "/local", tool.name)
    await started(api, body["data"]["tasks"][0]["id"])
    await cancel_forgets(api, body["data"]["tasks"][0]["id"], tool.name)
    assert leftovers(api) == []  # nor anything of it in the data folder


@pytest.mark.parametrize("kind", ["qBittorrent", "Transmission"])
async def test_a_tool_that_stops_fails_the_task_which_can_be_retried(
    api: Api, world: tuple[Path, Path], files_url: str, tmp_path: Path, kind: str
) -> None:
    local, _ = world
    own: Daemon
    if kind == "qBittorrent":
        own = QBitProcess(tmp_path / "own-qbit")
    else:
        own = TransmissionProcess(tmp_path / "own-transmission")
    own.start()
    try:
        assert (await configure(api, own))["code"] == 200
        url, name, data = seeded(files_url, size=4 << 20, slow=True)
        body = await add(api, [url], "/local", kind)
        task_id = body["data"]["tasks"][0]["id"]
        await task_ident(api, task_id)
        own.stop()
        task = await finished(api, task_id)
        assert task.state == TaskState.FAILED
        assert "unreachable" in task.error, task.error
        own.start()  # it kept the torrent: the retry follows the same download
        retry = await api.post(f"/api/admin/task/offline_download/retry?tid={task_id}")
        assert retry["code"] == 200, retry
        task = await settle(api, task_id)
        assert task.state == TaskState.SUCCEEDED, task.error
        assert (local / name).read_bytes() == data
    finally:
        own.stop()


async def test_a_seed_time_keeps_the_torrent_in_the_tool(
    api: Api, world: tuple[Path, Path], qbit: Daemon, files_url: str
) -> None:
    local, _ = world
    path, body = qbit.settings()
    assert (await api.post(path, {**body, "seedtime": "5"}))["code"] == 200
    url, name, data = seeded(files_url)
    added = await add(api, [url], "/local", "qBittorrent", "delete_never")
    task = await settle(api, added["data"]["tasks"][0]["id"])
    assert task.state == TaskState.SUCCEEDED, task.error
    assert (local / name).read_bytes() == data
    tool = api.services.offline.tools["qBittorrent"]
    assert (await tool.status(task.payload["ident"])).done  # still seeding
    await tool.remove(task.payload["ident"])
