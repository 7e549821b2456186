"""The write endpoints never lose what they were asked to keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api.fs_helpers import make_tree, mount_local
from tests.conftest import Api


@pytest.fixture
async def root(api: Api, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "root", {"s/a/keep.txt": "keep", "s/a/in/x.txt": "x"})
    await api.as_admin()
    await mount_local(api, "/s", root / "s")
    return root / "s"


@pytest.mark.parametrize("route", ["/api/fs/move", "/api/fs/copy"])
async def test_into_its_own_folder_with_overwrite_keeps_the_file(
    api: Api, root: Path, route: str
) -> None:
    body = await api.post(
        route, {"src_dir": "/s/a", "dst_dir": "/s/a", "names": ["keep.txt"], "overwrite": True}
    )
    assert body["code"] == 200, body
    assert (root / "a" / "keep.txt").read_text() == "keep"
    body = await api.post(route, {"src_dir": "/s/a", "dst_dir": "/s/a", "names": ["keep.txt"]})
    assert (body["code"], body["message"]) == (403, "file [keep.txt] exists")


async def test_a_rename_onto_its_own_name_keeps_it(api: Api, root: Path) -> None:
    body = await api.post(
        "/api/fs/rename", {"path": "/s/a/keep.txt", "name": "keep.txt", "overwrite": True}
    )
    assert body["code"] == 200, body
    assert (root / "a" / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize("route", ["/api/fs/move", "/api/fs/copy"])
async def test_a_folder_into_its_own_subtree_is_refused_before_anything_changes(
    api: Api, root: Path, route: str
) -> None:
    (root / "a" / "in" / "keep.txt").write_text("inner")
    body = await api.post(
        route,
        {"src_dir": "/s", "dst_dir": "/s/a/in", "names": ["a"], "overwrite": True},
    )
    assert body["code"] == 500
    assert body["message"] == "the destination folder is a subfolder of the source folder"
    assert sorted(p.name for p in (root / "a" / "in").iterdir()) == ["keep.txt", "x.txt"]


# --- recursive_move -----------------------------------------------------------------


@pytest.fixture
async def namesakes(root: Path) -> Path:
    """Two files named ``one`` below ``/s/src``; ``/s/dst`` holds ``two``."""
    make_tree(root, {"src/one": "1", "src/in/one": "inner 1", "src/in/two": "2", "dst/two": "x"})
    return root


async def recursive_move(api: Api, policy: str) -> dict[str, object]:
    return await api.post(
        "/api/fs/recursive_move",
        {"src_dir": "/s/src", "dst_dir": "/s/dst", "conflict_policy": policy},
    )


def tree_of(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


async def test_recursive_move_cancel_moves_nothing(api: Api, namesakes: Path) -> None:
    before = tree_of(namesakes)
    body = await recursive_move(api, "cancel")
    assert (body["code"], body["message"]) in (
        (403, "file [one] exists"),
        (403, "file [two] exists"),
    )
    assert tree_of(namesakes) == before
    (namesakes / "dst" / "two").unlink()
    body = await recursive_move(api, "cancel")
    assert (body["code"], body["message"]) == (403, "file [one] exists")
    assert (namesakes / "src" / "in" / "two").exists()


async def test_recursive_move_skip_keeps_the_first_of_namesakes(api: Api, namesakes: Path) -> None:
    body = await recursive_move(api, "skip")
    assert (body["code"], body["message"]) == (200, "Successfully moved 1 file")
    assert (namesakes / "dst" / "two").read_text() == "x"
    assert (namesakes / "dst" / "one").read_text() in ("1", "inner 1")
    moved = (namesakes / "dst" / "one").read_text()
    left = namesakes / "src" / ("in/one" if moved == "1" else "one")
    assert left.exists()


@pytest.mark.parametrize("policy", ["overwrite", "anything"])
async def test_recursive_move_other_policies_move_every_file(
    api: Api, namesakes: Path, policy: str
) -> None:
    body = await recursive_move(api, policy)
    assert (body["code"], body["message"]) == (200, "Successfully moved 3 files")
    assert (namesakes / "dst" / "two").read_text() == "2"
    assert (namesakes / "dst" / "one").read_text() in ("1", "inner 1")
    assert sorted(p.name for p in (namesakes / "dst").iterdir()) == ["one", "two"]
    assert not [p for p in (namesakes / "src").rglob("*") if p.is_file()]
