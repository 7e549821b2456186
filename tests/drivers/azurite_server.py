"""A real Azure Blob Storage for the tests: Azurite's blob service (the npm package
``azurite`` in ``tests/fixtures/azurite``, installed by ``scripts/test`` with
``npm ci``), on a private port, keeping its data in a folder of the test's own.

Azurite has one account, whose name and key are public constants of its documentation
(the development storage account). ``Azurite.account()`` gives the endpoint, account
and key any client needs, the Azure Blob Storage driver's tests and an rclone
``azureblob`` remote alike (``endpoint`` is the account's URL, path-style).
``Azurite`` also holds a client of its own: the test's view of a container,
independent of the driver under test.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob.aio import BlobServiceClient

from manifold.drivers.azure_blob.driver import AzureBlobDriver
from manifold.drivers.azure_blob.meta import Addition
from manifold.models import Storage
from tests.fixtures.processes import Daemon, free_port, port_open

AZURITE_DIR = Path(__file__).parents[1] / "fixtures" / "azurite"
AZURITE_BLOB = AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob"
# Azurite's development account: public, the same in every installation.
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass(frozen=True, slots=True)
class AzureAccount:
    """What a client needs to reach the account: its blob endpoint, name and key."""

    endpoint: str
    account: str
    key: str


class Azurite:
    """One Azurite blob service; ``start`` again after ``kill`` keeps its data."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}/{ACCOUNT}"
        data = folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        argv = [
            str(AZURITE_BLOB),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            "--location",
            str(data),
            "--loose",
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--silent",
        ]
        self.daemon = Daemon(
            f"azurite-{self.port}",
            argv,
            lambda: port_open(self.port),
            folder / f"azurite-{self.port}.log",
        )

    def account(self) -> AzureAccount:
        return AzureAccount(self.endpoint, ACCOUNT, KEY)

    def client(self) -> BlobServiceClient:
        """A client of the test's own (close it: ``async with``)."""
        return BlobServiceClient(
            self.endpoint, credential={"account_name": ACCOUNT, "account_key": KEY}
        )

    async def names(self, container: str, prefix: str = "", uncommitted: bool = False) -> list[str]:
        """The blobs of ``container`` under ``prefix`` as the service has them; with
        ``uncommitted`` also those that have only uncommitted blocks."""
        include = ["uncommittedblobs"] if uncommitted else None
        async with self.client() as service:
            blobs = service.get_container_client(container).list_blobs(
                name_starts_with=prefix or None, include=include
            )
            return [blob.name async for blob in blobs]

    async def put(self, container: str, name: str, data: bytes = b"x", **params: Any) -> None:
        async with self.client() as service:
            blob = service.get_container_client(container).get_blob_client(name)
            await blob.upload_blob(data, overwrite=True, **params)

    async def drop_container(self, container: str) -> None:
        async with self.client() as service:
            await service.get_container_client(container).delete_container()

    def options(self, container: str, **options: Any) -> Addition:
        fields: dict[str, Any] = {
            "root_folder_path": "/",
            "endpoint": self.endpoint,
            "access_key": KEY,
            "container_name": container,
        }
        return Addition(**(fields | options))


def start_azurite(folder: Path) -> Azurite:
    """A started Azurite keeping its data in ``folder``; the test is skipped where
    Node.js or the package is missing (``scripts/test`` installs both)."""
    if shutil.which("node") is None or not AZURITE_BLOB.exists():
        pytest.skip("Node.js or azurite is missing (scripts/test installs them)")
    server = Azurite(folder)
    server.daemon.start()
    return server


def azurite(folder: Path) -> Iterator[Azurite]:
    """A started Azurite for a fixture, stopped when the fixture ends."""
    server = start_azurite(folder)
    try:
        yield server
    finally:
        server.daemon.stop()


async def azure_driver(
    server: Azurite, container: str, cls: type[AzureBlobDriver] = AzureBlobDriver, **options: Any
) -> AzureBlobDriver:
    """An initialised driver of ``cls`` for ``container`` on ``server``."""
    storage = Storage(id=1, mount_path="/azure", driver="Azure Blob Storage")
    driver = cls(storage, server.options(container, **options))
    await driver.init()
    return driver
