"""Back ends whose links are neither a local file nor a URL: a driver's range reader.

``/d`` and ``/p`` serve such a file with ranges, and copies read it, through the one
range reader (``streams.open_range``); what a reader is asked for is checked too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

import pytest
from pydantic import BaseModel

from manifold.container import Services
from manifold.drivers.base import DriverConfig, LinkArgs
from manifold.models import Link, Obj
from tests.api.fs_helpers import mount_local
from tests.conftest import Api
from tests.drivers.inert import InertDriver

PAYLOAD = bytes(range(256)) * 1000
WHEN = datetime(2024, 5, 1, tzinfo=UTC)


class ReaderOptions(BaseModel):
    pass


class ReaderDriver(InertDriver[ReaderOptions]):
    """Test-only: one file held in memory, readable only through its link's reader."""

    asked: ClassVar[list[tuple[int, int | None]]] = []
    closed: ClassVar[int] = 0

    async def list(self, dir: Obj) -> list[Obj]:
        return [Obj("blob.bin", len(PAYLOAD), False, WHEN, path="/blob.bin")]

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link(reader=self._read)

    async def _read(self, offset: int, length: int | None) -> AsyncIterator[bytes]:
        type(self).asked.append((offset, length))
        end = len(PAYLOAD) if length is None else min(len(PAYLOAD), offset + length)
        try:
            for start in range(offset, end, 7000):
                yield PAYLOAD[start : min(start + 7000, end)]
        finally:
            type(self).closed += 1


@pytest.fixture
async def reader_api(api: Api, services: Services) -> Api:
    ReaderDriver.asked.clear()
    config = DriverConfig(name="ReaderTest", only_proxy=True)
    services.registry.register("ReaderTest", ReaderDriver, ReaderOptions, config)
    await api.as_admin()
    body = {"mount_path": "/r", "driver": "ReaderTest", "addition": "{}"}
    created = await api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created
    return api


def signed(api: Api, path: str) -> str:
    return f"{quote(path)}?sign={api.services.signer.sign(path)}"


@pytest.mark.parametrize("prefix", ["/d", "/p"])
async def test_a_reader_file_is_served_whole(reader_api: Api, prefix: str) -> None:
    response = await reader_api.client.get(prefix + signed(reader_api, "/r/blob.bin"))
    assert response.status_code == 200
    assert response.content == PAYLOAD
    assert response.headers["content-length"] == str(len(PAYLOAD))
    assert response.headers["accept-ranges"] == "bytes"
    assert "blob.bin" in response.headers["content-disposition"]


@pytest.mark.parametrize(
    ("header", "start", "stop"),
    [("bytes=10-19", 10, 20), ("bytes=-5", len(PAYLOAD) - 5, len(PAYLOAD)),
     ("bytes=255990-", 255990, len(PAYLOAD))],
)  # fmt: skip
async def test_a_range_asks_the_reader_for_that_range_only(
    reader_api: Api, header: str, start: int, stop: int
) -> None:
    url = "/d" + signed(reader_api, "/r/blob.bin")
    response = await reader_api.client.get(url, headers={"Range": header})
    assert response.status_code == 206
    assert response.content == PAYLOAD[start:stop]
    assert response.headers["content-range"] == f"bytes {start}-{stop - 1}/{len(PAYLOAD)}"
    assert ReaderDriver.asked == [(start, stop - start)]


async def test_a_range_past_the_end_is_unsatisfiable(reader_api: Api) -> None:
    url = "/d" + signed(reader_api, "/r/blob.bin")
    response = await reader_api.client.get(url, headers={"Range": f"bytes={len(PAYLOAD)}-"})
    assert response.status_code == 416
    assert response.headers["content-range"] == f"bytes */{len(PAYLOAD)}"
    assert ReaderDriver.asked == []


async def test_head_reads_nothing(reader_api: Api) -> None:
    response = await reader_api.client.head("/d" + signed(reader_api, "/r/blob.bin"))
    assert response.status_code == 200
    assert response.headers["content-length"] == str(len(PAYLOAD))
    assert response.content == b""
    assert ReaderDriver.asked == []


async def test_a_copy_from_a_reader_storage_is_exact(
    reader_api: Api, services: Services, tmp_path: Path
) -> None:
    (tmp_path / "dst").mkdir()
    await mount_local(reader_api, "/local", tmp_path / "dst")
    closed = ReaderDriver.closed
    await services.tree.copy("/r/blob.bin", "/local")
    assert (tmp_path / "dst" / "blob.bin").read_bytes() == PAYLOAD
    assert ReaderDriver.closed == closed + 1
