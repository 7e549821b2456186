"""StorageOps listings: the cache, the short snapshot of never-cached storages, other."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from manifold.errors import ManifoldError, NotSupported
from manifold.models import Obj
from manifold.vfs import storage_ops
from manifold.vfs.storage_ops import SNAPSHOT_SECONDS, MemoryListCache, StorageOps
from tests.unit.storage_ops_helpers import Scans, local_ops

Clock = Callable[[float], None]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    now = [1000.0]
    monkeypatch.setattr(storage_ops.time, "monotonic", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def settle(*folders: Path) -> None:
    """Date folders a minute back: a folder changed within the last second cannot be
    fingerprinted yet (it may change again unseen within the same tick)."""
    past = time.time() - 60
    for folder in folders:
        os.utime(folder, (past, past))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "empty").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    settle(root, root / "empty")
    return root


@pytest.fixture
async def snapshot_ops(root: Path) -> AsyncIterator[tuple[StorageOps, Scans]]:
    ops = await local_ops(root, cache_expiration=30, no_cache=True)
    yield ops, Scans(ops.driver)
    await ops.driver.drop()


async def test_a_never_cached_storage_keeps_a_short_snapshot(
    snapshot_ops: tuple[StorageOps, Scans], root: Path, clock: Clock
) -> None:
    ops, scans = snapshot_ops
    first = await ops.list("/")
    assert await ops.list("/") is first
    assert scans.count == 1
    (root / "b.txt").write_text("b")
    clock(SNAPSHOT_SECONDS + 0.1)
    assert {o.name for o in await ops.list("/")} == {"a.txt", "b.txt", "empty"}
    assert scans.count == 2


async def test_refresh_and_forget_rescan(
    snapshot_ops: tuple[StorageOps, Scans], clock: Clock
) -> None:
    ops, scans = snapshot_ops
    await ops.list("/")
    await ops.list("/", refresh=True)
    assert scans.count == 2
    ops.forget("/")
    await ops.list("/")
    assert scans.count == 3


async def test_a_rescan_that_finds_nothing_changed_keeps_the_list(
    snapshot_ops: tuple[StorageOps, Scans], root: Path
) -> None:
    """Whatever was derived from a listing (filtered, encoded) is kept by the list's
    identity, so a refresh of an unchanged folder hands out the same list."""
    ops, scans = snapshot_ops
    first = await ops.list("/")
    assert await ops.list("/", refresh=True) is first
    (root / "a.txt").write_text("longer")
    changed = await ops.list("/", refresh=True)
    assert changed is not first
    assert {o.name: o.size for o in changed} == {"a.txt": 6, "empty": 0}
    assert scans.count == 3


async def test_empty_listings_are_not_kept(snapshot_ops: tuple[StorageOps, Scans]) -> None:
    ops, scans = snapshot_ops
    assert await ops.list("/empty") == []
    assert await ops.list("/empty") == []
    assert scans.count == 2


@pytest.mark.parametrize(("minutes", "no_cache", "kept"), [(30, False, 1800.0), (0, False, 5.0)])
async def test_cached_storages_keep_their_cache_time(
    root: Path, clock: Clock, minutes: int, no_cache: bool, kept: float
) -> None:
    ops = await local_ops(root, cache_expiration=minutes, no_cache=no_cache)
    scans = Scans(ops.driver)
    await ops.list("/")
    clock(kept - 1)
    await ops.list("/")
    assert scans.count == 1
    clock(2)
    await ops.list("/")
    assert scans.count == 2
    await ops.driver.drop()


def test_expired_entries_are_swept_on_a_later_put(clock: Clock) -> None:
    cache = MemoryListCache()
    cache.put("1.1", "/old", [Obj("a", 0, False, datetime.now(UTC))], 1)
    clock(60)
    cache.put("2.2", "/new", [], 30)
    assert len(cache) == 1  # only "new": "old" was swept
    assert cache.get("2.2", "/new") == []


async def test_other_is_not_implemented_by_local(snapshot_ops: tuple[StorageOps, Scans]) -> None:
    ops, _ = snapshot_ops
    with pytest.raises(NotSupported, match=r"^not implement$"):
        await ops.other("/a.txt", "video_preview", None)
    with pytest.raises(ManifoldError, match=r"^failed to get obj: object not found$"):
        await ops.other("/missing.txt", "video_preview", None)


async def test_a_change_behind_the_servers_back_shows_at_once(
    snapshot_ops: tuple[StorageOps, Scans], root: Path
) -> None:
    ops, scans = snapshot_ops
    await ops.list("/")
    (root / "made-on-disk").mkdir()
    assert "made-on-disk" in {o.name for o in await ops.list("/")}
    assert scans.count == 2


async def test_an_unchanged_folder_is_paged_from_one_scan(
    snapshot_ops: tuple[StorageOps, Scans],
) -> None:
    ops, scans = snapshot_ops
    first = await ops.list("/")
    for _ in range(5):
        assert await ops.list("/") is first
    assert scans.count == 1


async def test_a_folder_changed_this_very_moment_is_not_trusted(
    snapshot_ops: tuple[StorageOps, Scans], root: Path
) -> None:
    ops, scans = snapshot_ops
    (root / "fresh.txt").write_text("x")  # the folder's mtime is now
    await ops.list("/")
    await ops.list("/")
    assert scans.count == 2
