"""What a replace or a move parks under a hidden name is recorded, and what a process
that died mid-way left parked is recovered: back home, removed when it is garbage, or
shown beside its home when it is the only copy. Never lost, never left hidden.

A crash is played by a Local storage whose N-th change never returns (the operation
stops there, with no undoing and no clean-up, as under SIGKILL); recovery then runs
as it does at the next start for an owner found dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest

from manifold.container import Services
from manifold.db.parking_repo import Parking, ParkingRepo
from manifold.drivers.local.driver import LocalDriver
from manifold.drivers.local.meta import CONFIG, Addition
from manifold.models import Obj, Storage
from manifold.paths import PARKING_PREFIX
from manifold.services.fs.parking_recovery import Recovery, recovered_name
from tests.api.fs_helpers import make_tree
from tests.protocols.dav_helpers import mount

DEAD = "dead-host/0123abcd"
WAIT = 60.0  # seconds: a guard on a loaded machine, not a timing check


def parked(root: Path) -> list[str]:
    """Every parked name under ``root``, at any depth."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(f"{PARKING_PREFIX}*"))


def recovery(services: Services) -> Recovery:
    found = services.tree.parkings.recovery
    assert found is not None
    return found


async def recover_dead(services: Services, owner: str = DEAD) -> None:
    """What a start does for an owner found dead, waited for."""
    await recovery(services).of_owners([owner])
    await recovery(services).settled()


# -- a crash at each step ------------------------------------------------------------


class FreezingLocal(LocalDriver):
    """Test-only: a Local whose change number ``freeze_at`` (counted from 1 over
    make_dir, rename, move, copy and remove) waits, as if the process died just
    before it (``frozen`` is set then), until ``thawed``: then it fails, for the
    operation to end before the test does."""

    freeze_at: ClassVar[int] = 0
    calls: ClassVar[int] = 0
    frozen: ClassVar[asyncio.Event] = asyncio.Event()
    thawed: ClassVar[asyncio.Event] = asyncio.Event()

    async def _step(self) -> None:
        cls = type(self)
        cls.calls += 1
        if cls.calls == cls.freeze_at:
            cls.frozen.set()
            await cls.thawed.wait()
            raise OSError("the process was gone by now")

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        await self._step()
        return await super().make_dir(parent, name)

    async def rename(self, src: Obj, new_name: str) -> Obj:
        await self._step()
        return await super().rename(src, new_name)

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        await self._step()
        return await super().move(src, dst_dir)

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        await self._step()
        return await super().copy(src, dst_dir)

    async def remove(self, obj: Obj) -> None:
        await self._step()
        await super().remove(obj)


async def freezing(services: Services, root: Path, freeze_at: int) -> None:
    FreezingLocal.freeze_at, FreezingLocal.calls = freeze_at, 0
    FreezingLocal.frozen, FreezingLocal.thawed = asyncio.Event(), asyncio.Event()
    config = dataclasses.replace(CONFIG, name="FreezingLocal")
    services.registry.register("FreezingLocal", FreezingLocal, Addition, config)
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, "/f", "FreezingLocal", addition=addition))


@contextlib.asynccontextmanager
async def crashed(services: Services, operation: Awaitable[object]) -> AsyncIterator[None]:
    """Run ``operation`` until it freezes; recover as for a dead owner (this process's
    own owner id, which the frozen operation will never renew again); the frozen
    operation fails and ends after the checks."""
    running = asyncio.ensure_future(operation)
    await asyncio.wait_for(FreezingLocal.frozen.wait(), WAIT)
    try:
        await recover_dead(services, services.tasks.owner)
        yield
    finally:
        FreezingLocal.thawed.set()
        with contextlib.suppress(Exception):
            await running


# A folder moved over a folder, its own name taken in the target folder: parked on
# its way (1 rename), moved (2), the old one set aside (3), renamed home (4), the old
# one removed (5). What each crash leaves once recovered: the destination's content
# and what else the target folder holds.
MOVE_WINDOWS = {
    2: ("old", ["docs", "report"], True),  # parked on its way: back home at the source
    3: ("old", ["docs", "report", "report (recovered 1)"], False),  # the only copy shown
    4: ("new", ["docs", "report"], False),  # set aside: the moved one takes its name
    5: ("new", ["docs", "report"], False),  # home already: what was set aside goes
}


