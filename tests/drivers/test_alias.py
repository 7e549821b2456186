"""Alias over two Local storages, driven through the API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Api


async def _mount(
    api: Api, mount_path: str, driver: str, addition: dict[str, object]
) -> dict[str, Any]:
    body = {"mount_path": mount_path, "driver": driver, "addition": json.dumps(addition)}
    return await api.post("/api/admin/storage/create", body)


async def _setup(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    for name, files in (("one", {"a.txt": b"from one", "same.txt": b"one wins"}),
                        ("two", {"b.txt": b"from two", "same.txt": b"two loses"})):  # fmt: skip
        root = tmp_path / name
        (root / "dir").mkdir(parents=True)
        for file, data in files.items():
            (root / "dir" / file).write_bytes(data)
        assert (await _mount(api, f"/{name}", "Local", {"root_folder_path": str(root)}))[
            "code"
        ] == 200
    await api.as_admin()


async def test_one_name_merges_targets_flat(api: Api, tmp_path: Path) -> None:
    await _setup(api, tmp_path)
    created = await _mount(api, "/merged", "Alias", {"paths": "/one/dir\n/two/dir"})
    assert created["code"] == 200, created
    listing = await api.post("/api/fs/list", {"path": "/merged"})
    assert sorted(o["name"] for o in listing["data"]["content"]) == ["a.txt", "b.txt", "same.txt"]
    found = await api.post("/api/fs/get", {"path": "/merged/same.txt"})
    assert found["data"]["size"] == len(b"one wins")
    response = await api.client.get(found["data"]["raw_url"].split("manifold.test")[1])
    assert response.content == b"one wins"


async def test_several_names_show_folders(api: Api, tmp_path: Path) -> None:
    await _setup(api, tmp_path)
    paths = "first:/one/dir\nsecond:/two/dir"
    assert (await _mount(api, "/al", "Alias", {"paths": paths}))["code"] == 200
    root = await api.post("/api/fs/list", {"path": "/al"})
    assert [o["name"] for o in root["data"]["content"]] == ["first", "second"]
    second = await api.post("/api/fs/list", {"path": "/al/second"})
    assert sorted(o["name"] for o in second["data"]["content"]) == ["b.txt", "same.txt"]
    missing = await api.post("/api/fs/get", {"path": "/al/second/a.txt"})
    assert missing["code"] == 500
    assert missing["message"].endswith("object not found")


async def test_alias_refuses_itself_and_empty_paths(api: Api, tmp_path: Path) -> None:
    await _setup(api, tmp_path)
    loop = await _mount(api, "/loop", "Alias", {"paths": "/loop/x"})
    assert loop["code"] == 500
    assert "inside the alias itself" in loop["message"]
    empty = await _mount(api, "/empty", "Alias", {"paths": "\n"})
    assert empty["code"] == 500
    assert "paths is required" in empty["message"]
