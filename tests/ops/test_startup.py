"""A real ``manifold server`` whose database holds a storage with a silent back end
answers at once: its storages start in the background, that one shows ``loading``."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.fs_helpers import store
from tests.conftest import ADMIN_PASSWORD, start_services
from tests.fixtures.processes import free_port, tail
from tests.fixtures.silent import Silent, sftp_addition, silent_server

ROOT = Path(__file__).resolve().parents[2]
STUCK = 120  # seconds: a server that has not answered by then never will


@pytest.fixture
def silent() -> Iterator[Silent]:
    with silent_server() as server:
        yield server


async def ping(base: str) -> None:
    """Wait until ``/ping`` answers (the process imports, migrates, then listens)."""
    async with httpx.AsyncClient(base_url=base, timeout=5) as client:
        while True:
            try:
                if (await client.get("/ping")).status_code == 200:
                    return
            except httpx.TransportError:
                await asyncio.sleep(0.1)


async def storage_status(base: str, mount_path: str) -> str:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        token = (await client.post("/api/auth/login", json=login)).json()["data"]["token"]
        listed = await client.get("/api/admin/storage/list", headers={"Authorization": token})
    (found,) = [s for s in listed.json()["data"]["content"] if s["mount_path"] == mount_path]
    return str(found["status"])


async def test_the_server_answers_while_a_silent_storage_starts(
    tmp_path: Path, silent: Silent
) -> None:
    data = tmp_path / "data"
    made = await start_services(data)
    await store(made, "/slow", "SFTP", sftp_addition(silent))
    await made.stop()
    port = free_port()
    argv = [sys.executable, "-m", "manifold", "server", "--data", str(data),
            "--host", "127.0.0.1", "--port", str(port), "--no-ui"]  # fmt: skip
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(*argv, cwd=ROOT, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        async with asyncio.timeout(STUCK):
            await ping(base)
        # Answered while the storage's login still waits for a greeting (its driver
        # gives up after 20 s): the start did not wait for it.
        assert await storage_status(base, "/slow") == "loading", tail(log_path)
    finally:
        process.terminate()
        async with asyncio.timeout(STUCK):
            await process.wait()
