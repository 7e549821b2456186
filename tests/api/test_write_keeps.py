"""The write endpoints never lose what they were asked to keep."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.api.fs_helpers import make_tree, mount_local
from tests.api.live_server import STUCK
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


# --- PUT without Content-Length -----------------------------------------------------


async def _pieces(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _put_chunked(
    url: str, token: str, path: str, body: AsyncIterator[bytes], **headers: str
) -> httpx.Response:
    sent = {"File-Path": quote(path), "Authorization": token, **headers}
    async with httpx.AsyncClient(base_url=url, timeout=STUCK) as client:
        return await client.put("/api/fs/put", content=body, headers=sent)


async def test_a_chunked_put_streams_with_the_size_unknown(
    api: Api, live_root: tuple[str, Path]
) -> None:
    url, root = live_root
    response = await _put_chunked(
        url, api.token, "/local/dir/chunked.bin", _pieces(b"abc", b"x" * 300_000, b"end")
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in response.request.headers
    assert response.json()["code"] == 200, response.text
    assert (root / "dir" / "chunked.bin").read_bytes() == b"abc" + b"x" * 300_000 + b"end"


async def test_a_chunked_put_keeps_overwrite_hashes_and_as_task(
    api: Api, live_root: tuple[str, Path]
) -> None:
    url, root = live_root
    refused = await _put_chunked(
        url, api.token, "/local/keep.txt", _pieces(b"new"), Overwrite="false"
    )
    assert (refused.json()["code"], refused.json()["message"]) == (403, "file exists")
    assert (root / "keep.txt").read_text() == "keep"
    wrong = await _put_chunked(
        url, api.token, "/local/h.txt", _pieces(b"data"), **{"X-File-Md5": "0" * 32}
    )
    assert wrong.json()["code"] == 400
    assert not (root / "h.txt").exists()
    md5 = hashlib.md5(b"data", usedforsecurity=False).hexdigest()
    right = await _put_chunked(
        url, api.token, "/local/h.txt", _pieces(b"da", b"ta"), **{"X-File-Md5": md5}
    )
    assert right.json()["code"] == 200, right.text
    as_task = await _put_chunked(
        url, api.token, "/local/t.txt", _pieces(b"tas", b"k"), **{"As-Task": "true"}
    )
    body = as_task.json()
    assert body["code"] == 200, body
    task = await api.services.tasks.wait_done(body["data"]["task"]["id"])
    assert task.error == ""
    assert (root / "t.txt").read_text() == "task"


async def test_a_declared_size_must_be_a_number(api: Api, live_root: tuple[str, Path]) -> None:
    url, root = live_root
    response = await _put_chunked(
        url, api.token, "/local/n.txt", _pieces(b"abc"), **{"X-File-Size": "lots"}
    )
    assert response.json()["code"] == 400
    short = await _put_chunked(
        url, api.token, "/local/n.txt", _pieces(b"abc"), **{"X-File-Size": "4"}
    )
    assert short.json()["code"] == 400
    assert not (root / "n.txt").exists()


@pytest.mark.parametrize("policy", ["overwrite", "anything", "cancel"])
async def test_recursive_move_never_replaces_a_folder_with_a_file(
    api: Api, root: Path, policy: str
) -> None:
    make_tree(root, {"src/d/x": "file x", "src/d/y": "file y", "src/x/keep": "kept"})
    before = tree_of(root)
    body = await api.post(
        "/api/fs/recursive_move",
        {"src_dir": "/s/src", "dst_dir": "/s/src", "conflict_policy": policy},
    )
    assert (body["code"], body["message"]) == (403, "file [x] exists")
    assert tree_of(root) == before


WRITER_PW = "writer-password-1"
WRITER_BITS = 0x3FFF & ~0x3  # every bit but seeing hidden entries and passing passwords


@pytest.mark.parametrize("withheld", ["password", "hidden"])
@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/api/fs/move", {"src_dir": "/s/m1", "dst_dir": "/s/m2", "names": ["d"]}),
        ("/api/fs/copy", {"src_dir": "/s/m1", "dst_dir": "/s/m2", "names": ["d"]}),
        ("/api/fs/rename", {"path": "/s/m2/e", "name": "d"}),
    ],
    ids=["move", "copy", "rename"],
)
async def test_overwrite_never_removes_a_folder_holding_entries_withheld_from_the_caller(
    api: Api, root: Path, withheld: str, route: str, body: dict[str, object]
) -> None:
    """Replacing a folder removes it: refused as its removal is, when it holds a
    folder password the request did not give or entries hidden from the caller."""
    make_tree(root, {"m1/d": "file", "m2/e": "file", "m2/d/locked/precious.txt": "precious"})
    meta = (
        {"path": "/s/m2/d/locked", "password": "folder-pw", "p_sub": True}
        if withheld == "password"
        else {"path": "/s/m2/d", "hide": "^locked$", "h_sub": True}
    )
    assert (await api.post("/api/admin/meta/create", meta))["code"] == 200
    await api.make_user("writer", WRITER_PW, permission=WRITER_BITS)
    token = await api.login("writer", WRITER_PW)
    removed = await api.post("/api/fs/remove", {"dir": "/s/m2", "names": ["d"]}, token=token)
    assert removed["code"] == 403, removed  # the premise: removing it is refused
    answer = await api.post(route, {**body, "overwrite": True}, token=token)
    assert answer["code"] == 403, answer
    assert (root / "m2/d/locked/precious.txt").read_text() == "precious"


@pytest.mark.parametrize("policy", ["overwrite", "cancel", "anything"])
async def test_recursive_move_never_touches_a_file_hidden_from_the_caller(
    api: Api, root: Path, policy: str
) -> None:
    """A direct move onto a hidden name is refused; a walk leaves that file where it is."""
    make_tree(root, {"r/src/x.txt": "new", "r/src/y.txt": "y", "r/x.txt": "hidden"})
    meta = {"path": "/s/r", "hide": "^x\\.txt$", "h_sub": False}
    assert (await api.post("/api/admin/meta/create", meta))["code"] == 200
    await api.make_user("writer", WRITER_PW, permission=WRITER_BITS)
    token = await api.login("writer", WRITER_PW)
    body = {"src_dir": "/s/r/src", "dst_dir": "/s/r", "conflict_policy": policy}
    moved = await api.post("/api/fs/recursive_move", body, token=token)
    assert (moved["code"], moved["message"]) == (200, "Successfully moved 1 file")
    assert (root / "r/x.txt").read_text() == "hidden"
    assert (root / "r/src/x.txt").read_text() == "new"
    assert (root / "r/y.txt").read_text() == "y"


@pytest.mark.parametrize("route", ["/api/fs/move", "/api/fs/copy"])
async def test_a_file_onto_the_folder_holding_it_is_refused(
    api: Api, root: Path, route: str
) -> None:
    make_tree(root, {"a/a": "inner file"})
    body = await api.post(
        route, {"src_dir": "/s/a", "dst_dir": "/s", "names": ["a"], "overwrite": True}
    )
    assert (body["code"], body["message"]) == (
        500,
        "the destination holds the source: it cannot be replaced by it",
    )
    assert (root / "a" / "a").read_text() == "inner file"
    assert (root / "a" / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize("route", ["/api/fs/move", "/api/fs/copy"])
async def test_overwrite_never_replaces_a_folder_by_a_file(
    api: Api, root: Path, route: str
) -> None:
    make_tree(root, {"b/in/kept.txt": "kept"})
    body = await api.post(
        route, {"src_dir": "/s/a/in", "dst_dir": "/s/b", "names": ["x.txt"], "overwrite": True}
    )
    assert body["code"] == 200, body
    (root / "a" / "in" / "in").write_text("a file named like the folder")
    body = await api.post(
        route, {"src_dir": "/s/a/in", "dst_dir": "/s/b", "names": ["in"], "overwrite": True}
    )
    assert (body["code"], body["message"]) == (403, "file [in] exists")
    assert (root / "b" / "in" / "kept.txt").read_text() == "kept"


async def test_replacing_a_file_needs_the_remove_permission(api: Api, root: Path) -> None:
    make_tree(root, {"b/keep.txt": "older", "b/new.txt": "new", "b/empty.txt": ""})
    await api.make_user("kim", "kim-password-1", permission=0x78, base_path="/s")
    token = await api.login("kim", "kim-password-1")
    move = {"src_dir": "/a", "dst_dir": "/b", "names": ["keep.txt"], "overwrite": True}
    body = await api.post("/api/fs/move", move, token=token)
    assert (body["code"], body["message"]) == (403, "permission denied")
    over = {"path": "/b/new.txt", "name": "keep.txt", "overwrite": True}
    body = await api.post("/api/fs/rename", over, token=token)
    assert (body["code"], body["message"]) == (403, "permission denied")
    assert (root / "b" / "keep.txt").read_text() == "older"
    assert (root / "a" / "keep.txt").read_text() == "keep"
    onto_empty = {"path": "/b/new.txt", "name": "empty.txt", "overwrite": True}
    body = await api.post("/api/fs/rename", onto_empty, token=token)
    assert body["code"] == 200, body  # an empty file loses nothing
    assert (root / "b" / "empty.txt").read_text() == "new"


async def test_a_recursive_move_replaces_files_only_with_the_remove_permission(
    api: Api, root: Path
) -> None:
    make_tree(root, {"flat/keep.txt": "older", "flat/x.txt": ""})
    await api.make_user("kim", "kim-password-1", permission=0x78, base_path="/s")
    token = await api.login("kim", "kim-password-1")
    move = {"src_dir": "/a", "dst_dir": "/flat", "conflict_policy": "overwrite"}
    body = await api.post("/api/fs/recursive_move", move, token=token)
    assert (body["code"], body["message"]) == (403, "permission denied")
    assert (root / "flat" / "keep.txt").read_text() == "older"
    assert (root / "a" / "keep.txt").read_text() == "keep"
    (root / "a" / "keep.txt").unlink()
    body = await api.post("/api/fs/recursive_move", move, token=token)
    assert body["code"] == 200, body  # x.txt was empty: replacing it loses nothing
    assert (root / "flat" / "x.txt").read_text() == "x"
