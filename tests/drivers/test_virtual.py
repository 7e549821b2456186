"""Virtual: the read-only conformance checks, a tree that is the same on every listing
and lookup and ends at ``depth``, bytes that read the same in any range, and the
options it refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from manifold.drivers.virtual.driver import VirtualDriver
from manifold.drivers.virtual.meta import Addition
from manifold.errors import InvalidRequest, ObjectNotFound
from manifold.models import Storage
from manifold.testing.conformance import DriverConformance, DriverFactory, read_obj
from tests.conftest import Api

SMALL = {"num_file": 4, "num_folder": 3, "min_file_size": 1, "max_file_size": 200_000}


async def virtual(**options: Any) -> VirtualDriver:
    driver = VirtualDriver(Storage(9996, "/virtual", "Virtual"), Addition(**options))
    await driver.init()
    return driver


class TestVirtualConformance(DriverConformance):
    @pytest.fixture
    async def driver_factory(self) -> DriverFactory:
        async def build() -> VirtualDriver:
            return await virtual(**SMALL)

        return build


async def test_the_tree_is_the_same_every_time_and_ends_at_its_depth() -> None:
    first, second = await virtual(**SMALL, depth=2), await virtual(**SMALL, depth=2)
    root = await first.list(await first.root_obj())
    assert root == await second.list(await second.root_obj())
    assert (sum(not o.is_dir for o in root), sum(o.is_dir for o in root)) == (4, 3)
    assert all(1 <= o.size <= 200_000 for o in root if not o.is_dir)
    level_one = next(o for o in root if o.is_dir)
    level_two = next(o for o in await first.list(level_one) if o.is_dir)
    assert [o.is_dir for o in await first.list(level_two)] == [False] * 4
    deep_file = next(o for o in await first.list(level_two) if not o.is_dir)
    path = f"/{level_one.name}/{level_two.name}/{deep_file.name}"
    assert await second.get(path) == deep_file
    with pytest.raises(ObjectNotFound):
        await second.get(f"/{level_one.name}/nothing")
    other = await virtual(**SMALL, root_folder_path="/elsewhere")
    assert {o.name for o in await other.list(await other.root_obj())}.isdisjoint(
        {o.name for o in root}
    )


async def test_bytes_read_the_same_in_any_range() -> None:
    driver = await virtual(num_file=1, num_folder=0, min_file_size=300_000, max_file_size=300_000)
    (file,) = await driver.list(await driver.root_obj())
    whole = await read_obj(driver, file)
    assert len(whole) == 300_000
    assert whole[:1000] != bytes(1000)  # random, not zeros
    for start, length in ((0, 1), (65_535, 3), (100_000, 150_000), (299_999, None)):
        end = None if length is None else start + length
        assert await read_obj(driver, file, start, length) == whole[start:end]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_file": -1}, "must be 0 or more"),
        ({"min_file_size": 10, "max_file_size": 5}, "must not be more than max_file_size"),
        ({"num_file": 400_000, "num_folder": 200_000}, "longer than listings may be"),
    ],
)
async def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        await virtual(**options)


async def test_through_the_api(api: Api) -> None:
    await api.as_admin()
    addition = json.dumps(
        {"num_file": 2, "num_folder": 1, "min_file_size": 100, "max_file_size": 5000}
    )
    body = {"mount_path": "/v", "driver": "Virtual", "addition": addition}
    created = await api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created
    listing = await api.post("/api/fs/list", {"path": "/v"})
    files = [o for o in listing["data"]["content"] if not o["is_dir"]]
    found = await api.post("/api/fs/get", {"path": f"/v/{files[0]['name']}"})
    url = found["data"]["raw_url"].split("manifold.test")[1]
    whole = (await api.client.get(url)).content
    assert len(whole) == found["data"]["size"] == files[0]["size"]
    ranged = await api.client.get(url, headers={"Range": "bytes=10-19"})
    assert (ranged.status_code, ranged.content) == (206, whole[10:20])
