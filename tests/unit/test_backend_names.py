"""Names a back end gives pass one check where every driver's listings and lookups
pass (``StorageOps``): an entry named so that it could not be an entry of the folder,
or with a control or text-reordering character, is left out and logged once."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from manifold.errors import NotSupported, ObjectNotFound
from manifold.models import Link, LinkArgs, Obj, Storage
from manifold.vfs.storage_ops import MemoryListCache, StorageOps
from tests.drivers.inert import InertDriver

WHEN = datetime(2024, 1, 1, tzinfo=UTC)
GOOD = ["a.txt", "%2e%2e", "...", "sub", "name with spaces", "日本語"]
# Names no folder can hold, and names no client may give (control, bidi).
IMPOSSIBLE = ["", ".", "..", "../../../secret", "a/b", "..\\..\\x", "nul\x00name"]
UNSAFE = ["rtl\u202etxt.exe", "bell\x07", "line\nbreak", "zero\u200bwidth"]
HOSTILE = IMPOSSIBLE + UNSAFE


class Options(BaseModel):
    pass


class Hostile(InertDriver[Options]):
    """Lists ``names`` in every folder, as a back end that makes names up would, and
    looks any path up as an object of the name asked for (or of ``alias``)."""

    def __init__(self, names: list[str], alias: str | None = None) -> None:
        super().__init__(Storage(3, "/hostile", "Hostile"), Options())
        self.names = names
        self.alias = alias

    def _objs(self, folder: str) -> list[Obj]:
        base = folder.rstrip("/")
        return [Obj(n, 0, n == "sub", WHEN, path=f"{base}/{n}") for n in self.names]

    async def list(self, dir: Obj) -> list[Obj]:
        return self._objs(dir.path)

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        raise NotSupported()

    async def get(self, path: str) -> Obj:
        name = path.rsplit("/", 1)[-1] if self.alias is None else self.alias
        return Obj(name, 0, name == "sub", WHEN, path=path)


class PagedHostile(Hostile):
    """The same names, a page at a time (as the S3 and SFTP drivers list)."""

    async def list_pages(self, dir: Obj) -> AsyncGenerator[list[Obj], None]:
        objs = self._objs(dir.path)
        for start in range(0, len(objs), 3):
            yield objs[start : start + 3]


def ops_over(driver: Hostile) -> StorageOps:
    return StorageOps(driver.storage, driver, MemoryListCache())


@pytest.mark.parametrize("driver_class", [Hostile, PagedHostile])
async def test_listings_leave_out_every_hostile_name(driver_class: type[Hostile]) -> None:
    ops = ops_over(driver_class(GOOD + HOSTILE))
    assert sorted(o.name for o in await ops.list("/")) == sorted(GOOD)
    assert sorted(o.name for o in await ops.list("/sub", refresh=True)) == sorted(GOOD)
    assert ops.left_out("/sub") == len(HOSTILE)


async def test_a_clean_listing_is_passed_on_as_it_came() -> None:
    ops = ops_over(Hostile(GOOD))
    assert sorted(o.name for o in await ops.list("/")) == sorted(GOOD)
    assert ops.left_out("/") == 0


async def test_a_folder_listed_clean_again_holds_nothing_left_out() -> None:
    driver = Hostile(GOOD + HOSTILE)
    ops = ops_over(driver)
    await ops.list("/sub")
    driver.names = GOOD
    await ops.list("/sub", refresh=True)
    assert ops.left_out("/sub") == 0


class Reusing(Hostile):
    """Hands out one list, the same objects in it, on every listing; ``add`` puts
    another object into that very list, as a driver that reuses its list could."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.kept: list[Obj] = self._objs("/")

    async def list(self, dir: Obj) -> list[Obj]:
        return self.kept

    def add(self, name: str) -> None:
        self.kept.append(Obj(name, 0, False, WHEN, path=f"/{name}"))


@pytest.mark.parametrize("name", HOSTILE)
async def test_a_hostile_name_added_to_a_reused_listing_is_left_out(name: str) -> None:
    driver = Reusing(GOOD)
    ops = ops_over(driver)
    for _ in range(2):  # the second listing hands out the very objects of the first
        assert sorted(o.name for o in await ops.list("/", refresh=True)) == sorted(GOOD)
    driver.add(name)
    assert sorted(o.name for o in await ops.list("/", refresh=True)) == sorted(GOOD)
    assert ops.left_out("/") == 1


async def test_each_name_left_out_is_logged_once_escaped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ops = ops_over(Hostile(GOOD + HOSTILE))
    with caplog.at_level(logging.WARNING, logger="manifold.drivers"):
        await ops.list("/sub")
        await ops.list("/sub", refresh=True)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == len(HOSTILE)
    assert all(line.startswith("storage /hostile: ") for line in lines)
    assert all(line.isascii() and "\n" not in line for line in lines)
    assert any(ascii("../../../secret") in line for line in lines)
    assert any(ascii("rtl\u202etxt.exe") in line for line in lines)


@pytest.mark.parametrize("name", HOSTILE)
async def test_a_lookup_answering_a_hostile_name_finds_nothing(name: str) -> None:
    ops = ops_over(Hostile(GOOD, alias=name))
    with pytest.raises(ObjectNotFound):
        await ops.get("/asked.txt")


async def test_a_lookup_of_a_good_name_finds_it() -> None:
    ops = ops_over(Hostile(GOOD))
    assert (await ops.get("/sub/a.txt")).name == "a.txt"


@pytest.mark.parametrize("name", UNSAFE)
async def test_nothing_is_found_through_a_name_left_out(name: str) -> None:
    ops = ops_over(Hostile(GOOD))
    with pytest.raises(ObjectNotFound):
        await ops.get(f"/{name}/a.txt")
    with pytest.raises(ObjectNotFound):
        await ops.list(f"/sub/{name}")
