"""Alias over Local storages: the conformance suite through a writable tree, the
AList write rules (writable, protect_same_name, root entries), and reads through the API."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.drivers.alias.driver import AliasDriver
from manifold.drivers.alias.meta import Addition
from manifold.drivers.base import LinkArgs
from manifold.errors import NotSupported, ObjectExists, PermissionDenied, ServerError
from manifold.models import Storage
from manifold.services.fs.tree import FileTree
from manifold.testing.conformance import DriverConformance, DriverFactory, put_bytes, read_obj
from tests.conftest import Api


async def mount(services: Services, mount_path: str, root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, mount_path, "Local", addition=addition))


async def alias_of(services: Services, paths: str, **options: Any) -> AliasDriver:
    storage = Storage(9999, "/alias", "Alias")
    driver = AliasDriver(storage, Addition(paths=paths, **options))
    driver.tree = services.tree
    await driver.init()
    return driver


class TestAliasConformance(DriverConformance):
    @pytest.fixture
    async def driver_factory(self, services: Services, tmp_path: Path) -> DriverFactory:
        await mount(services, "/local", tmp_path / "local")
        (tmp_path / "local" / "data").mkdir()

        async def build() -> AliasDriver:
            return await alias_of(services, "/local/data", writable=True)

        return build


@pytest.fixture
async def two(services: Services, tmp_path: Path) -> Path:
    """Storages /one and /two, each with dir/ holding a.txt or b.txt, and same.txt."""
    for name, own in (("one", "a.txt"), ("two", "b.txt")):
        await mount(services, f"/{name}", tmp_path / name)
        (tmp_path / name / "dir").mkdir()
        (tmp_path / name / "dir" / own).write_text(f"{own} of {name}")
        (tmp_path / name / "dir" / "same.txt").write_text(f"same of {name}")
    return tmp_path


async def test_writes_need_writable(services: Services, two: Path) -> None:
    alias = await alias_of(services, "/one/dir")
    root = await alias.root_obj()
    a_txt = await alias.get("/a.txt")
    for attempt in (alias.make_dir(root, "x"), alias.rename(a_txt, "y"), alias.remove(a_txt),
                    put_bytes(alias, root, "z", b"z")):  # fmt: skip
        with pytest.raises(PermissionDenied):
            await attempt
    assert sorted(os.listdir(two / "one" / "dir")) == ["a.txt", "same.txt"]


class ReadOnlyTree:
    """A tree that can only be read, as a front end without write support offers."""

    def __init__(self, tree: FileTree) -> None:
        self.get_path = tree.get_path
        self.list_path = tree.list_path
        self.link_path = tree.link_path


async def test_writes_need_a_writable_tree(services: Services, two: Path) -> None:
    alias = await alias_of(services, "/one/dir", writable=True)
    alias.tree = ReadOnlyTree(services.tree)
    with pytest.raises(NotSupported):
        await alias.make_dir(await alias.root_obj(), "x")


async def test_same_name_objects_are_protected(services: Services, two: Path) -> None:
    alias = await alias_of(services, "/one/dir\n/two/dir", writable=True)
    same = await alias.get("/same.txt")
    with pytest.raises(ServerError, match=r"^same-name files cannot be Rename$"):
        await alias.rename(same, "other.txt")
    with pytest.raises(ServerError, match=r"^same-name files cannot be Delete$"):
        await alias.remove(same)
    with pytest.raises(ServerError, match=r"^same-name dirs cannot be Put$"):
        await put_bytes(alias, await alias.root_obj(), "new.txt", b"x")
    renamed = await alias.rename(await alias.get("/b.txt"), "b2.txt")
    assert (renamed.name, renamed.path) == ("b2.txt", "/b2.txt")
    assert (two / "two" / "dir" / "b2.txt").read_text() == "b.txt of two"


async def test_without_protection_the_first_target_is_written(
    services: Services, two: Path
) -> None:
    alias = await alias_of(services, "/one/dir\n/two/dir", writable=True, protect_same_name=False)
    await alias.remove(await alias.get("/same.txt"))
    assert not (two / "one" / "dir" / "same.txt").exists()
    assert (two / "two" / "dir" / "same.txt").exists()
    assert await read_obj(alias, await alias.get("/same.txt")) == b"same of two"


async def test_alias_root_entries_cannot_be_changed(services: Services, two: Path) -> None:
    alias = await alias_of(services, "first:/one/dir\nsecond:/two/dir", writable=True)
    first = await alias.get("/first")
    with pytest.raises(NotSupported):
        await alias.rename(first, "third")
    with pytest.raises(NotSupported):
        await alias.remove(first)
    made = await alias.make_dir(first, "sub")
    assert (made.path, (two / "one" / "dir" / "sub").is_dir()) == ("/first/sub", True)


async def test_copy_between_storages_streams_and_move_is_refused(
    services: Services, two: Path
) -> None:
    alias = await alias_of(services, "first:/one/dir\nsecond:/two/dir", writable=True)
    second = await alias.get("/second")
    a_txt = await alias.get("/first/a.txt")
    copied = await alias.copy(a_txt, second)
    assert (copied.path, (two / "two" / "dir" / "a.txt").read_text()) == (
        "/second/a.txt", "a.txt of one")  # fmt: skip
    with pytest.raises(ObjectExists):
        await alias.copy(a_txt, second)
    folder = await alias.make_dir(await alias.get("/first"), "tree")
    await put_bytes(alias, folder, "inner.bin", b"inner bytes")
    await alias.copy(folder, second)
    assert (two / "two" / "dir" / "tree" / "inner.bin").read_bytes() == b"inner bytes"
    with pytest.raises(ServerError, match="between two storages"):
        await alias.move(a_txt, second)
    assert (two / "one" / "dir" / "a.txt").exists()


async def test_links_pass_through(services: Services, two: Path) -> None:
    alias = await alias_of(services, "/one/dir")
    link = await alias.link(await alias.get("/a.txt"), LinkArgs())
    assert link.file_path == str(two / "one" / "dir" / "a.txt")


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
