"""The remote an AList V3 storage is tested against: a second Manifold, served for
real over HTTP, with a Local storage holding its files and a user to mount it as.

Two ways to run it: in this process (``serving``, cheap, for the conformance suite
and the behaviour tests) and as a process of its own (``Daemon``), for the fault
tests that kill it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from manifold.app import create_app
from manifold.container import Services
from manifold.models import Perm
from manifold.server import uvicorn_config
from tests.api.live_server import serving
from tests.conftest import ADMIN_PASSWORD, start_services
from tests.fixtures.certs import self_signed
from tests.fixtures.processes import Daemon, free_port, port_open

MOUNT = "/store"
USER = "mounter"
USER_PASSWORD = "mounter-pw"
# Everything a mounted storage needs: write, rename, move, copy, remove, and reading
# and extracting archives (asked of the remote with ``forward_archive_requests``).
USER_PERMISSION = int(
    Perm.WRITE
    | Perm.RENAME
    | Perm.MOVE
    | Perm.COPY
    | Perm.REMOVE
    | Perm.READ_ARCHIVES
    | Perm.DECOMPRESS
)


@dataclass
class Remote:
    """A running remote: its URL, the folder behind its ``MOUNT`` and an admin client."""

    url: str
    files: Path
    services: Services | None = None

    async def call(self, method: str, api: str, **kw: Any) -> Any:
        """The ``data`` of an admin call; fails the test on any error."""
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as client:
            login = await client.post(
                "/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
            )
            token = login.json()["data"]["token"]
            response = await client.request(method, api, headers={"Authorization": token}, **kw)
        body = response.json()
        assert body["code"] == 200, body
        return body["data"]

    async def login(self, username: str = USER, password: str = USER_PASSWORD) -> str:
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as client:
            response = await client.post(
                "/api/auth/login", json={"username": username, "password": password}
            )
        token: str = response.json()["data"]["token"]
        return token

    async def settings(self, **values: str) -> None:
        await self.call(
            "POST",
            "/api/admin/setting/save",
            json=[{"key": k, "value": v} for k, v in values.items()],
        )

    async def user(self, name: str) -> dict[str, Any]:
        listing = await self.call("GET", "/api/admin/user/list")
        found: dict[str, Any] = next(u for u in listing["content"] if u["username"] == name)
        return found

    async def set_up(self) -> None:
        """The Local storage at ``MOUNT`` and the user ``USER``; both kept across restarts."""
        self.files.mkdir(parents=True, exist_ok=True)
        addition = json.dumps({"root_folder_path": str(self.files)})
        await self.call(
            "POST",
            "/api/admin/storage/create",
            json={"mount_path": MOUNT, "driver": "Local", "addition": addition},
        )
        user = {"username": USER, "password": USER_PASSWORD, "permission": USER_PERMISSION}
        await self.call("POST", "/api/admin/user/create", json=user)


@asynccontextmanager
async def in_process(folder: Path) -> AsyncIterator[Remote]:
    """A remote Manifold served by uvicorn in this process's event loop."""
    services = await start_services(folder / "data")
    try:
        async with serving(services) as url:
            remote = Remote(url, folder / "files", services)
            await remote.set_up()
            yield remote
    finally:
        await services.stop()


class RemoteProcess:
    """A remote Manifold as a process of its own (``manifold server``), to kill."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        argv = [sys.executable, "-m", "manifold", "server", "--data", str(folder / "data")]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), "--no-ui"]
        env = {**os.environ, "MANIFOLD_ADMIN_PASSWORD": ADMIN_PASSWORD}
        self.daemon = Daemon(
            "manifold-remote",
            argv,
            lambda: port_open(self.port),
            folder / "server.log",
            env=env,
        )
        self.remote = Remote(f"http://127.0.0.1:{self.port}", folder / "files")

    async def start(self) -> None:
        await asyncio.to_thread(self.daemon.start)

    async def kill(self) -> None:
        await asyncio.to_thread(self.daemon.kill)

    async def stop(self) -> None:
        await asyncio.to_thread(self.daemon.stop)


@asynccontextmanager
async def serving_tls(services: Services, folder: Path) -> AsyncIterator[str]:
    """``services`` served over HTTPS with a self-signed certificate; its base URL."""
    cert, key = self_signed(folder)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = create_app(services.config, services)
    config = uvicorn_config(
        app,
        services.config,
        log_level="warning",
        lifespan="off",
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 - uvicorn offers no event
        await asyncio.sleep(0.01)
    try:
        yield f"https://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
