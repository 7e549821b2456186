"""Files opened for writing through the SFTP server on a remote storage (an SFTP
storage on a real sshd) hold nothing of the storage until they are written: clients
open before they write (editors, WinSCP, sshfs), and a put started at the open would
take one of the storage's upload slots and fail as idle meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.container import Services
from tests.drivers.sftp_server import SshServer
from tests.protocols.sftp_helpers import Live, over_limited_sftp

SLOTS = 2
IDLE_SECONDS = 1.0
GUARD = 60.0  # seconds: a guard against a hang, not a timing assertion


@pytest.fixture
async def live(services: Services, sshd: SshServer, tmp_path: Path) -> AsyncIterator[Live]:
    """Manifold's SFTP server, with the sshd's folder mounted at ``/remote`` by a storage
    of ``SLOTS`` upload slots and an idle limit of ``IDLE_SECONDS``."""
    disk = tmp_path / "disk"
    async with over_limited_sftp(services, sshd, disk, "SmallSFTP", SLOTS, IDLE_SECONDS) as live:
        yield live


async def test_more_files_open_for_writing_than_upload_slots(live: Live, sshd: SshServer) -> None:
    count = SLOTS + 2
    async with asyncio.timeout(GUARD), live.sftp("sam") as sftp:
        files = [await sftp.open(f"/remote/f{i}.txt", "wb") for i in range(count)]
        for i in reversed(range(count)):  # the last opened first: no slot is held for it
            await files[i].write(f"file {i}".encode())
            await files[i].close()
    served = sshd.folder / "served"
    assert {p.name: p.read_text() for p in served.iterdir()} == {
        f"f{i}.txt": f"file {i}" for i in range(count)
    }


async def test_a_file_idle_before_its_first_write_is_stored(live: Live, sshd: SshServer) -> None:
    async with asyncio.timeout(GUARD), live.sftp("sam") as sftp:
        file = await sftp.open("/remote/late.txt", "wb")
        await asyncio.sleep(IDLE_SECONDS * 3)  # an editor that opens, then thinks
        await file.write(b"written at last")
        await file.close()
        empty = await sftp.open("/remote/empty.txt", "wb")
        await empty.close()
    assert (sshd.folder / "served" / "late.txt").read_bytes() == b"written at last"
    assert (sshd.folder / "served" / "empty.txt").read_bytes() == b""
