"""Chunk over a Local storage: the whole conformance suite with parts small enough that
every file of more than a few bytes spans several, the layout on disk (OpenList's),
reads that open only the parts a range touches, and uploads that leave no parts when
they fail."""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.drivers.base import Upload
from manifold.drivers.chunk.driver import UPLOAD_PREFIX, ChunkDriver
from manifold.drivers.chunk.meta import Addition
from manifold.errors import InvalidName, InvalidRequest, ObjectExists, ServerError
from manifold.models import Storage
from manifold.services.fs.tree import FileTree
from manifold.testing.conformance import (
    DriverConformance,
    DriverFactory,
    StreamAborted,
    aborted_stream,
    chunks,
    find,
    put_bytes,
    read_obj,
)
from tests.conftest import Api

PART = 4096
PREFIX = "[openlist_chunk]"


async def mount_local(services: Services, mount_path: str, root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, mount_path, "Local", addition=addition))


async def chunk_of(services: Services, remote: str, **options: Any) -> ChunkDriver:
    storage = Storage(9998, "/chunked", "Chunk")
    options.setdefault("part_size", PART)
    driver = ChunkDriver(storage, Addition(remote_path=remote, **options))
    driver.tree = services.tree
    await driver.init()
    return driver


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    """A Local storage at /local whose folder ``parts`` holds the parts."""
    await mount_local(services, "/local", tmp_path / "local")
    (tmp_path / "local" / "parts").mkdir()
    return tmp_path / "local" / "parts"


class TestChunkConformance(DriverConformance):
    @pytest.fixture
    async def driver_factory(self, services: Services, disk: Path) -> DriverFactory:
        async def build() -> ChunkDriver:
            return await chunk_of(services, "/local/parts")

        return build


def part_files(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir())}


async def test_a_file_is_a_folder_of_numbered_parts_and_lists_whole(
    services: Services, disk: Path
) -> None:
    chunk = await chunk_of(services, "/local/parts")
    data = os.urandom(2 * PART + 100)
    await put_bytes(chunk, await chunk.root_obj(), "big.bin", data)
    assert os.listdir(disk) == [PREFIX + "big.bin"]
    parts = part_files(disk / (PREFIX + "big.bin"))
    md5 = [name for name in parts if name.startswith("hash_md5_")]
    assert {k: v for k, v in parts.items() if k not in md5} == {"0": PART, "1": PART, "2": 100}
    assert len(md5) == 1
    (listed,) = await chunk.list(await chunk.root_obj())
    assert (listed.name, listed.size, listed.is_dir) == ("big.bin", len(data), False)
    assert listed.hash_info is not None and "md5" in listed.hash_info
    assert await read_obj(chunk, listed) == data


async def test_an_exact_multiple_ends_with_a_full_part(services: Services, disk: Path) -> None:
    chunk = await chunk_of(services, "/local/parts", custom_ext=".part", store_hash=False)
    await put_bytes(chunk, await chunk.root_obj(), "even.bin", b"e" * (2 * PART))
    assert part_files(disk / (PREFIX + "even.bin")) == {"0.part": PART, "1.part": PART}


async def test_an_unsized_upload_is_cut_as_it_streams(services: Services, disk: Path) -> None:
    chunk = await chunk_of(services, "/local/parts", store_hash=False)
    data = os.urandom(3 * PART + 7)
    await chunk.put(await chunk.root_obj(), Upload("s.bin", chunks(data, 1000), None, None))
    assert part_files(disk / (PREFIX + "s.bin")) == {"0": PART, "1": PART, "2": PART, "3": 7}
    assert await read_obj(chunk, await chunk.get("/s.bin")) == data


