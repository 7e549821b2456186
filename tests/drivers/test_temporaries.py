"""The driver runtime's temporaries (``manifold.drivers.temporaries``), over a folder
on this machine as the "server": its primitive deletes a path, and can be told to
fail, hang or be slow, as a server that went away would be."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from manifold.drivers import temporaries
from manifold.drivers.base import RESERVED_PREFIX, Seen, Temporaries, Temporary
from manifold.errors import TemporaryFailure

AN_HOUR_AGO = datetime.now(UTC) - timedelta(hours=1)


class Disk:
    """A folder standing for a server, and how its deletions go."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.down = False  # deletions fail as with a server that is away
        self.hold: asyncio.Event | None = None  # deletions wait for it
        self.deleted: list[str] = []

    async def delete(self, path: str, is_dir: bool) -> bool:
        if self.hold is not None:
            await self.hold.wait()
        if self.down:
            raise TemporaryFailure("the server is away")
        self.deleted.append(path)
        full = self.root / path.lstrip("/")
        if is_dir:
            shutil.rmtree(full, ignore_errors=True)
        else:
            full.unlink(missing_ok=True)
        return True

    def make(self, temp: Temporary, data: bytes = b"half") -> None:
        (self.root / temp.path.lstrip("/")).write_bytes(data)

    def names(self) -> list[str]:
        return sorted(os.listdir(self.root))


@pytest.fixture
def disk(tmp_path: Path) -> Disk:
    return Disk(tmp_path)


@pytest.fixture
def temps(disk: Disk) -> Temporaries:
    return Temporaries("test://server", disk.delete)


async def test_a_temporary_is_reserved_and_fresh(temps: Temporaries) -> None:
    one, two = temps.new("/a"), temps.new("/a", is_dir=True)
    assert one.path.startswith(f"/a/{RESERVED_PREFIX}") and two.is_dir
    assert one.path != two.path


async def test_a_failed_write_discards_what_it_made(disk: Disk, temps: Temporaries) -> None:
    temp = temps.new("/")
    with pytest.raises(RuntimeError):
        async with temps.writing(temp):
            temp.made = True
            disk.make(temp)
            raise RuntimeError("the upload broke")
    assert disk.names() == []


async def test_nothing_is_deleted_before_a_request_could_make_it(
    disk: Disk, temps: Temporaries
) -> None:
    with pytest.raises(RuntimeError):
        async with temps.writing(temps.new("/")):
            raise RuntimeError("refused before anything was sent")
    assert disk.deleted == []


async def test_a_write_that_succeeds_keeps_what_it_made(disk: Disk, temps: Temporaries) -> None:
    temp = temps.new("/")
    async with temps.writing(temp):
        temp.made = True
        disk.make(temp)
    assert disk.names() == [temp.path.lstrip("/")]


async def test_a_cancelled_write_leaves_nothing_even_when_cancelled_again(
    disk: Disk, temps: Temporaries
) -> None:
    temp = temps.new("/")
    started = asyncio.Event()
    disk.hold = asyncio.Event()  # the deletion takes a while

    async def upload() -> None:
        async with temps.writing(temp):
            temp.made = True
            disk.make(temp)
            started.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(upload())
    await started.wait()
    task.cancel()
    await asyncio.sleep(0.05)  # the deletion has begun and waits
    task.cancel()  # cancelled again: the wait stops, not the deletion
    with pytest.raises(asyncio.CancelledError):
        await task
    assert disk.names() == [temp.path.lstrip("/")]
    disk.hold.set()
    await temps.drain(30)
    assert disk.names() == []


async def test_the_wait_for_a_hung_deletion_is_bounded(
    disk: Disk, temps: Temporaries, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(temporaries, "DISCARD_WAIT", 0.2)
    temp = temps.new("/")
    temp.made = True
    disk.make(temp)
    disk.hold = asyncio.Event()  # never set: the server hangs
    started = time.monotonic()
    await temps.discard(temp)
    assert time.monotonic() - started < 30
    await temps.drain(0.1)  # given up when dropped: remembered for later
    assert temps.take_leftovers() == [(temp.path, False)]


async def test_what_could_not_be_deleted_is_deleted_once_back(
    disk: Disk, temps: Temporaries
) -> None:
    temp = temps.new("/")
    temp.made = True
    disk.make(temp)
    disk.down = True
    await temps.discard(temp)
    await temps.retry()  # still away: kept for the next try
    assert disk.names() == [temp.path.lstrip("/")]
    disk.down = False
    await temps.retry()
    assert disk.names() == []
    await temps.retry()
    assert disk.deleted == [temp.path]  # once gone, never tried again


async def test_a_blocking_driver_retries_in_its_own_thread(disk: Disk, temps: Temporaries) -> None:
    temps.remember("/gone", False)
    temps.remember("/kept", False)
    tried: list[str] = []

    def delete(path: str, is_dir: bool) -> bool:
        tried.append(path)
        if path == "/kept":
            raise OSError("the server is away")
        return True

    await asyncio.to_thread(temps.retry_now, delete)
    assert sorted(tried) == ["/gone", "/kept"]
    assert temps.take_leftovers() == [("/kept", False)]


async def test_a_cut_write_is_deleted_again_when_the_server_makes_it_anew(
    disk: Disk, temps: Temporaries
) -> None:
    temps = Temporaries("test://server", disk.delete, recheck=(3600.0,))
    temp = temps.new("/")
    temp.made = temp.pending = True
    disk.make(temp)
    await temps.discard(temp)
    assert disk.names() == []
    disk.make(temp, b"the rest the server was still writing")
    await temps.drain(30)  # the second look is made at once when dropped
    assert disk.names() == []


async def test_stale_ones_are_swept_fresh_and_own_ones_kept(disk: Disk, temps: Temporaries) -> None:
    stale, fresh, own = temps.new("/"), temps.new("/"), temps.new("/")
    folder = temps.new("/", is_dir=True)
    for temp in (stale, fresh, own):
        disk.make(temp)
    (disk.root / folder.path.lstrip("/") / "inside").mkdir(parents=True)
    seen = [
        Seen(stale.path, False, AN_HOUR_AGO),
        Seen(fresh.path, False, datetime.now(UTC)),
        Seen(own.path, False, AN_HOUR_AGO),
        Seen(folder.path, True, AN_HOUR_AGO),
    ]
    # Another storage of this process on the same server is writing ``own``.
    with Temporaries("test://server/", disk.delete).marked(own):
        await temps.sweep(seen)
    assert disk.names() == sorted(t.path.lstrip("/") for t in (fresh, own))


async def test_an_entry_without_a_time_is_never_taken_for_stale(
    disk: Disk, temps: Temporaries
) -> None:
    assert temps.stale([Seen("/x", False, None)]) == []


async def test_keys_follow_the_servers_letter_case_rule(disk: Disk) -> None:
    exact = Temporaries("test://server", disk.delete)
    folded = Temporaries("test://server", disk.delete, casefold=True)
    with exact.marked(Temporary("/A/T")):
        assert not exact.in_flight("/a/t")
        assert exact.in_flight("/A/T")
    with folded.marked(Temporary("/A/T")):
        assert folded.in_flight("/a/t")
