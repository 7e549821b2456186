"""One Manifold for the whole fault package, served over real HTTP, with every remote
back end mounted through its proxy (short time limits) and a Local storage beside."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from manifold.container import Services
from manifold.vfs import health
from tests.api.fs_helpers import CREATE, make_tree, mount_local
from tests.api.live_server import serving
from tests.conftest import Api, start_services
from tests.faults.backends import (
    CALL_SECONDS,
    IDLE_SECONDS,
    INIT_SECONDS,
    Backend,
    QuickSftpDriver,
    QuickSMBDriver,
    every_backend,
)


@dataclass
class Site:
    """The server under test, its client, the remote back ends and the Local one."""

    api: Api
    backends: dict[str, Backend]
    local: Path


@pytest.fixture(scope="package")
def quick_probes() -> Iterator[None]:
    """A storage found down is probed again by the very next call."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(health, "FIRST_WAIT", 0.0)
        yield


@pytest.fixture(scope="package")
async def backends(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[list[Backend]]:
    async with every_backend(tmp_path_factory.mktemp("backends")) as found:
        yield found


@pytest.fixture(scope="package")
async def site(
    quick_probes: None, backends: list[Backend], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Site]:
    base = tmp_path_factory.mktemp("site")
    services = await start_services(base / "data")
    quicken(services)
    try:
        async with serving(services) as url, httpx.AsyncClient(base_url=url, timeout=120) as http:
            api = Api(http, services)
            await api.as_admin()
            local = make_tree(base / "local", {"keep.txt": "kept", "sub/": ""})
            await mount_local(api, "/local", local)
            for backend in backends:
                created = await api.post(CREATE, backend.storage_body())
                assert created["code"] == 200, (backend.name, created)
            yield Site(api, {b.name: b for b in backends}, local)
    finally:
        await services.stop()


def quicken(services: Services) -> None:
    """Every remote driver registered again with short time limits, no retries."""
    registry = services.registry
    for name in ("SFTP", "SMB", "WebDav", "FTP", "S3", "Azure Blob Storage", "AList V3"):
        info = registry.get(name)
        assert info.driver_cls is not None, info.reason
        config = dataclasses.replace(
            info.config,
            call_timeout=CALL_SECONDS,
            retries=0,
            idle_timeout=IDLE_SECONDS,
            init_timeout=INIT_SECONDS,
        )
        cls = {"SMB": QuickSMBDriver, "SFTP": QuickSftpDriver}.get(name, info.driver_cls)
        registry.register(name, cls, info.options, config)


async def on_every_backend(
    site: Site, work: Callable[[Backend], Awaitable[None]]
) -> dict[str, str]:
    """``work`` on every remote back end at once, each behind its own proxy (one test's
    wait is one back end's); what went wrong, by back end (empty: nothing)."""
    outcomes = await asyncio.gather(
        *(work(b) for b in site.backends.values()), return_exceptions=True
    )
    return {
        name: f"{type(outcome).__name__}: {outcome}"
        for name, outcome in zip(site.backends, outcomes, strict=True)
        if outcome is not None
    }
