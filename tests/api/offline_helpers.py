"""What the offline download tests share: a local HTTP server with ranges (the files,
torrents and web seeds), two storages to download into, and task helpers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from manifold.models import TaskState
from manifold.services.offline.tools import ToolError
from tests.api.fs_helpers import make_tree, mount_local
from tests.conftest import Api, started_api

USER_PW = "user-password-1"
BIG = os.urandom(3 << 20)
SMALL = b"small file body\n"


# Each delete policy, and whether the downloaded copy is kept after a transfer that worked.
POLICIES = [
    ("delete_on_upload_succeed", False),
    ("delete_always", False),
    ("delete_never", True),
    ("delete_on_upload_failed", True),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Files(BaseHTTPRequestHandler):
    """Serves ``FILES`` with ranges; ``/drop/...`` cuts its first answer short,
    ``/slow/...`` trickles, ``/named`` has a Content-Disposition (``/cd?name=`` the
    one asked for), ``/nolength/...`` no Content-Length, ``/hop`` redirects."""

    files: dict[str, bytes] = {"big.bin": BIG, "small.txt": SMALL}
    dropped: set[str] = set()

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/hop":
            self.send_response(302)
            self.send_header("Location", "/small.txt")
            self.end_headers()
            return
        if path == "/named":
            self._send(SMALL, {"Content-Disposition": 'attachment; filename="report 1.txt"'})
            return
        if path == "/cd":  # the name in the query, sent back as Content-Disposition
            name = self.path.split("?name=", 1)[1]
            self._send(SMALL, {"Content-Disposition": f"attachment; filename*=UTF-8''{name}"})
            return
        if path.startswith("/nolength/"):  # no Content-Length: the size shows as it comes
            self.send_response(200)
            self.end_headers()
            self.wfile.write(self.files[path.rsplit("/", 1)[-1]])
            return
        parts = path.strip("/").split("/")
        name = parts[-1]
        body = self.files.get(name)
        if body is None:
            self.send_error(404)
            return
        span = _span(self.headers.get("Range", ""), len(body))
        if parts[0] == "slow":
            self._send(body, {}, span, pace=0.05)
            return
        if parts[0] == "drop" and path not in self.dropped:
            self.dropped.add(path)
            self._send(body, {}, span, cut=len(body) // 3)
            return
        self._send(body, {}, span)

    def _send(
        self,
        body: bytes,
        headers: dict[str, str],
        span: tuple[int, int] | None = None,
        cut: int = 0,
        pace: float = 0.0,
    ) -> None:
        """The whole body, or the ``span`` asked for (206); ``cut`` drops the connection
        after that many bytes, ``pace`` sleeps between 16 KiB pieces."""
        start, end = span if span is not None else (0, len(body))
        self.send_response(206 if span is not None else 200)
        if span is not None:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(body)}")
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        data = body[start:end]
        if cut:
            self.wfile.write(data[:cut])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        step = 16384 if pace else max(len(data), 1)
        try:
            for offset in range(0, len(data), step):
                self.wfile.write(data[offset : offset + step])
                time.sleep(pace)
        except OSError:
            pass  # the client went away (a cancelled download)


def _span(header: str, size: int) -> tuple[int, int] | None:
    """``bytes=a-b`` (or ``a-``) as a half-open span, or None for the whole body."""
    if not header.startswith("bytes="):
        return None
    first, _, last = header[6:].split(",", 1)[0].partition("-")
    start = int(first)
    end = int(last) + 1 if last else size
    return start, min(end, size)


@pytest.fixture(scope="session")
def files_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Files)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
async def world(api: Api, tmp_path: Path) -> AsyncIterator[tuple[Path, Path]]:
    """/local (a Local) and /alias (an Alias over a second Local), private fetches on."""
    local = make_tree(tmp_path / "local", {"keep.txt": "k"})
    other = make_tree(tmp_path / "other", {"inside/keep.txt": "k"})
    await api.as_admin()
    await mount_local(api, "/local", local)
    await mount_local(api, "/other", other)
    alias = {
        "mount_path": "/alias",
        "driver": "Alias",
        "addition": json.dumps({"paths": "/other/inside", "writable": True}),
    }
    assert (await api.post("/api/admin/storage/create", alias))["code"] == 200
    await api.post(
        "/api/admin/setting/save", [{"key": "offline_download_allow_private", "value": "true"}]
    )
    api.services.offline.poll_seconds = 0.2
    yield local, other / "inside"


async def add(api: Api, urls: list[str], path: str, tool: str, policy: str = "") -> dict[str, Any]:
    body = {"urls": urls, "path": path, "tool": tool, "delete_policy": policy}
    return await api.post("/api/fs/add_offline_download", body)


WAIT = 120.0  # a task that takes longer has hung: fail rather than stall the suite


async def finished(api: Api, task_id: str) -> Any:
    """The task once it has ended."""
    return await asyncio.wait_for(api.services.tasks.wait_done(task_id), WAIT)


async def settle(api: Api, task_id: str) -> Any:
    """Wait for a download task and every transfer task; the download task."""
    task = await finished(api, task_id)
    while True:
        undone = await api.get("/api/admin/task/offline_download_transfer/undone")
        if not undone["data"]:
            return task
        for info in undone["data"]:
            await finished(api, info["id"])


async def transfers(api: Api) -> list[dict[str, Any]]:
    done = await api.get("/api/admin/task/offline_download_transfer/done")
    return list(done["data"])


def leftovers(api: Api) -> list[str]:
    """Everything inside the tools' folders below ``temp/offline`` (the tool folders
    themselves may stay, empty)."""
    root = api.services.config.data_dir / "temp" / "offline"
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.glob("*/**/*") if p != root)


async def started(api: Api, task_id: str) -> None:
    """Until the download has its folder and has written into it."""
    for _ in range(400):
        folder = (await api.services.tasks.load(task_id)).payload.get("folder")
        with contextlib.suppress(FileNotFoundError):  # a folder made again on a takeover
            if folder and any(f.stat().st_size for f in Path(folder).iterdir()):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the download never started")


async def task_ident(api: Api, task_id: str, within: float = 60.0) -> str:
    """The tool's id of the download, once the task handed it over (a loaded machine
    can take many seconds)."""
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        ident = (await api.services.tasks.load(task_id)).payload.get("ident")
        if ident:
            return str(ident)
        await asyncio.sleep(0.05)
    raise AssertionError("the download never reached its tool")


async def cancel_forgets(api: Api, task_id: str, tool: str) -> None:
    """Cancel the download task once the tool has it: the task ends cancelled, and the
    tool no longer knows the download."""
    ident = await task_ident(api, task_id)
    cancel = await api.post(f"/api/admin/task/offline_download/cancel?tid={task_id}")
    assert cancel["code"] == 200, cancel
    task = await finished(api, task_id)
    assert task.state == TaskState.CANCELED
    # A tool may answer the removal before it has dropped the download (Transmission
    # queues it for its session thread): allow it a moment, then it must be gone.
    for _ in range(100):
        try:
            await api.services.offline.tools[tool].status(ident)
        except ToolError:
            return
        await asyncio.sleep(0.05)
    with pytest.raises(ToolError):
        await api.services.offline.tools[tool].status(ident)


class Aria2Process:
    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.secret = secrets.token_hex(8)
        self.folder = folder
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/jsonrpc"

    def start(self) -> None:
        command = [
            shutil.which("aria2c") or "aria2c",
            "--enable-rpc",
            f"--rpc-listen-port={self.port}",
            f"--rpc-secret={self.secret}",
            f"--dir={self.folder}",
            "--quiet",
            "--no-conf",
            "--max-tries=1",
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                body = {"jsonrpc": "2.0", "method": "aria2.getVersion", "id": 1,
                        "params": [f"token:{self.secret}"]}  # fmt: skip
                if httpx.post(self.uri, json=body, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("aria2 did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture(scope="session")
def aria2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aria2Process]:
    tool = Aria2Process(tmp_path_factory.mktemp("aria2"))
    tool.start()
    yield tool
    tool.stop()


async def set_aria2(api: Api, tool: Aria2Process, secret: str | None = None) -> dict[str, Any]:
    body = {"uri": tool.uri, "secret": tool.secret if secret is None else secret}
    return await api.post("/api/admin/setting/set_aria2", body)


@asynccontextmanager
async def running(data: Path) -> AsyncIterator[Api]:
    async with started_api(data) as api:
        await api.as_admin()
        api.services.offline.poll_seconds = 0.2
        yield api
