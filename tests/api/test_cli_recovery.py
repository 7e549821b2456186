"""The command line's recovery of a locked-out admin, against a running server.

The server runs as its own process, started on a port and address of its own (not
those of the config file), as a user might start it; the commands change the database
and the running server must follow, whatever address it listens on.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyotp
import pytest

from tests.api.fs_helpers import store
from tests.conftest import start_services
from tests.fixtures.silent import sftp_addition, silent_server

OLD_PASSWORD = "first-admin-password"
NEW_PASSWORD = "second-admin-password"
ROOT = Path(__file__).resolve().parents[2]
STUCK = 120  # seconds: a server that has not caught up by then never will


def manifold(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "manifold.cli", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=STUCK, check=True)


HOST = "127.0.0.2"  # neither the config file's address nor the loopback address it implies


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    data = tmp_path / "data"
    port = free_port()
    env = {**os.environ, "MANIFOLD_ADMIN_PASSWORD": OLD_PASSWORD, "MANIFOLD_LOG_LEVEL": "warning"}
    argv = [sys.executable, "-m", "manifold.cli", "server", "--data", str(data), "--no-ui"]
    argv += ["--host", HOST, "--port", str(port)]
    process = subprocess.Popen(
        argv, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL
    )
    try:
        wait_for(port)
        yield f"http://{HOST}:{port}", data
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(STUCK)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_for(port: int) -> None:
    deadline = time.monotonic() + STUCK
    while time.monotonic() < deadline:
        try:
            socket.create_connection((HOST, port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {HOST}:{port}")


async def login(client: httpx.AsyncClient, password: str, otp: str = "") -> dict[str, Any]:
    body = {"username": "admin", "password": password, "otp_code": otp}
    answer: dict[str, Any] = (await client.post("/api/auth/login", json=body)).json()
    return answer


async def me(client: httpx.AsyncClient, token: str) -> int:
    answer = (await client.get("/api/me", headers={"Authorization": token})).json()
    return int(answer["code"])


async def refused_soon(client: httpx.AsyncClient, token: str) -> bool:
    """Whether the server refuses ``token`` within ``STUCK`` seconds (a running server
    looks for changes made behind its back at most once a second)."""
    async with asyncio.timeout(STUCK):
        while await me(client, token) == 200:  # noqa: ASYNC110 - polling over HTTP
            await asyncio.sleep(0.2)
    return True


async def test_admin_set_reaches_a_server_started_on_its_own_address(
    server: tuple[str, Path],
) -> None:
    url, data = server
    async with httpx.AsyncClient(base_url=url, timeout=STUCK) as client:
        old = await login(client, OLD_PASSWORD)
        assert old["code"] == 200, old
        token = old["data"]["token"]
        assert await me(client, token) == 200
        await asyncio.to_thread(manifold, "admin", "set", NEW_PASSWORD, "--data", str(data))
        assert (await login(client, NEW_PASSWORD))["code"] == 200
        assert (await login(client, OLD_PASSWORD))["message"] == "password is incorrect"
        assert await refused_soon(client, token)


async def test_admin_random_reaches_the_server(server: tuple[str, Path]) -> None:
    url, data = server
    async with httpx.AsyncClient(base_url=url, timeout=STUCK) as client:
        assert (await login(client, OLD_PASSWORD))["code"] == 200
        out = await asyncio.to_thread(manifold, "admin", "random", "--data", str(data))
        password = out.stdout.split("admin user's password: ")[1].strip()
        assert (await login(client, password))["code"] == 200
        assert (await login(client, OLD_PASSWORD))["code"] == 400


async def test_cancel2fa_reaches_the_server(server: tuple[str, Path]) -> None:
    url, data = server
    async with httpx.AsyncClient(base_url=url, timeout=STUCK) as client:
        token = (await login(client, OLD_PASSWORD))["data"]["token"]
        auth = {"Authorization": token}
        secret = (await client.post("/api/auth/2fa/generate", headers=auth)).json()["data"]
        code = pyotp.TOTP(secret["secret"]).now()
        body = {"code": code, "secret": secret["secret"]}
        verified = (await client.post("/api/auth/2fa/verify", json=body, headers=auth)).json()
        assert verified["code"] == 200, verified
        assert (await login(client, OLD_PASSWORD))["code"] == 402
        await asyncio.to_thread(manifold, "cancel2fa", "--data", str(data))
        assert (await login(client, OLD_PASSWORD))["code"] == 200


async def test_recovery_starts_no_storage(tmp_path: Path) -> None:
    """A storage whose back end never answers neither delays the commands nor hears
    from them: they touch the database only."""
    data = tmp_path / "data"
    with silent_server() as silent:
        made = await start_services(data)
        await store(made, "/slow", "SFTP", sftp_addition(silent))
        await made.stop()
        commands = [("admin", "set", NEW_PASSWORD), ("admin", "random"), ("admin", "token"),
                    ("cancel2fa",), ("admin",)]  # fmt: skip
        for command in commands:
            done = await asyncio.to_thread(manifold, *command, "--data", str(data))
            assert "storage" not in done.stderr, done.stderr
        assert silent.connections() == 0
