"""A slow link to each remote back end (added latency, a bandwidth cap): every call
still succeeds, only slower, and well within bounds: slow is not stalled."""

from __future__ import annotations

import asyncio
import secrets
import time
from urllib.parse import quote

import pytest

from tests.api.fs_helpers import fs_list, names
from tests.api.test_fs_write import put
from tests.faults.backends import Backend
from tests.faults.conftest import Site, on_every_backend

PAYLOAD = secrets.token_bytes(192 * 1024)
LATENCY = 0.05  # seconds added to every chunk, each way
RATE = 128 * 1024  # bytes a second, each way: the payload takes seconds
BOUND = 90.0


@pytest.mark.parametrize("slowness", ["latency", "bandwidth"])
async def test_a_slow_link_is_slow_but_every_call_succeeds(site: Site, slowness: str) -> None:
    problems = await on_every_backend(site, lambda b: _bounded(site, b, slowness))
    assert not problems, problems


async def _bounded(site: Site, backend: Backend, slowness: str) -> None:
    proxy = backend.proxy
    if slowness == "latency":
        proxy.latency(LATENCY)
    else:
        proxy.bandwidth(RATE)
    try:
        started = time.monotonic()
        async with asyncio.timeout(BOUND):
            await _every_call(site, backend, f"{backend.mount}/slow-{slowness}")
        assert time.monotonic() - started < BOUND
    finally:
        proxy.clear()


async def _every_call(site: Site, backend: Backend, folder: str) -> None:
    api = site.api
    assert (await put(api, f"{folder}/a.bin", PAYLOAD))["code"] == 200
    assert names(await fs_list(api, folder, refresh=True)) == ["a.bin"]
    path = f"{folder}/a.bin"
    signed = f"/p{quote(path)}?sign={api.services.signer.sign(path)}"
    whole = await api.client.get(signed)
    assert (whole.status_code, whole.content == PAYLOAD) == (200, True)
    part = await api.client.get(signed, headers={"Range": "bytes=100-60099"})
    assert (part.status_code, part.content) == (206, PAYLOAD[100:60100])
    assert (await api.post("/api/fs/mkdir", {"path": f"{folder}/copies"}))["code"] == 200
    copied = await api.post(
        "/api/fs/copy", {"src_dir": folder, "dst_dir": f"{folder}/copies", "names": ["a.bin"]}
    )
    assert copied["code"] == 200, copied
    for task in (copied["data"] or {}).get("tasks") or []:
        await api.services.tasks.wait_done(task["id"])
    copies = await backend.files(f"{folder.removeprefix(backend.mount)}/copies")
    assert {k: v for k, v in copies.items() if k != ".alist"} == {"a.bin": len(PAYLOAD)}
    removed = await api.post("/api/fs/remove", {"dir": folder, "names": ["a.bin"]})
    assert removed["code"] == 200, removed
    assert names(await fs_list(api, folder, refresh=True)) == ["copies"]
