"""Names under the upload prefix are the server's: no client may make, take or touch one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from manifold.drivers.base import RESERVED_PREFIX
from tests.api.fs_helpers import fs_list, make_tree, mount_local, names
from tests.api.test_fs_write import put
from tests.conftest import Api
from tests.fixtures.holding import held_elsewhere

RESERVED = f"{RESERVED_PREFIX}0123456789abcdef"


# What the `root` fixture makes (tests/api/conftest.py).
TREE: dict[str, bytes | str] = {"a.txt": "alpha", "sub/": "", RESERVED: "crashed"}


async def form(api: Api, path: str) -> dict[str, Any]:
    headers = {"File-Path": quote(path), "Authorization": api.token}
    files = {"file": ("x.bin", b"form bytes", "application/octet-stream")}
    response = await api.client.put("/api/fs/form", files=files, headers=headers)
    body: dict[str, Any] = response.json()
    return body


WRITES: dict[str, Any] = {
    "mkdir": lambda api: api.post("/api/fs/mkdir", {"path": f"/local/{RESERVED}"}),
    "mkdir-parent": lambda api: api.post("/api/fs/mkdir", {"path": f"/local/{RESERVED}/x"}),
    "rename": lambda api: api.post("/api/fs/rename", {"path": "/local/a.txt", "name": RESERVED}),
    "batch_rename": lambda api: api.post(
        "/api/fs/batch_rename",
        {"src_dir": "/local", "rename_objects": [{"src_name": "a.txt", "new_name": RESERVED}]},
    ),
    "put": lambda api: put(api, f"/local/sub/{RESERVED}", b"bytes"),
    "put-task": lambda api: put(api, f"/local/sub/{RESERVED}", b"bytes", **{"As-Task": "true"}),
    "form": lambda api: form(api, f"/local/sub/{RESERVED}"),
    "copy": lambda api: api.post(
        "/api/fs/copy", {"src_dir": "/local", "dst_dir": "/local/sub", "names": [RESERVED]}
    ),
    "move": lambda api: api.post(
        "/api/fs/move", {"src_dir": "/local", "dst_dir": "/local/sub", "names": [RESERVED]}
    ),
    "remove": lambda api: api.post("/api/fs/remove", {"dir": "/local", "names": [RESERVED]}),
}


@pytest.fixture
def writing(root: Path) -> Iterator[Path]:
    """The reserved entry of ``TREE``, held by another process (an upload under way)."""
    with held_elsewhere(root / RESERVED):
        yield root / RESERVED


class TestReservedPrefix:
    @pytest.mark.parametrize("write", list(WRITES))
    async def test_every_write_refuses_it(
        self, writing: Path, admin: Api, root: Path, write: str
    ) -> None:
        body = await WRITES[write](admin)
        assert body["code"] == 400, body
        assert f"names starting with {RESERVED_PREFIX} are reserved" in body["message"]
        assert sorted(os.listdir(root)) == sorted(["a.txt", "sub", RESERVED])
        assert os.listdir(root / "sub") == []
        assert (root / RESERVED).read_text() == "crashed"

    @pytest.mark.parametrize("name", [RESERVED_PREFIX[:-1], f"x{RESERVED_PREFIX}", ".manifold"])
    async def test_names_that_only_look_alike_are_fine(
        self, admin: Api, root: Path, name: str
    ) -> None:
        assert (await put(admin, f"/local/{name}", b"ok"))["code"] == 200
        assert (root / name).read_bytes() == b"ok"


class TestStaleTemporaries:
    """What a killed upload or copy left behind goes, however young; what a live process
    is still writing (and holds) stays."""

    @pytest.mark.parametrize("kind", ["file", "folder"])
    async def test_stale_ones_in_the_root_go_when_the_storage_starts(
        self, api: Api, tmp_path: Path, kind: str
    ) -> None:
        root = make_tree(tmp_path / "root", {"a.txt": "alpha"})
        stale, fresh = root / f"{RESERVED_PREFIX}stale", root / f"{RESERVED_PREFIX}fresh"
        for path in (stale, fresh):
            make_tree(path, {"part": "x"}) if kind == "folder" else path.write_bytes(b"x")
        await api.as_admin()
        with held_elsewhere(fresh):
            await mount_local(api, "/local", root)
        assert sorted(os.listdir(root)) == sorted(["a.txt", fresh.name])

    async def test_stale_ones_in_a_folder_go_when_it_is_listed(
        self, admin: Api, root: Path
    ) -> None:
        stale = root / "sub" / f"{RESERVED_PREFIX}stale"
        stale.write_bytes(b"half an upload")
        fresh = root / "sub" / f"{RESERVED_PREFIX}fresh"
        fresh.write_bytes(b"still arriving")
        with held_elsewhere(fresh):
            assert names(await fs_list(admin, "/local/sub", refresh=True)) == []
        assert os.listdir(root / "sub") == [fresh.name]


UNSAFE_NAMES = {
    "CR LF": "a\r\nb.txt",
    "right-to-left override": "\u202etxt.exe",
    "C1 control": "a\x85b",
}


@pytest.mark.parametrize("name", UNSAFE_NAMES.values(), ids=UNSAFE_NAMES.keys())
async def test_new_names_with_control_or_reordering_characters_are_refused(
    admin: Api, root: Path, name: str
) -> None:
    for body in (
        await put(admin, f"/local/sub/{name}", b"bytes"),
        await form(admin, f"/local/sub/{name}"),
        await admin.post("/api/fs/mkdir", {"path": f"/local/sub/{name}"}),
    ):
        assert body["code"] == 400, body
    assert os.listdir(root / "sub") == []
