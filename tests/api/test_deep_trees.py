"""Trees of any depth: a deep ``mkdir`` is made (or refused cleanly), and whatever is on
the disk, however deep, even past the system's longest path, is removed through the API.

Only a guard against a hang is timed: each request must answer well within it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import TypeVar

import pytest

from manifold.localfs import remove_tree
from tests.api.fs_helpers import make_tree, mount_local
from tests.conftest import Api

T = TypeVar("T")
HANG = 120.0
_DIR = os.O_RDONLY | os.O_DIRECTORY


async def answered(call: Awaitable[T]) -> T:
    return await asyncio.wait_for(call, HANG)


def deep_tree(top: Path, name: str, levels: int) -> None:
    """``levels`` folders called ``name`` one in another below ``top``, with a file in
    the deepest; made relative to each open folder, so no path grows with the depth."""
    fd = os.open(top, _DIR)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
        file = os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.close(file)
    finally:
        os.close(fd)


def depth_of(top: Path, name: str) -> int:
    fd, depth = os.open(top, _DIR), 0
    try:
        while name in os.listdir(fd):
            inner = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd, depth = inner, depth + 1
    finally:
        os.close(fd)
    return depth


@pytest.fixture
async def root(api: Api, tmp_path: Path) -> AsyncIterator[Path]:
    await api.as_admin()
    top = make_tree(tmp_path / "root", {"keep.txt": "keep"})
    await mount_local(api, "/local", top)
    yield top
    # Whatever a failed test left: pytest's own clean-up recurses once per level.
    for entry in os.scandir(top):
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path)


@pytest.mark.parametrize("levels", [900, 1200])
async def test_a_deep_mkdir_is_made_or_refused_cleanly(api: Api, root: Path, levels: int) -> None:
    path = "/local/" + "/".join(["d"] * levels)
    made = await answered(api.post("/api/fs/mkdir", {"path": path}))
    if made["code"] == 200:
        assert depth_of(root, "d") == levels
        again = await answered(api.post("/api/fs/mkdir", {"path": path}))
        assert again["code"] == 200, again  # an existing folder is fine
    else:
        assert made["message"] not in ("internal error", ""), made
        assert "recursion" not in made["message"], made


async def test_a_mkdir_past_the_longest_path_is_refused_cleanly(api: Api, root: Path) -> None:
    path = "/local/" + "/".join(["long-name"] * 600)
    made = await answered(api.post("/api/fs/mkdir", {"path": path}))
    assert made["code"] != 200, made
    assert made["message"] not in ("internal error", ""), made
    assert str(root) not in made["message"]


@pytest.mark.parametrize(("name", "levels"), [("d", 1800), ("dddd", 1800)])
async def test_a_deep_tree_on_disk_is_removed(api: Api, root: Path, name: str, levels: int) -> None:
    deep_tree(root, name, levels)
    assert depth_of(root, name) == levels
    listed = await answered(api.post("/api/fs/list", {"path": "/local"}))
    assert {o["name"] for o in listed["data"]["content"]} == {"keep.txt", name}
    removed = await answered(api.post("/api/fs/remove", {"dir": "/local", "names": [name]}))
    assert removed["code"] == 200, removed
    assert sorted(os.listdir(root)) == ["keep.txt"]


async def test_a_walk_down_a_deep_tree_stops_with_a_clear_error(api: Api, root: Path) -> None:
    deep_tree(root, "d", 1500)
    answer = await answered(api.post("/api/fs/remove_empty_directory", {"src_dir": "/local"}))
    assert answer["code"] == 500, answer
    assert answer["message"].startswith("walk too deep"), answer
    assert depth_of(root, "d") == 1500


async def test_removal_keeps_links_as_links(api: Api, root: Path, tmp_path: Path) -> None:
    outside = make_tree(tmp_path / "outside", {"x.txt": "x", "dir/y.txt": "y"})
    deep_tree(root, "d", 50)
    fd = os.open(root / "d", _DIR)
    try:
        os.symlink(outside, "to_outside", dir_fd=fd)
        os.symlink(outside / "x.txt", "to_file", dir_fd=fd)
    finally:
        os.close(fd)
    removed = await answered(api.post("/api/fs/remove", {"dir": "/local", "names": ["d"]}))
    assert removed["code"] == 200, removed
    assert sorted(os.listdir(root)) == ["keep.txt"]
    assert (outside / "x.txt").read_text() == "x" and (outside / "dir/y.txt").is_file()
