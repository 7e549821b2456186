"""A back end that hangs holds only its own storage's threads (``Driver.run_blocking``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import quote

import pytest
from pydantic import BaseModel

from manifold.concurrency import DRIVER_POOL
from manifold.container import Services
from manifold.drivers.base import STORAGE_THREADS, DriverConfig, LinkArgs
from manifold.models import Link, Obj
from tests.conftest import Api
from tests.drivers.inert import InertDriver

WHEN = datetime(2024, 5, 1, tzinfo=UTC)
FILES = STORAGE_THREADS + DRIVER_POOL.size + 2
# Answers that come at all come within this; a starved server would wait for the gate.
ANSWERS_WITHIN = 20
GATE = threading.Event()


class GateOptions(BaseModel):
    stuck: bool = False


class GateDriver(InertDriver[GateOptions]):
    """Test-only: each link is a blocking call, which waits for ``GATE`` when stuck."""

    async def list(self, dir: Obj) -> list[Obj]:
        return [Obj(f"f{i}", 4, False, WHEN, path=f"/f{i}") for i in range(FILES)]

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        await self.run_blocking(self._connect)
        return Link(reader=self._read)

    def _connect(self) -> None:
        if self.options.stuck:
            GATE.wait(ANSWERS_WITHIN * 3)

    async def _read(self, offset: int, length: int | None) -> AsyncIterator[bytes]:
        yield b"data"[offset : None if length is None else offset + length]


@pytest.fixture
async def gated(api: Api, services: Services) -> AsyncIterator[Api]:
    config = DriverConfig(name="GateTest", only_proxy=True)
    services.registry.register("GateTest", GateDriver, GateOptions, config)
    await api.as_admin()
    for mount, stuck in (("/stuck", "true"), ("/free", "false")):
        addition = f'{{"stuck": {stuck}}}'
        body = {"mount_path": mount, "driver": "GateTest", "addition": addition}
        assert (await api.post("/api/admin/storage/create", body))["code"] == 200
    GATE.clear()
    try:
        yield api
    finally:
        GATE.set()


async def download(api: Api, path: str) -> bytes:
    sign = api.services.signer.sign(path)
    response = await api.client.get(f"/d{quote(path)}", params={"sign": sign})
    assert response.status_code == 200, response.text
    return response.content


async def test_a_hung_storage_leaves_other_storages_their_threads(gated: Api) -> None:
    assert (await gated.post("/api/fs/list", {"path": "/stuck"}))["code"] == 200
    hung = [asyncio.create_task(download(gated, f"/stuck/f{i}")) for i in range(FILES)]
    await asyncio.sleep(0.3)  # every stuck link is waiting in a thread
    try:
        async with asyncio.timeout(ANSWERS_WITHIN):
            assert await download(gated, "/free/f0") == b"data"
            listed = await gated.post("/api/fs/list", {"path": "/free", "refresh": True})
            assert listed["code"] == 200
    finally:
        GATE.set()
        assert await asyncio.gather(*hung) == [b"data"] * FILES