class OpensRecorded:
    """The server's tree, noting each file a driver opens through it."""

    def __init__(self, tree: FileTree) -> None:
        self.tree = tree
        self.opened: list[str] = []
        self.get_path, self.list_path, self.link_path = (
            tree.get_path,
            tree.list_path,
            tree.link_path,
        )
        self.mount_path_of = tree.mount_path_of

    def open_path(self, path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
        self.opened.append(path.rsplit("/", 1)[1])
        return self.tree.open_path(path, offset, length)


async def test_a_range_opens_only_the_parts_it_touches(services: Services, disk: Path) -> None:
    chunk = await chunk_of(services, "/local/parts", store_hash=False)
    data = os.urandom(4 * PART)
    obj = await put_bytes(chunk, await chunk.root_obj(), "r.bin", data)
    chunk.tree = recorded = OpensRecorded(services.tree)
    assert await read_obj(chunk, obj, PART + 10, 2 * PART - 20) == data[PART + 10 : 3 * PART - 10]
    assert await read_obj(chunk, obj, 3 * PART - 1, 2) == data[3 * PART - 1 : 3 * PART + 1]
    assert recorded.opened == ["1", "2", "2", "3"]


async def test_a_file_missing_a_part_lists_as_its_folder(services: Services, disk: Path) -> None:
    chunk = await chunk_of(services, "/local/parts", store_hash=False)
    obj = await put_bytes(chunk, await chunk.root_obj(), "r.bin", b"r" * 3 * PART)
    os.remove(disk / (PREFIX + "r.bin") / "1")
    listed = find(await chunk.list(await chunk.root_obj()), PREFIX + "r.bin")
    assert listed.is_dir
    with pytest.raises(ServerError, match=r"chunk part\[1\] is missing"):
        await read_obj(chunk, obj)


async def test_a_cut_upload_over_a_file_leaves_the_old_one_whole(
    services: Services, disk: Path
) -> None:
    chunk = await chunk_of(services, "/local/parts")
    root = await chunk.root_obj()
    old = os.urandom(3 * PART)
    await put_bytes(chunk, root, "kept.bin", old)
    with pytest.raises(StreamAborted):
        await chunk.put(root, Upload("kept.bin", aborted_stream(b"n" * 2 * PART), 5 * PART, None))
    assert os.listdir(disk) == [PREFIX + "kept.bin"]
    assert await read_obj(chunk, await chunk.get("/kept.bin")) == old


async def test_a_longer_stream_than_said_leaves_nothing(services: Services, disk: Path) -> None:
    chunk = await chunk_of(services, "/local/parts")
    upload = Upload("long.bin", chunks(b"l" * (2 * PART + 1)), 2 * PART, None)
    with pytest.raises(InvalidRequest):
        await chunk.put(await chunk.root_obj(), upload)
    assert os.listdir(disk) == []


async def test_an_upload_folder_a_dead_process_left_is_swept_by_a_listing(
    services: Services, disk: Path
) -> None:
    chunk = await chunk_of(services, "/local/parts")
    left = disk / (UPLOAD_PREFIX + "0123456789abcdef")  # a crash mid-upload left it
    left.mkdir()
    (left / "0").write_bytes(b"x" * PART)
    long_ago = time.time() - 2 * 3600
    os.utime(left, (long_ago, long_ago))
    fresh = disk / (UPLOAD_PREFIX + "fedcba9876543210")  # another process's, under way
    fresh.mkdir()
    assert await chunk.list(await chunk.root_obj()) == []
    assert not left.exists()
    assert fresh.exists()


async def test_rename_move_and_remove_take_every_part(services: Services, disk: Path) -> None:
    chunk = await chunk_of(services, "/local/parts", store_hash=False)
    root = await chunk.root_obj()
    sub = await chunk.make_dir(root, "sub")
    obj = await put_bytes(chunk, root, "a.bin", b"a" * (PART + 1))
    renamed = await chunk.rename(obj, "b.bin")
    moved = await chunk.move(renamed, sub)
    assert sorted(os.listdir(disk)) == ["sub"]
    assert part_files(disk / "sub" / (PREFIX + "b.bin")) == {"0": PART, "1": 1}
    assert await read_obj(chunk, moved) == b"a" * (PART + 1)
    await chunk.remove(moved)
    assert os.listdir(disk / "sub") == []


async def test_a_plain_file_below_passes_through(services: Services, disk: Path) -> None:
    (disk / "plain.txt").write_bytes(b"written below")
    chunk = await chunk_of(services, "/local/parts", chunk_large_file_only=True)
    root = await chunk.root_obj()
    await put_bytes(chunk, root, "small.txt", b"small")
    assert sorted(os.listdir(disk)) == ["plain.txt", "small.txt"]
    listed = {o.name: o.size for o in await chunk.list(root)}
    assert listed == {"plain.txt": 13, "small.txt": 5}
    assert await read_obj(chunk, await chunk.get("/plain.txt")) == b"written below"
    with pytest.raises(ObjectExists):
        await chunk.put(root, Upload("plain.txt", chunks(b"x" * PART * 2), None, None, False))


async def test_names_kept_for_parts_are_refused(services: Services, disk: Path) -> None:
    chunk = await chunk_of(services, "/local/parts")
    with pytest.raises(InvalidName):
        await chunk.make_dir(await chunk.root_obj(), PREFIX + "x")
    with pytest.raises(InvalidName):
        await put_bytes(chunk, await chunk.root_obj(), ".manifold-chunks-1", b"x")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"part_size": 0}, "part_size must be positive"),
        ({"chunk_prefix": ""}, "chunk_prefix must not be empty"),
        ({"remote_path": "/chunked/below"}, "inside the chunk storage"),
        ({"remote_path": "/"}, "holds the chunk storage"),
    ],
)
async def test_bad_options_are_refused(
    services: Services, disk: Path, options: dict[str, Any], message: str
) -> None:
    remote = options.pop("remote_path", "/local/parts")
    with pytest.raises(InvalidRequest, match=message):
        await chunk_of(services, remote, **options)


async def _mount(api: Api, mount_path: str, driver: str, addition: dict[str, object]) -> Any:
    body = {"mount_path": mount_path, "driver": driver, "addition": json.dumps(addition)}
    return await api.post("/api/admin/storage/create", body)


async def test_through_the_api(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    (tmp_path / "below").mkdir()
    local = {"root_folder_path": str(tmp_path / "below")}
    assert (await _mount(api, "/below", "Local", local))["code"] == 200
    chunked = {"remote_path": "/below", "part_size": 1000}
    assert (await _mount(api, "/big", "Chunk", chunked))["code"] == 200
    data = os.urandom(3500)
    put = await api.client.put(
        "/api/fs/put", content=data, headers={"File-Path": "/big/f.bin", "Authorization": api.token}
    )
    assert put.json()["code"] == 200, put.text
    listing = await api.post("/api/fs/list", {"path": "/big"})
    assert [(o["name"], o["size"]) for o in listing["data"]["content"]] == [("f.bin", 3500)]
    found = await api.post("/api/fs/get", {"path": "/big/f.bin"})
    url = found["data"]["raw_url"].split("manifold.test")[1]
    ranged = await api.client.get(url, headers={"Range": "bytes=900-2100"})
    assert (ranged.status_code, ranged.content) == (206, data[900:2101])
    bad = await _mount(api, "/bad", "Chunk", {"remote_path": "/below", "part_size": -1})
    assert bad["code"] == 500 and "part_size must be positive" in bad["message"]
