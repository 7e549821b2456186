"""A remote folder far bigger than most: its listing streams in pages parsed off the
event loop, so other clients are served meanwhile, and one past the server's
``max_listing_entries`` is refused once the bound is reached, the rest never read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Api, open_api, start_services
from tests.drivers.plain_dav_server import PlainDav, addition, plain_dav
from tests.fixtures.processes import running

ENTRIES = 200_000
# The event loop never waits this long between two ticks while the folder is listed
# (the listing parsed on the loop held it for several seconds).
WORST_GAP = 1.0
# Bytes of the 200,000 entries' answer (about 60 MB) that may go out before a listing
# refused at 1,000 entries stops reading: what the bound let in and the client's read-ahead
# (2 MiB), plus the kernel's socket buffers, which Linux grows up to tcp_rmem's 32 MiB
# here. All of it going out would mean the answer was read to its end.
READ_AT_MOST = 48 << 20


@pytest.fixture(scope="module")
def big_dav(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlainDav]:
    folder = tmp_path_factory.mktemp("big-dav")
    with running(plain_dav(folder, ENTRIES, "http://127.0.0.1:9/")) as server:
        yield server


async def mounted(api: Api, url: str) -> str:
    return await api.mount("WebDav", "/huge", addition(url))


async def worst_gap(stop: asyncio.Event) -> float:
    """The longest the event loop went without running this task, until ``stop``."""
    worst, last = 0.0, time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        worst, last = max(worst, now - last), now
    return worst


async def test_a_huge_folder_lists_in_full_while_the_event_loop_keeps_running(
    api: Api, big_dav: PlainDav
) -> None:
    admin = await mounted(api, big_dav.url)
    stop = asyncio.Event()
    ticker = asyncio.ensure_future(worst_gap(stop))
    body = {"path": "/huge/big", "page": 1, "per_page": 50, "refresh": True}
    try:
        listed = await api.post("/api/fs/list", body, token=admin)
    finally:
        stop.set()
    gap = await ticker
    assert listed["code"] == 200, listed
    assert listed["data"]["total"] == ENTRIES
    assert [o["name"] for o in listed["data"]["content"]][:2] == [
        "file-0000000.txt",
        "file-0000001.txt",
    ]
    assert gap < WORST_GAP, f"the event loop stalled for {gap:.2f}s"


@pytest.fixture
async def bounded(tmp_path: Path) -> AsyncIterator[Api]:
    env = {"MANIFOLD_MAX_LISTING_ENTRIES": "1000"}
    services = await start_services(tmp_path / "data", env=env)
    try:
        async with open_api(services) as api:
            yield api
    finally:
        await services.stop()


async def test_a_folder_past_the_bound_is_refused_naming_it_and_read_no_further(
    bounded: Api, big_dav: PlainDav
) -> None:
    admin = await mounted(bounded, big_dav.url)
    listed = await bounded.post("/api/fs/list", {"path": "/huge/big"}, token=admin)
    assert listed["code"] == 500
    assert "/huge/big holds more than 1000 entries" in listed["message"]
    assert "max_listing_entries" in listed["message"]
    small = await bounded.post("/api/fs/list", {"path": "/huge"}, token=admin)
    assert small["code"] == 200, small
    async with httpx.AsyncClient() as client:
        sent = int((await client.get(f"{big_dav.url}/sent")).text)
    assert 0 < sent < READ_AT_MOST
