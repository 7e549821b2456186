"""Uploads through a real HTTP server: cut-off bodies and racing uploads to one name."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import httpx
import pytest

from tests.api.test_fs_write import leftovers
from tests.conftest import Api


async def settled(root: Path) -> list[str]:
    """Temporary files left below ``root`` once the server has finished with them."""
    for _ in range(500):
        found = leftovers(root)
        if not found:
            return found
        await asyncio.sleep(0.01)
    return leftovers(root)


async def test_upload_cut_off_mid_body_leaves_nothing(
    live_root: tuple[str, Path], api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    url, root = live_root
    host, port = url.removeprefix("http://").split(":")
    _reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        "PUT /api/fs/put HTTP/1.1\r\n"
        f"Host: {host}\r\n"
        f"Authorization: {api.token}\r\n"
        "File-Path: /local/cut.bin\r\n"
        "Content-Length: 10000000\r\n\r\n"
    )
    writer.write(head.encode() + b"x" * 3_000_000)
    await writer.drain()
    # Wait until the server has started writing the temporary file, then hang up.
    for _ in range(500):
        if leftovers(root):
            break
        await asyncio.sleep(0.01)
    writer.close()
    await writer.wait_closed()
    assert await settled(root) == []
    assert not (root / "cut.bin").exists()
    assert sorted(os.listdir(root)) == ["keep.txt"]
    # A client hanging up is not a server error.
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_concurrent_uploads_to_one_name_never_mix(
    live_root: tuple[str, Path], api: Api
) -> None:
    url, root = live_root
    size = 4 << 20
    bodies = [bytes([65 + i]) * size for i in range(4)]

    async def upload(client: httpx.AsyncClient, body: bytes) -> int:
        response = await client.put(
            f"{url}/api/fs/put",
            content=body,
            headers={"Authorization": api.token, "File-Path": "/local/race.bin"},
        )
        code: int = response.json()["code"]
        return code

    async with httpx.AsyncClient(timeout=60) as client:
        codes = await asyncio.gather(*(upload(client, b) for b in bodies))
    assert codes == [200] * len(bodies)
    final = (root / "race.bin").read_bytes()
    assert final in bodies
    assert await settled(root) == []


async def test_upload_reader_never_sees_a_partial_file(
    live_root: tuple[str, Path], api: Api
) -> None:
    url, root = live_root
    (root / "big.bin").write_bytes(b"o" * (8 << 20))
    seen: set[int] = set()
    done = asyncio.Event()

    async def watch() -> None:
        while not done.is_set():
            seen.add((root / "big.bin").stat().st_size)
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.put(
            f"{url}/api/fs/put",
            content=b"n" * (16 << 20),
            headers={"Authorization": api.token, "File-Path": "/local/big.bin"},
        )
    done.set()
    await watcher
    assert response.json()["code"] == 200
    assert seen <= {8 << 20, 16 << 20}
    assert (root / "big.bin").read_bytes() == b"n" * (16 << 20)
