"""The SFTP server reads ahead and gathers writes in windows: every read, in order or
at random offsets, and every upload, in blocks of any size, stays byte-exact, and an
upload still lands only at its close."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from manifold.container import Services
from tests.protocols.sftp_helpers import Live, add_user, live_manifold

SIZE = 3 * (1 << 20) + 12345  # over three windows, ending inside one


@pytest.fixture
async def live(services: Services, tmp_path: Path) -> AsyncIterator[Live]:
    await add_user(services, "sam")
    async with live_manifold(services, tmp_path / "disk") as started:
        yield started


@pytest.fixture
def payload(live: Live) -> bytes:
    data = random.Random(7).randbytes(SIZE)
    (live.disk / "random.bin").write_bytes(data)
    return data


def blocks(size: int, seed: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of blocks of uneven sizes covering ``size`` bytes in order."""
    picker, at, out = random.Random(seed), 0, []
    while at < size:
        length = min(picker.choice((1, 4096, 32768, 65536, 100_003, 300_000)), size - at)
        out.append((at, length))
        at += length
    return out


async def test_reads_in_order_and_at_random_offsets_are_exact(live: Live, payload: bytes) -> None:
    picker = random.Random(11)
    async with live.sftp("sam") as sftp, sftp.open("/local/random.bin", "rb") as f:
        for offset, length in blocks(SIZE, 3):  # in order, across window edges
            assert await f.read(length, offset) == payload[offset : offset + length]
        for _ in range(200):  # anywhere, runs in order now and then
            offset = picker.randrange(SIZE + 10)
            for _ in range(picker.choice((1, 1, 3))):
                length = picker.choice((1, 777, 32768, 40_000, 1 << 20, 2 << 20))
                assert await f.read(length, offset) == payload[offset : offset + length]
                offset += length


async def test_many_reads_in_flight_are_exact(live: Live, payload: bytes, tmp_path: Path) -> None:
    local = tmp_path / "got.bin"
    async with live.sftp("sam") as sftp:
        await sftp.get("/local/random.bin", local, block_size=32768, max_requests=64)
    assert local.read_bytes() == payload


async def test_uploads_in_uneven_blocks_are_exact(live: Live) -> None:
    data = random.Random(5).randbytes(SIZE)
    async with live.sftp("sam") as sftp:
        async with sftp.open("/local/up.bin", "wb") as f:
            for offset, length in blocks(SIZE, 9):
                await f.write(data[offset : offset + length], offset)
        assert (await sftp.stat("/local/up.bin")).size == SIZE
    assert (live.disk / "up.bin").read_bytes() == data


async def test_many_writes_in_flight_are_exact(live: Live, tmp_path: Path) -> None:
    data = random.Random(6).randbytes(SIZE)
    (tmp_path / "source.bin").write_bytes(data)
    async with live.sftp("sam") as sftp:
        await sftp.put(tmp_path / "source.bin", "/local/put.bin", block_size=32768, max_requests=64)
    assert (live.disk / "put.bin").read_bytes() == data


async def test_an_upload_lands_only_at_its_close(live: Live) -> None:
    data = random.Random(8).randbytes(SIZE)
    async with live.sftp("sam") as sftp:
        async with sftp.open("/local/late.bin", "wb") as f:
            await f.write(data, 0)
            assert not (live.disk / "late.bin").exists()
        assert (await sftp.stat("/local/late.bin")).size == SIZE
    assert (live.disk / "late.bin").read_bytes() == data


async def test_a_gap_after_gathered_blocks_is_refused_and_nothing_lands(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        f = await sftp.open("/local/gap.bin", "wb")
        await f.write(b"a" * 1_500_000, 0)
        with pytest.raises(asyncssh.SFTPFailure):
            await f.write(b"b" * 100, 1_600_000)
        with pytest.raises(asyncssh.SFTPFailure):
            await f.close()
    assert not (live.disk / "gap.bin").exists()
