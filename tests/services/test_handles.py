"""What the protocol servers call on every request: ``stat``, ``etag``, open files.

A ``ReadHandle`` is linked once and read at any offset; a ``WriteHandle`` takes
blocks in order and puts the file in place only when closed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from manifold.container import Services
from manifold.drivers.base import DriverConfig, LinkArgs
from manifold.errors import FileExists, InvalidRequest, ManifoldError, ObjectNotFound
from manifold.models import Link, Obj, Storage
from manifold.services.fs.handles import ReadHandle
from manifold.services.fs.ops import etag
from tests.api.fs_helpers import make_tree
from tests.drivers.inert import InertDriver
from tests.services.test_file_ops import caller

DATA = bytes(range(256)) * 1200  # 300 KiB


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "a", {"docs/data.bin": DATA, "docs/small.txt": "hello"})
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, "/a", "Local", addition=addition))
    return root


async def test_stat_never_lists_the_folder(
    services: Services, disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = services.tree.place("/a").ops.driver

    async def refused(*args: Any) -> list[Obj]:
        raise AssertionError("the folder was listed")

    monkeypatch.setattr(driver, "list", refused)
    assert (await services.ops.stat(caller(), "/a/docs/small.txt")).size == 5
    assert (await services.ops.stat(caller(), "/a/docs")).is_dir
    with pytest.raises(ObjectNotFound):
        await services.ops.stat(caller(), "/a/docs/missing.txt")
    with pytest.raises(AssertionError, match="listed"):
        await services.ops.list(caller(), "/a/docs")


def test_an_etag_names_one_version() -> None:
    obj = Obj("f", 10, False, datetime(2024, 5, 1, tzinfo=UTC))
    tag = etag(obj)
    assert tag.startswith('"') and tag.endswith('"') and len(tag) > 2
    assert etag(replace(obj)) == tag
    assert etag(replace(obj, size=11)) != tag
    assert etag(replace(obj, modified=obj.modified + timedelta(seconds=1))) != tag


async def test_a_local_file_is_read_at_any_offset(services: Services, disk: Path) -> None:
    async with await services.ops.open_reader(caller(), "/a/docs/data.bin") as handle:
        assert handle.obj.size == len(DATA)
        assert await handle.read(0, 32768) == DATA[:32768]
        assert await handle.read(200_000, 65536) == DATA[200_000:265_536]
        assert await handle.read(1000, 10) == DATA[1000:1010]
        assert await handle.read(len(DATA) - 5, 65536) == DATA[-5:]  # short at the end
        assert await handle.read(len(DATA) + 10, 100) == b""
        # The file stays open: replaced on disk, the handle still reads what it opened.
        (disk / "docs" / "data.bin").unlink()
        (disk / "docs" / "data.bin").write_bytes(b"other")
        assert await handle.read(5, 3) == DATA[5:8]
        assert b"".join([c async for c in handle.stream(100, 250_000)]) == DATA[100:250_100]


class CountedOptions(BaseModel):
    pass


class ReaderDriver(InertDriver[CountedOptions]):
    """Test-only: one file served by a range reader that counts how often it opens."""

    opened: ClassVar[list[int]] = []

    async def list(self, dir: Obj) -> list[Obj]:
        return [Obj("data.bin", len(DATA), False, datetime(2024, 5, 1, tzinfo=UTC), path="/d")]

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link(reader=self.read)

    async def read(self, offset: int, length: int | None) -> AsyncIterator[bytes]:
        type(self).opened.append(offset)
        end = len(DATA) if length is None else min(len(DATA), offset + length)
        for start in range(offset, end, 100_000):
            yield DATA[start : min(start + 100_000, end)]


async def test_a_reader_link_stays_open_while_reads_follow_each_other(
    services: Services,
) -> None:
    ReaderDriver.opened = []
    config = DriverConfig(name="ReaderTest", only_proxy=True)
    services.registry.register("ReaderTest", ReaderDriver, CountedOptions, config)
    await services.storages.create(Storage(0, "/r", "ReaderTest", addition="{}"))
    handle = await services.ops.open_reader(caller(), "/r/data.bin")
    try:
        got = [await handle.read(at, 32768) for at in range(0, len(DATA), 32768)]
        assert b"".join(got) == DATA
        assert ReaderDriver.opened == [0]
        assert await handle.read(1000, 5000) == DATA[1000:6000]  # a seek reopens
        assert await handle.read(6000, 10) == DATA[6000:6010]
        assert ReaderDriver.opened == [0, 1000]
    finally:
        await handle.aclose()


async def test_a_file_is_written_block_by_block(services: Services, disk: Path) -> None:
    handle = await services.ops.open_writer(caller(), "/a/docs/data.bin")
    await handle.write(0, b"new ")
    with pytest.raises(InvalidRequest):
        await handle.write(10, b"a gap")
    with pytest.raises(InvalidRequest):
        await handle.write(0, b"a rewrite")
    await handle.write(4, b"bytes")
    assert (disk / "docs" / "data.bin").read_bytes() == DATA  # whole until closed
    obj = await handle.close()
    assert obj.size == 9
    assert (disk / "docs" / "data.bin").read_bytes() == b"new bytes"
    assert (await services.ops.stat(caller(), "/a/docs/data.bin")).size == 9


async def test_an_aborted_write_leaves_nothing(services: Services, disk: Path) -> None:
    before = sorted(p.name for p in (disk / "docs").iterdir())
    handle = await services.ops.open_writer(caller(), "/a/docs/new.bin")
    await handle.write(0, DATA)
    await handle.abort()
    async with await services.ops.open_writer(caller(), "/a/docs/small.txt") as other:
        await other.write(0, b"never closed")
    assert sorted(p.name for p in (disk / "docs").iterdir()) == before
    assert (disk / "docs" / "small.txt").read_text() == "hello"


async def test_append_and_resume_start_from_the_existing_bytes(
    services: Services, disk: Path
) -> None:
    ops, who = services.ops, caller()
    handle = await ops.open_writer(who, "/a/docs/small.txt", append=True)
    assert handle.offset == 5
    await handle.write(5, b" world")
    await handle.close()
    assert (disk / "docs" / "small.txt").read_text() == "hello world"
    handle = await ops.open_writer(who, "/a/docs/small.txt", offset=6)
    await handle.write(6, b"there")
    await handle.close()
    assert (disk / "docs" / "small.txt").read_text() == "hello there"
    handle = await ops.open_writer(who, "/a/docs/fresh.txt", append=True)
    await handle.write(0, b"fresh")
    await handle.close()
    assert (disk / "docs" / "fresh.txt").read_text() == "fresh"
    with pytest.raises(InvalidRequest, match="holds 11 bytes"):
        await ops.open_writer(who, "/a/docs/small.txt", offset=12)
    with pytest.raises(InvalidRequest, match="no file to resume"):
        await ops.open_writer(who, "/a/docs/none.txt", offset=3)
    with pytest.raises(FileExists):
        await ops.open_writer(who, "/a/docs/small.txt", overwrite=False)
    assert (disk / "docs" / "small.txt").read_text() == "hello there"


async def test_a_failed_store_reaches_the_writer(services: Services, disk: Path) -> None:
    (disk / "docs" / "gone").mkdir()
    handle = await services.ops.open_writer(caller(), "/a/docs/gone/f.bin")
    (disk / "docs" / "gone").rmdir()
    (disk / "docs" / "gone").write_text("a file now")
    with pytest.raises(ManifoldError):
        await handle.write(0, b"x" * 10)
        await handle.close()
    await handle.abort()
    assert (disk / "docs" / "gone").read_text() == "a file now"


async def test_a_read_handle_on_a_bare_link(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(DATA)
    obj = Obj("f.bin", len(DATA), False, datetime(2024, 5, 1, tzinfo=UTC))
    handle = await ReadHandle.open(obj, Link(file_path=str(path)))
    assert await handle.read(7, 3) == DATA[7:10]
    await handle.aclose()
