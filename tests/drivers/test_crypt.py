"""Crypt over a Local storage: the conformance suite in each name mode, and what the
format promises a user: plain sizes, names that do not decrypt left out, a wrong
password or a damaged block answered by an error, ranges that read only their blocks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.drivers.crypt.driver import CryptDriver
from manifold.drivers.crypt.meta import Addition
from manifold.models import Storage
from manifold.testing.conformance import DriverConformance, DriverFactory

PASSWORD = "correct horse"
SALT = "battery staple"
MODES = [
    {"filename_encryption": "standard", "directory_name_encryption": "true"},
    {"filename_encryption": "obfuscate", "directory_name_encryption": "false"},
    {"filename_encryption": "off"},
]


async def mount_local(services: Services, mount_path: str, root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, mount_path, "Local", addition=addition))


async def crypt_of(services: Services, remote_path: str, **options: Any) -> CryptDriver:
    settings: dict[str, Any] = {"password": PASSWORD, "salt": SALT, **options}
    driver = CryptDriver(
        Storage(9999, "/crypt", "Crypt"), Addition(remote_path=remote_path, **settings)
    )
    driver.tree = services.tree
    await driver.init()
    return driver


class TestCryptConformance(DriverConformance):
    @pytest.fixture(params=MODES, ids=lambda m: m["filename_encryption"])
    async def driver_factory(
        self, services: Services, tmp_path: Path, request: pytest.FixtureRequest
    ) -> DriverFactory:
        await mount_local(services, "/local", tmp_path / "local")
        (tmp_path / "local" / "vault").mkdir()

        async def build() -> CryptDriver:
            return await crypt_of(services, "/local/vault", **request.param)

        return build
