"""Clients that open archive members and never read them hold no thread that
listings, downloads and searches need: a real server, real sockets."""

from __future__ import annotations

import asyncio
import io
import os
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from manifold.concurrency import ARCHIVE_POOL
from manifold.container import Services
from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.conftest import Api

MiB = 1 << 20
# Answers that come at all come within this; a stalled server takes minutes.
ANSWERS_WITHIN = 20


def zeros_zip(member: str, size: int) -> bytes:
    """A small zip holding ``size`` zero bytes: far more than any socket buffers."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open(member, "w", force_zip64=True) as file,
    ):
        for _ in range(size // MiB):
            file.write(bytes(MiB))
    return out.getvalue()


async def idle_reader(url: str, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that asks for ``path`` and reads nothing past the answer's head."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), ANSWERS_WITHIN)
    assert head.startswith(b"HTTP/1.1 200"), head
    return reader, writer


@pytest.fixture
async def idle_members(
    live_root: tuple[str, Path], api: Api, services: Services
) -> AsyncIterator[tuple[str, Path]]:
    """More idle ``/ae`` streams than the archive pool and the default executor have threads."""
    url, root = live_root
    (root / "zeros.zip").write_bytes(zeros_zip("zeros.bin", 64 * MiB))
    sign = services.archive_signer.sign("/local/zeros.zip")
    path = f"/ae/local/zeros.zip?inner={quote('/zeros.bin')}&sign={quote(sign)}"
    default_pool = min(32, (os.cpu_count() or 1) + 4)
    count = max(ARCHIVE_POOL.size, default_pool) + 2
    opened = [await idle_reader(url, path) for _ in range(count)]
    await asyncio.sleep(0.5)  # let the server fill what the sockets hold
    try:
        yield url, root
    finally:
        for _, writer in opened:
            writer.close()


async def test_idle_member_streams_stall_no_listing_download_or_search(
    idle_members: tuple[str, Path], api: Api
) -> None:
    url, _ = idle_members
    await save_settings(api, search_index="database", sign_all="false")
    headers = {"Authorization": await api.login()}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=ANSWERS_WITHIN) as client:
        listed = await client.post("/api/fs/list", json={"path": "/local", "refresh": True})
        assert listed.json()["code"] == 200
        assert "keep.txt" in [e["name"] for e in listed.json()["data"]["content"]]
        got = await client.get("/d/local/keep.txt")
        assert got.content == b"keep"
        body = {"parent": "/", "keywords": "keep", "page": 1, "per_page": 10, "password": ""}
        found = await client.post("/api/fs/search", json=body)
        assert found.json()["code"] == 200, found.json()
        members = await client.post("/api/fs/archive/list", json={"path": "/local/zeros.zip"})
        assert members.json()["code"] == 200, members.json()


async def test_a_range_far_into_a_member_is_read_in_short_steps(
    api: Api, services: Services, tmp_path: Path
) -> None:
    root = make_tree(tmp_path / "root", {"keep.txt": "keep"})
    (root / "zeros.zip").write_bytes(zeros_zip("zeros.bin", 40 * MiB))
    await api.as_admin()
    await mount_local(api, "/local", root)
    sign = services.archive_signer.sign("/local/zeros.zip")
    start = 39 * MiB + 5
    got = await api.client.get(
        "/ae/local/zeros.zip",
        params={"inner": "/zeros.bin", "sign": sign},
        headers={"Range": f"bytes={start}-{start + 9}"},
    )
    assert got.status_code == 206
    assert got.content == bytes(10)
