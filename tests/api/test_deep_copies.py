"""Copies of trees of any depth: within a storage, between storages (as tasks, and at
once as the protocol servers copy), each completes or is refused with a clear error,
and nothing is left half made.

Only a guard against a hang is timed: each copy must end well within it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from manifold.errors import ManifoldError
from manifold.localfs import remove_tree
from manifold.models import Perm, Role, TaskState, User
from manifold.services.auth.service import Caller
from tests.api.fs_helpers import make_tree, mount_local
from tests.api.test_copy_tasks import settle
from tests.api.test_deep_trees import answered, deep_tree, depth_of
from tests.conftest import Api

LEVELS = 1200
_DIR = os.O_RDONLY | os.O_DIRECTORY


def bottom_of(top: Path, name: str) -> list[str]:
    """The names in the deepest folder of the chain of ``name`` folders below ``top``."""
    fd = os.open(top, _DIR)
    try:
        while name in os.listdir(fd):
            inner = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def clear(top: Path) -> None:
    """Remove every folder below ``top``: pytest's own clean-up recurses once per level."""
    if top.is_dir():
        for entry in os.scandir(top):
            if entry.is_dir(follow_symlinks=False):
                remove_tree(entry.path)


@pytest.fixture
async def roots(api: Api, tmp_path: Path) -> AsyncIterator[tuple[Path, Path]]:
    await api.as_admin()
    one = make_tree(tmp_path / "one", {"keep.txt": "keep", "into/": ""})
    two = make_tree(tmp_path / "two", {"kept.txt": "kept"})
    await mount_local(api, "/one", one)
    await mount_local(api, "/two", two)
    deep_tree(one, "d", LEVELS)
    try:
        yield one, two
    finally:
        clear(one)
        clear(two)


def assert_copied_or_refused(answer: dict[str, object], top: Path) -> None:
    if answer["code"] == 200:
        assert depth_of(top, "d") == LEVELS
        assert bottom_of(top, "d") == ["bottom.txt"]
    else:
        assert answer["message"] not in ("internal error", ""), answer
        assert "recursion" not in str(answer["message"]), answer
        assert not (top / "d").exists()
    assert [n for n in os.listdir(top) if n.startswith(".")] == []


async def test_a_deep_copy_within_a_storage(api: Api, roots: tuple[Path, Path]) -> None:
    one, _ = roots
    answer = await answered(
        api.post("/api/fs/copy", {"src_dir": "/one", "dst_dir": "/one/into", "names": ["d"]})
    )
    assert_copied_or_refused(answer, one / "into")
    assert depth_of(one, "d") == LEVELS


async def test_a_deep_copy_between_storages_as_tasks(api: Api, roots: tuple[Path, Path]) -> None:
    """A task per level: the copy completes, or the level past the limit fails clearly,
    and what the levels above made is removed through the API."""
    one, two = roots
    answer = await answered(
        api.post("/api/fs/copy", {"src_dir": "/one", "dst_dir": "/two", "names": ["d"]})
    )
    assert answer["code"] == 200, answer
    finished = await answered(settle(api))
    failed = [t for t in finished if t.state != TaskState.SUCCEEDED]
    if not failed:
        assert depth_of(two, "d") == LEVELS
        assert bottom_of(two, "d") == ["bottom.txt"]
    else:
        assert {t.state for t in failed} == {TaskState.FAILED}, failed
        for task in failed:
            assert task.error.startswith("copy too deep"), task.error
    removed = await answered(api.post("/api/fs/remove", {"dir": "/two", "names": ["d"]}))
    assert removed["code"] == 200, removed
    assert os.listdir(two) == ["kept.txt"]
    assert depth_of(one, "d") == LEVELS


async def test_a_deep_copy_between_storages_at_once(api: Api, roots: tuple[Path, Path]) -> None:
    """As a protocol server copies: the call returns when the copy is whole."""
    one, two = roots
    admin = User(1000, "carol", "", 0, "/", Role.GENERAL, False, int(Perm(0xFF)), "", "")
    try:
        await answered(api.services.ops.copy(Caller(admin, "198.51.100.4"), "/one/d", "/two/d"))
    except ManifoldError as exc:
        answer: dict[str, object] = {"code": exc.code, "message": str(exc)}
    else:
        answer = {"code": 200, "message": ""}
    assert_copied_or_refused(answer, two)
    assert depth_of(one, "d") == LEVELS


async def test_a_copy_within_a_storage_keeps_links_times_and_modes(
    api: Api, roots: tuple[Path, Path], tmp_path: Path
) -> None:
    one, _ = roots
    tree = make_tree(one / "src", {"a.txt": "alpha", "sub/b.txt": "beta", "sub/empty/": ""})
    (tree / "sub/to_a").symlink_to("../a.txt")
    (tree / "sub/out").symlink_to(tmp_path / "two")
    os.utime(tree / "a.txt", ns=(1_000_000_000, 1_500_000_000_000_000_000))
    (tree / "sub/b.txt").chmod(0o640)
    answer = await answered(
        api.post("/api/fs/copy", {"src_dir": "/one", "dst_dir": "/one/into", "names": ["src"]})
    )
    assert answer["code"] == 200, answer
    copy = one / "into/src"
    assert (copy / "a.txt").read_text() == "alpha"
    assert (copy / "a.txt").stat().st_mtime_ns == 1_500_000_000_000_000_000
    assert (copy / "sub/b.txt").read_text() == "beta"
    assert (copy / "sub/b.txt").stat().st_mode & 0o777 == 0o640
    assert (copy / "sub/empty").is_dir()
    assert os.readlink(copy / "sub/to_a") == "../a.txt"
    assert os.readlink(copy / "sub/out") == str(tmp_path / "two")


@pytest.fixture
def other_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on another file system than the test's (``/dev/shm``), where there is one."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system to move to")
    bin_dir = Path(tempfile.mkdtemp(dir=shm, prefix="manifold-test-"))
    try:
        yield bin_dir
    finally:
        clear(bin_dir)
        bin_dir.rmdir()


async def test_a_deep_tree_goes_to_a_recycle_bin_on_another_disk(
    api: Api, roots: tuple[Path, Path], other_disk: Path
) -> None:
    """Moving to another file system copies, then removes: both at any depth."""
    one, _ = roots
    await api.as_admin()
    addition = {"root_folder_path": str(one), "recycle_bin_path": str(other_disk)}
    await mount_local(api, "/binned", one, addition=json.dumps(addition))
    removed = await answered(api.post("/api/fs/remove", {"dir": "/binned", "names": ["d"]}))
    assert removed["code"] == 200, removed
    assert not (one / "d").exists()
    assert depth_of(other_disk, "d") == LEVELS
    assert bottom_of(other_disk, "d") == ["bottom.txt"]
