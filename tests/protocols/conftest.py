"""Fixtures of the protocol tests: the app in process, a Local mount at ``/local``.

The FTP server's tests run on uvloop, the loop the server runs on in production: its
TLS transport ends a connection differently from asyncio's, and the FTP data channel
depends on how it ends. The other protocol tests keep asyncio's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import uvloop

from manifold.container import Services
from tests.api.fs_helpers import make_tree
from tests.conftest import open_api
from tests.drivers.sftp_server import SshServer
from tests.protocols.dav_helpers import Dav, mount, user

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, LoopFactory]:
    """The loop each test of this folder (and the fixtures it uses) runs on."""
    if item.path.name.startswith("test_ftp_server"):
        return {"uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[SshServer]:
    """A real OpenSSH server whose ``served`` folder SFTP storages mount."""
    folder = tmp_path / "sshd"
    (folder / "served").mkdir(parents=True)
    server = SshServer(folder).start()
    yield server
    server.stop()


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "disk", {"docs/readme.txt": "hello world", "empty/": ""})
    await mount(services, "/local", root)
    return root


@pytest.fixture
async def dav(services: Services, disk: Path) -> AsyncIterator[Dav]:
    await user(services, "dora")
    async with open_api(services) as api:
        yield Dav(api.client, "dora")
