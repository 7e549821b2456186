"""An SFTP listing cut by its time limit while the server's connection went dark.

The package's other tests give up a silent SSH connection within seconds (a short
keepalive), which would hide this: here the driver keeps its own keepalive (a
server missing three of them is gone only after most of a minute), so only the
listing's time limit can end the call, and the handle's close that follows must
not wait for a server that no longer answers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from manifold.drivers.base import Driver
from manifold.drivers.sftp.driver import SftpDriver
from manifold.drivers.sftp.meta import CONFIG, Addition
from manifold.errors import TemporaryFailure
from manifold.models import Obj, Storage
from manifold.vfs.layers import wrap
from tests.faults.backends import Backend
from tests.fixtures.faultproxy import FaultProxy

LIMIT = 2.0
# Well under the keepalive's verdict (three missed 15 s keepalives), over the limit
# plus the driver's bounded clean-up.
BOUND = 30.0
MANY = 50


@pytest.fixture
def own_proxy(backends: list[Backend]) -> Iterator[tuple[FaultProxy, Backend]]:
    """A proxy of this test's own to the SFTP server the package's storage uses."""
    (sftp,) = [b for b in backends if b.name == "sftp"]
    proxy = FaultProxy(*sftp.proxy.target).start()
    yield proxy, sftp
    proxy.close()


async def pages(driver: Driver[Any], folder: Obj) -> list[Obj]:
    """A listing as the services take one: a page at a time, each a limited call."""
    return [obj async for page in driver.list_pages(folder) for obj in page]


async def test_a_listing_stalled_mid_way_fails_at_its_limit(
    own_proxy: tuple[FaultProxy, Backend],
) -> None:
    proxy, sftp = own_proxy
    folder = Path(sftp.addition["root_folder_path"]) / "stalls"
    folder.mkdir()
    for index in range(MANY):
        (folder / f"entry-{index:03}.txt").write_bytes(b"x")
    options = Addition(**(sftp.addition | {"address": proxy.address}))
    bare = SftpDriver(Storage(id=1, mount_path="/sftp", driver="SFTP"), options)
    await bare.init()
    driver = wrap(bare, dataclasses.replace(CONFIG, call_timeout=LIMIT, retries=0))
    try:
        folder = await driver.get("/stalls")
        assert len(await pages(driver, folder)) == MANY  # connected, and answering
        proxy.stall(after=200)  # the folder is open when its entries stop coming
        started = time.monotonic()
        with pytest.raises(TemporaryFailure):
            await pages(driver, folder)
        took = time.monotonic() - started
        assert took < BOUND, f"the listing took {took:.1f}s"
    finally:
        proxy.clear()
        await driver.drop()
