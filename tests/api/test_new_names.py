"""Names a client gives to something new hold no control or text-reordering character;
entries a back end already holds under such names are left out of every listing, as
names no client could have given (``vfs.names``), and their folders are not empty."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from manifold.errors import InvalidRequest, NameTooLong
from manifold.services.auth.service import Caller
from tests.api.fs_helpers import fs_get, fs_list, make_tree, mount_local, names
from tests.conftest import Api

# A right-to-left override, a bell, a zero-width space, a C1 control, a line separator.
UNSAFE = ["evil\u202etxt.exe", "bell\x07", "zero\u200bwidth", "c1\x85", "line\u2028break"]
ODD = "odd\u202ename"


@pytest.fixture
async def root(api: Api, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "root", {"a.txt": "alpha", "sub/": ""})
    (root / ODD).mkdir()
    (root / ODD / "in.txt").write_text("inner")
    await api.as_admin()
    await mount_local(api, "/local", root)
    return root


async def admin(api: Api) -> Caller:
    user = await api.services.users.by_name("admin")
    assert user is not None
    return Caller(user, "198.51.100.9")


def refused(body: dict[str, object]) -> bool:
    return body["code"] == 400 and "control characters" in str(body["message"])


@pytest.mark.parametrize("name", UNSAFE)
async def test_new_names_are_refused_everywhere(api: Api, root: Path, name: str) -> None:
    before = sorted(p.name for p in root.rglob("*"))
    assert refused(await api.post("/api/fs/mkdir", {"path": f"/local/sub/{name}/deeper"}))
    assert refused(await api.post("/api/fs/rename", {"path": "/local/a.txt", "name": name}))
    batch = {"src_dir": "/local", "rename_objects": [{"src_name": "a.txt", "new_name": name}]}
    assert refused(await api.post("/api/fs/batch_rename", batch))
    regex = {"src_dir": "/local", "src_name_regex": "^a", "new_name_regex": name}
    assert refused(await api.post("/api/fs/regex_rename", regex))
    response = await api.client.put(
        "/api/fs/put",
        content=b"x",
        headers={"File-Path": quote(f"/local/{name}"), "Authorization": api.token},
    )
    assert refused(response.json())
    who = await admin(api)
    with pytest.raises(InvalidRequest):
        await api.services.ops.rename(who, "/local/a.txt", f"/local/sub/{name}")
    with pytest.raises(InvalidRequest):
        await api.services.ops.copy(who, "/local/a.txt", f"/local/sub/{name}")
    assert sorted(p.name for p in root.rglob("*")) == before


async def test_entries_already_named_so_are_left_out(api: Api, root: Path) -> None:
    assert names(await fs_list(api, "/local")) == ["a.txt", "sub"]
    for path in (f"/local/{ODD}", f"/local/{ODD}/in.txt"):
        body = await fs_get(api, path)
        assert (body["code"], body["message"]) == (500, "object not found")
    assert names(await fs_list(api, "/local/sub")) == []
    (root / "sub" / "bell\x07").write_text("kept")
    body = await api.post("/api/fs/list", {"path": "/local/sub", "refresh": True})
    assert names(body) == []
    # A folder holding only such entries is not empty: nothing removes it as empty.
    body = await api.post("/api/fs/remove_empty_directory", {"src_dir": "/local"})
    assert body["code"] == 200, body
    assert (root / "sub" / "bell\x07").read_text() == "kept"
    # Its folder, renamed or moved whole, carries it along.
    body = await api.post("/api/fs/rename", {"path": "/local/sub", "name": "renamed"})
    assert body["code"] == 200, body
    assert (root / "renamed" / "bell\x07").read_text() == "kept"
    assert (root / ODD / "in.txt").read_text() == "inner"


LONG = "é" * 128  # 256 bytes of UTF-8
LONGEST = "é" * 127 + "x"  # 255 bytes


def too_long(body: dict[str, object]) -> bool:
    return (body["code"], body["message"]) == (400, "file name too long: 256 bytes, at most 255")


async def test_long_new_names_are_refused_before_the_storage_sees_them(
    api: Api, root: Path
) -> None:
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert too_long(await api.post("/api/fs/mkdir", {"path": f"/local/{LONG}"}))
    assert too_long(await api.post("/api/fs/mkdir", {"path": f"/local/new/{LONG}/deeper"}))
    assert too_long(await api.post("/api/fs/rename", {"path": "/local/a.txt", "name": LONG}))
    batch = {"src_dir": "/local", "rename_objects": [{"src_name": "a.txt", "new_name": LONG}]}
    assert too_long(await api.post("/api/fs/batch_rename", batch))
    for path in (f"/local/{LONG}", f"/local/new/{LONG}/file.txt"):
        response = await api.client.put(
            "/api/fs/put",
            content=b"x",
            headers={"File-Path": quote(path), "Authorization": api.token},
        )
        assert too_long(response.json()), path
    who = await admin(api)
    with pytest.raises(NameTooLong):
        await api.services.ops.rename(who, "/local/a.txt", f"/local/sub/{LONG}")
    with pytest.raises(NameTooLong):
        await api.services.ops.copy(who, "/local/a.txt", f"/local/sub/{LONG}")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before


async def test_names_of_255_bytes_are_made(api: Api, root: Path) -> None:
    body = await api.post("/api/fs/mkdir", {"path": f"/local/{LONGEST}/{LONGEST}"})
    assert body["code"] == 200, body
    renamed = LONGEST[:-1] + "y"
    body = await api.post("/api/fs/rename", {"path": "/local/a.txt", "name": renamed})
    assert body["code"] == 200, body
    assert (root / renamed).read_text() == "alpha"
    assert (root / LONGEST / LONGEST).is_dir()