@pytest.mark.parametrize("freeze_at", sorted(MOVE_WINDOWS))
async def test_a_move_over_a_folder_killed_at_each_step_loses_nothing_and_hides_nothing(
    services: Services, tmp_path: Path, freeze_at: int
) -> None:
    root = make_tree(
        tmp_path / "f",
        {"x/docs/a.txt": "new", "y/docs/keep.txt": "keep", "y/report/a.txt": "old"},
    )
    await freezing(services, root, freeze_at)
    moving = services.tree.rename_to("/f/x/docs", "/f/y/report", replace=True)
    async with crashed(services, moving):
        content, listed, source_back = MOVE_WINDOWS[freeze_at]
        assert parked(root) == []
        assert (root / "y" / "report" / "a.txt").read_text() == content
        assert sorted(p.name for p in (root / "y").iterdir()) == listed
        assert (root / "x" / "docs" / "a.txt").exists() == source_back
        if "report (recovered 1)" in listed:
            assert (root / "y" / "report (recovered 1)" / "a.txt").read_text() == "new"
        assert (root / "y" / "docs" / "keep.txt").read_text() == "keep"
        assert await ParkingRepo(services.engine).all() == []


# A folder copied over a folder of the same storage: a folder made beside (1), the
# copy into it (2), its copy renamed on its way (3: the source's name is taken), moved
# (4), the old one set aside (5), the copy renamed home (6), the old one removed (7),
# the folder beside removed (8).
COPY_WINDOWS = {
    2: ("old", ["dst", "src"]),
    3: ("old", ["dst", "src"]),
    4: ("old", ["dst", "src"]),
    5: ("old", ["dst", "dst (recovered 1)", "src"]),
    6: ("new", ["dst", "src"]),
    7: ("new", ["dst", "src"]),
    8: ("new", ["dst", "src"]),
}


@pytest.mark.parametrize("freeze_at", sorted(COPY_WINDOWS))
async def test_a_copy_over_a_folder_killed_at_each_step_loses_nothing_and_hides_nothing(
    services: Services, tmp_path: Path, freeze_at: int
) -> None:
    root = make_tree(tmp_path / "f", {"c/src/a.txt": "new", "c/dst/a.txt": "old"})
    await freezing(services, root, freeze_at)
    copying = services.tree.copy_to("/f/c/src", "/f/c/dst", replace=True)
    async with crashed(services, copying):
        content, listed = COPY_WINDOWS[freeze_at]
        assert parked(root) == []
        assert (root / "c" / "dst" / "a.txt").read_text() == content
        assert sorted(p.name for p in (root / "c").iterdir()) == listed
        assert (root / "c" / "src" / "a.txt").read_text() == "new"
        assert await ParkingRepo(services.engine).all() == []


async def test_an_operation_that_ends_leaves_no_record(services: Services, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "a", {"x/docs/a.txt": "new", "y/docs/b": "", "y/r/a.txt": "old"})
    await mount(services, "/a", root)
    await services.tree.rename_to("/a/x/docs", "/a/y/r", replace=True)
    await services.tree.copy_to("/a/y/r", "/a/y/docs", replace=True)
    assert (root / "y" / "docs" / "a.txt").read_text() == "new"
    assert parked(root) == []
    assert await ParkingRepo(services.engine).all() == []


# -- the recovery rules, one by one --------------------------------------------------


async def record(
    services: Services,
    path: str,
    home: str,
    garbage: bool,
    *,
    owner: str = DEAD,
    lease: float = 3600.0,
    mount_path: str = "/a",
) -> Parking:
    """A record as an owner makes it before it parks, in the storage at ``mount_path``."""
    place = services.tree.place(mount_path)
    now = datetime.now(UTC)
    parking = Parking(
        id=secrets.token_hex(16),
        storage_id=place.mounted.storage.id,
        path=path,
        home=home,
        garbage=garbage,
        owner=owner,
        lease_until=now + timedelta(seconds=lease),
        created=now,
    )
    await ParkingRepo(services.engine).add(parking)
    return parking


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "a", {"y/keep.txt": "keep"})
    await mount(services, "/a", root)
    return root


def park(disk: Path, content: str, name: str = f"{PARKING_PREFIX}0001") -> Path:
    target = disk / "y" / name
    target.write_text(content)
    return target


async def records(services: Services) -> list[Parking]:
    return await ParkingRepo(services.engine).all()


async def test_a_record_of_what_is_gone_is_dropped(services: Services, disk: Path) -> None:
    await record(services, f"/y/{PARKING_PREFIX}0001", "report.txt", False)
    await recover_dead(services)
    assert await records(services) == []
    assert sorted(p.name for p in (disk / "y").iterdir()) == ["keep.txt"]


