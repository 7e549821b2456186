"""The SFTP server answers each open file's requests in its own lane: many requests in
flight, on one file or several, lose and reorder nothing; a write is seen by the close
and the reads sent after it; a client gone mid-transfer leaves nothing; and a file
whose storage makes it wait holds up no other file."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from manifold.container import Services
from manifold.protocols.sftp.dispatch import missing_internals
from tests.drivers.sftp_server import SshServer
from tests.protocols.sftp_helpers import Live, add_user, live_manifold, over_limited_sftp

ROOT = Path(__file__).resolve().parents[2]
GUARD = 60.0  # seconds: a guard against a hang, not a timing assertion
BLOCK = 32768


@pytest.fixture
async def live(services: Services, tmp_path: Path) -> AsyncIterator[Live]:
    await add_user(services, "sam")
    async with live_manifold(services, tmp_path / "disk") as started:
        yield started


def test_asyncssh_is_the_one_the_request_lanes_are_built_on() -> None:
    """The lanes subclass asyncssh's SFTP server internals: another asyncssh must be
    checked against them (manifold/protocols/sftp/dispatch.py) before the pin moves."""
    pinned = re.search(r"^asyncssh==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert pinned is not None
    assert asyncssh.__version__ == pinned.group(1)
    assert missing_internals() == []


async def test_writes_in_flight_on_two_files_then_reads_in_flight_are_exact(live: Live) -> None:
    picker = random.Random(21)
    datas = [picker.randbytes(200 * BLOCK + 999) for _ in range(2)]
    async with asyncio.timeout(GUARD), live.sftp("sam") as sftp:
        files = [await sftp.open(f"/local/many{i}.bin", "wb") for i in range(2)]
        writes = [
            files[i].write(datas[i][at : at + BLOCK], at)
            for at in range(0, len(datas[0]), BLOCK)
            for i in range(2)
        ]
        await asyncio.gather(*writes)  # all sent at once, the two files interleaved
        await asyncio.gather(*(f.close() for f in files))
        for i, data in enumerate(datas):
            async with sftp.open(f"/local/many{i}.bin", "rb") as f:
                spots = [picker.randrange(len(data)) for _ in range(300)]
                got = await asyncio.gather(*(f.read(BLOCK, at) for at in spots))
                assert got == [data[at : at + BLOCK] for at in spots]
    assert [(live.disk / f"many{i}.bin").read_bytes() for i in range(2)] == datas


async def test_a_close_and_an_open_sent_behind_writes_see_them(live: Live) -> None:
    """Writes, their file's close and an open of it, all on the wire before any answer
    (spoken raw: a client library sends its writes in its own time)."""
    data = random.Random(22).randbytes(40 * BLOCK + 5)
    async with asyncio.timeout(GUARD), live.connect("sam") as conn:
        raw = await RawSftp.start(conn)
        handle = raw.handle(await raw.call(OPEN, path("/local/behind.bin") + u32(0x1A) + u32(0)))
        ids = [
            raw.send(WRITE, string(handle) + u64(at) + string(data[at : at + BLOCK]))
            for at in range(0, len(data), BLOCK)
        ]
        ids.append(raw.send(CLOSE, string(handle)))
        opened = raw.send(OPEN, path("/local/behind.bin") + u32(0x01) + u32(0))
        statuses = [raw.status(await raw.answer(i)) for i in ids]
        assert statuses == [0] * len(ids)  # every write and the close: OK
        reading = raw.handle(await raw.answer(opened))
        got = await raw.call(READ, string(reading) + u64(0) + u32(len(data)))
        assert got[0] == DATA
        assert got[5:] == data


OPEN, CLOSE, READ, WRITE = 3, 4, 5, 6
STATUS, HANDLE, DATA = 101, 102, 103


def u32(value: int) -> bytes:
    return value.to_bytes(4, "big")


def u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


def string(value: bytes) -> bytes:
    return u32(len(value)) + value


def path(value: str) -> bytes:
    return string(value.encode())


class RawSftp:
    """SFTP version 3 spoken by hand over a session channel: requests go out in the
    order they are sent, and answers are matched to them by id."""

    def __init__(self, reader: asyncssh.SSHReader[bytes], writer: asyncssh.SSHWriter[bytes]):
        self.reader, self.writer = reader, writer
        self.next_id = 0
        self.answers: dict[int, bytes] = {}

    @classmethod
    async def start(cls, conn: asyncssh.SSHClientConnection) -> RawSftp:
        writer, reader, _ = await conn.open_session(subsystem="sftp", encoding=None)
        raw = cls(reader, writer)
        writer.write(u32(5) + bytes([1]) + u32(3))  # INIT, version 3
        version = await raw.packet()
        assert version[0] == 2
        return raw

    def send(self, kind: int, body: bytes) -> int:
        self.next_id += 1
        payload = bytes([kind]) + u32(self.next_id) + body
        self.writer.write(u32(len(payload)) + payload)
        return self.next_id

    async def call(self, kind: int, body: bytes) -> bytes:
        return await self.answer(self.send(kind, body))

    async def answer(self, request: int) -> bytes:
        """The answer to ``request``: its type byte, then what follows its id."""
        while request not in self.answers:
            packet = await self.packet()
            self.answers[int.from_bytes(packet[1:5], "big")] = packet[:1] + packet[5:]
        return self.answers.pop(request)

    async def packet(self) -> bytes:
        length = int.from_bytes(await self.reader.readexactly(4), "big")
        return await self.reader.readexactly(length)

    @staticmethod
    def status(answer: bytes) -> int:
        assert answer[0] == STATUS
        return int.from_bytes(answer[1:5], "big")

    @staticmethod
    def handle(answer: bytes) -> bytes:
        assert answer[0] == HANDLE, answer
        return answer[5:]


async def test_a_client_gone_with_writes_in_flight_leaves_nothing(live: Live) -> None:
    data = random.Random(23).randbytes(300 * BLOCK)
    async with asyncio.timeout(GUARD):
        conn = await live.connect("sam")
        sftp = await conn.start_sftp_client()
        file = await sftp.open("/local/gone.bin", "wb")
        writes = [
            asyncio.ensure_future(file.write(data[at : at + BLOCK], at))
            for at in range(0, len(data), BLOCK)
        ]
        await asyncio.sleep(0)  # the writes are on their way
        conn.abort()
        await asyncio.gather(*writes, return_exceptions=True)
        await wait_for_no_trace(live.disk, "gone")
        async with live.sftp("sam") as again:  # the server goes on serving
            assert not await again.exists("/local/gone.bin")
            assert await again.exists("/local")


async def wait_for_no_trace(disk: Path, name: str) -> None:
    """The session of a client that left ends on its own time: wait until its upload
    has left nothing on the disk (neither the file nor a part of it)."""
    for _ in range(100):
        if not [p for p in disk.iterdir() if name in p.name]:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{name}: a client that left mid-upload left {list(disk.iterdir())}")


# --- a file waiting for its storage ------------------------------------------------


@pytest.fixture
async def one_slot(services: Services, sshd: SshServer, tmp_path: Path) -> AsyncIterator[Live]:
    """Manifold's SFTP server with the sshd's folder at ``/remote``, on a storage that
    takes one upload at a time and gives an idle one up after 10 seconds."""
    async with over_limited_sftp(services, sshd, tmp_path / "disk", "OneSlotSFTP", 1, 10.0) as live:
        yield live


async def test_a_file_waiting_for_its_storage_holds_up_no_other(
    one_slot: Live, sshd: SshServer
) -> None:
    """``second`` waits for the storage's only upload slot, which ``first`` holds until
    its close: the close, sent behind ``second``'s writes, must not wait behind them
    (it did when every request waited for the one before: ``first`` sat idle until its
    storage gave it up)."""
    first_data = b"the first file"
    second_data = random.Random(24).randbytes(12 << 20)  # more than an upload queues
    step = 256 << 10
    flags = u32(0x1A) + u32(0)  # write, create, truncate; no attributes
    async with asyncio.timeout(GUARD), one_slot.connect("sam") as conn:
        raw = await RawSftp.start(conn)
        first = raw.handle(await raw.call(OPEN, path("/remote/first.bin") + flags))
        wrote = await raw.call(WRITE, string(first) + u64(0) + string(first_data))
        assert raw.status(wrote) == 0  # its upload has started, holding the slot
        second = raw.handle(await raw.call(OPEN, path("/remote/second.bin") + flags))
        writes = [
            raw.send(WRITE, string(second) + u64(at) + string(second_data[at : at + step]))
            for at in range(0, len(second_data), step)
        ]
        assert raw.status(await raw.call(CLOSE, string(first))) == 0
        assert [raw.status(await raw.answer(i)) for i in writes] == [0] * len(writes)
        assert raw.status(await raw.call(CLOSE, string(second))) == 0
    served = sshd.folder / "served"
    assert (served / "first.bin").read_bytes() == first_data
    assert (served / "second.bin").read_bytes() == second_data
