"""The SMB driver against a real Samba server on a private port."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from manifold.drivers.base import Driver
from manifold.drivers.smb.driver import SMBDriver
from manifold.drivers.smb.meta import CONFIG, Addition
from manifold.models import Storage
from manifold.testing.conformance import DriverConformance, DriverFactory
from manifold.vfs.layers import wrap
from tests.drivers import smb_server
from tests.drivers.smb_server import Samba

pytestmark = pytest.mark.skipif(not smb_server.available(), reason="Samba is not installed")


@pytest.fixture(scope="module")
def samba(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Samba]:
    server = smb_server.start(tmp_path_factory.mktemp("samba"))
    yield server
    server.daemon.stop()


def options(samba: Samba, **changed: Any) -> Addition:
    values = {
        "root_folder_path": ".",
        "address": samba.address,
        "username": smb_server.USER,
        "password": smb_server.PASSWORD,
        "share_name": smb_server.SHARE,
    }
    return Addition.model_validate(values | changed)


async def smb_driver(samba: Samba, **changed: Any) -> SMBDriver:
    driver = SMBDriver(Storage(id=1, mount_path="/smb", driver="SMB"), options(samba, **changed))
    await driver.init()
    return driver


class TestSMBConformance(DriverConformance):
    @pytest.fixture
    def driver_factory(self, samba: Samba) -> DriverFactory:
        async def build() -> Driver[Any]:
            return wrap(await smb_driver(samba), CONFIG)

        return build