@pytest.mark.parametrize("garbage", [False, True], ids=["only-copy", "garbage"])
async def test_what_is_parked_goes_back_home_when_home_is_free(
    services: Services, disk: Path, garbage: bool
) -> None:
    park(disk, "mine")
    await record(services, f"/y/{PARKING_PREFIX}0001", "report.txt", garbage)
    await recover_dead(services)
    assert (disk / "y" / "report.txt").read_text() == "mine"
    assert parked(disk) == []
    assert await records(services) == []
    listed = await services.tree.listing("/a/y", refresh=True)
    assert "report.txt" in [obj.name for obj in listed[0]]


async def test_garbage_whose_home_is_taken_is_removed(services: Services, disk: Path) -> None:
    park(disk, "old")
    (disk / "y" / "report.txt").write_text("new")
    await record(services, f"/y/{PARKING_PREFIX}0001", "report.txt", True)
    await recover_dead(services)
    assert (disk / "y" / "report.txt").read_text() == "new"
    assert parked(disk) == []
    assert await records(services) == []


async def test_the_only_copy_whose_home_is_taken_is_shown_beside_it(
    services: Services, disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    park(disk, "mine")
    (disk / "y" / "report.txt").write_text("theirs")
    (disk / "y" / "report (recovered 1).txt").write_text("earlier")
    await record(services, f"/y/{PARKING_PREFIX}0001", "report.txt", False)
    await recover_dead(services)
    assert (disk / "y" / "report.txt").read_text() == "theirs"
    assert (disk / "y" / "report (recovered 1).txt").read_text() == "earlier"
    assert (disk / "y" / "report (recovered 2).txt").read_text() == "mine"
    assert parked(disk) == []
    assert await records(services) == []
    assert "report (recovered 2).txt" in caplog.text


async def test_a_folder_that_only_held_a_copy_is_removed(services: Services, disk: Path) -> None:
    holder = disk / "y" / f"{PARKING_PREFIX}0001"
    holder.mkdir()
    (holder / "copy.txt").write_text("half")
    await record(services, f"/y/{PARKING_PREFIX}0001", "", True)
    await recover_dead(services)
    assert parked(disk) == []
    assert sorted(p.name for p in (disk / "y").iterdir()) == ["keep.txt"]


async def test_the_only_copy_is_put_back_before_garbage_is_judged(
    services: Services, disk: Path
) -> None:
    """A crash between setting the old aside and moving the new in: the new takes the
    name (recorded later, judged first), the old, now garbage, goes."""
    await record(services, f"/y/{PARKING_PREFIX}0001", "report.txt", True)
    park(disk, "old")
    await record(services, f"/y/{PARKING_PREFIX}0002", "report.txt", False)
    park(disk, "new", f"{PARKING_PREFIX}0002")
    await recover_dead(services)
    assert (disk / "y" / "report.txt").read_text() == "new"
    assert parked(disk) == []
    assert await records(services) == []


async def test_a_record_its_living_owner_renews_is_left_alone(
    services: Services, disk: Path
) -> None:
    park(disk, "busy")
    await record(services, f"/y/{PARKING_PREFIX}0001", "report.txt", False, owner="alive/1")
    await recover_dead(services)
    await recovery(services).unheld()
    await recovery(services).settled()
    assert parked(disk) == [f"y/{PARKING_PREFIX}0001"]
    assert len(await records(services)) == 1


async def test_a_record_nobody_renews_is_recovered_by_the_timer(
    services: Services, disk: Path
) -> None:
    """An owner on another machine (no mark on this data folder) stopped renewing:
    once its lease ran out, the timer recovers what it left."""
    park(disk, "mine")
    await record(services, f"/y/{PARKING_PREFIX}0001", "report.txt", False, owner="far/1", lease=1)
    journal = services.tree.parkings
    await journal.stop()
    journal.set_lease(1)
    await journal.start()
    await wait_until(lambda: (disk / "y" / "report.txt").exists())
    assert (disk / "y" / "report.txt").read_text() == "mine"
    assert parked(disk) == []


async def wait_until(check: Callable[[], bool]) -> None:
    for _ in range(int(WAIT / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("gave up waiting")


@pytest.mark.parametrize(
    ("home", "number", "expected"),
    [
        ("report.pdf", 1, "report (recovered 1).pdf"),
        ("photos", 2, "photos (recovered 2)"),
        (".bashrc", 1, ".bashrc (recovered 1)"),
        ("a" * 251 + ".txt", 1, "a" * 237 + " (recovered 1).txt"),
    ],
)
def test_a_recovered_name(home: str, number: int, expected: str) -> None:
    assert recovered_name(home, number) == expected
