"""The S3 driver against moto's S3 server: the conformance suite, paging, links,
multipart uploads, folder operations that fail midway, faults, and the API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from manifold.drivers.base import Driver
from manifold.drivers.s3.meta import CONFIG
from manifold.testing.conformance import (
    AWKWARD_NAMES,
    DriverConformance,
    DriverFactory,
    Place,
    find,
    put_bytes,
    read_obj,
    require,
)
from manifold.vfs.layers import wrap
from tests.drivers.s3_server import S3Server, s3_driver, started

BUCKET = "manifold-s3-tests"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("s3-logs")


@pytest.fixture(scope="module")
async def s3(logs: Path) -> AsyncIterator[S3Server]:
    async for server in started(logs):
        await server.bucket(BUCKET)
        yield server


class TestS3Conformance(DriverConformance):
    @pytest.fixture
    def driver_factory(self, s3: S3Server) -> DriverFactory:
        async def build() -> Driver[Any]:
            return wrap(await s3_driver(s3, BUCKET), CONFIG)

        return build

    # The suite's own version asks ``type(driver).capabilities()``, which a wrapped
    # driver (a ``Layer``) cannot answer: the same test, asking the instance.
    @pytest.mark.parametrize("name", AWKWARD_NAMES)
    async def test_awkward_file_name(self, driver: Driver[Any], place: Place, name: str) -> None:
        require(driver, "put")
        data = name.encode() * 3
        await put_bytes(driver, place.obj, name, data)
        listed = find(await driver.list(place.obj), name)
        assert await read_obj(driver, listed) == data
        assert (await driver.get(place.child(name))).name == name
