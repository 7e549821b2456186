"""Storages start in the background, each on its own: the server answers at once, a
storage serves as soon as its own driver is up, and one whose back end never answers
holds only its own paths (``storage not init: loading``), at start and at ``load_all``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel

from manifold.config import load_config
from manifold.container import Services
from manifold.drivers.base import DriverConfig
from manifold.models import Link, LinkArgs, Obj, TaskState
from tests.api.fs_helpers import fs_list, make_tree, names, store
from tests.conftest import ADMIN_PASSWORD, Api, open_api, start_services
from tests.drivers.inert import InertDriver
from tests.fixtures.silent import Silent, sftp_addition, silent_server

STUCK = 120  # seconds after which what has not happened is taken as never happening
LOADING = (500, "storage not init: loading")


class HeldOptions(BaseModel):
    pass


class Held(InertDriver[HeldOptions]):
    """A back end whose login waits for ``release``; it counts its drops."""

    started: ClassVar[asyncio.Event]
    release: ClassVar[asyncio.Event]
    drops: ClassVar[int] = 0

    async def init(self) -> None:
        type(self).started.set()
        await type(self).release.wait()

    async def drop(self) -> None:
        type(self).drops += 1

    async def list(self, dir: Obj) -> list[Obj]:
        return []

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link()


@pytest.fixture
def held() -> type[Held]:
    Held.started, Held.release, Held.drops = asyncio.Event(), asyncio.Event(), 0
    return Held


@pytest.fixture
def silent() -> Iterator[Silent]:
    with silent_server() as server:
        yield server


async def store_two(services: Services, tmp_path: Path, silent: Silent) -> None:
    root = make_tree(tmp_path / "a", {"here.txt": "here"})
    await store(services, "/a", "Local", {"root_folder_path": str(root)})
    await store(services, "/slow", "SFTP", sftp_addition(silent))


async def served(api: Api, path: str) -> None:
    """Wait until the storage at ``path`` has started (a Local one starts at once)."""
    async with asyncio.timeout(STUCK):
        while (await fs_list(api, path))["code"] != 200:  # noqa: ASYNC110 - as a client
            await asyncio.sleep(0.05)


async def answers_while_slow_starts(services: Services) -> None:
    async with open_api(services) as api:
        await api.as_admin()
        await served(api, "/a")
        assert names(await fs_list(api, "/a")) == ["here.txt"]
        slow = await fs_list(api, "/slow", refresh=True)
        assert (slow["code"], slow["message"]) == LOADING, slow
        assert sorted(names(await fs_list(api, "/"))) == ["a", "slow"]
        shown = (await api.get("/api/admin/storage/list"))["data"]["content"]
        assert {s["mount_path"]: s["status"] for s in shown} == {"/a": "work", "/slow": "loading"}


async def test_a_local_storage_serves_at_start_while_a_silent_one_loads(
    tmp_path: Path, silent: Silent
) -> None:
    data = tmp_path / "data"
    first = await start_services(data)
    await store_two(first, tmp_path, silent)
    await first.stop()
    services = Services.build(load_config(data, env={}))
    try:
        async with asyncio.timeout(STUCK):
            await services.start(admin_password=ADMIN_PASSWORD)
        await answers_while_slow_starts(services)
        assert silent.connections() == 1  # the SFTP login is under way, unanswered
    finally:
        await services.stop()


async def test_load_all_restarts_each_storage_on_its_own(
    services: Services, tmp_path: Path, silent: Silent
) -> None:
    await store_two(services, tmp_path, silent)
    async with open_api(services) as api:
        await api.as_admin()
        async with asyncio.timeout(STUCK):
            assert (await api.post("/api/admin/storage/load_all"))["code"] == 200
    await answers_while_slow_starts(services)


async def test_a_storage_stopped_while_starting_drops_its_driver(
    services: Services, held: type[Held]
) -> None:
    services.registry.register("Held", held, HeldOptions, DriverConfig(name="Held"))
    await store(services, "/held", "Held", {})
    loading = asyncio.create_task(services.storages.load_all())
    async with asyncio.timeout(STUCK):
        await held.started.wait()
    loading.cancel()  # whatever still runs of the reload is stopped, as at a shutdown
    await asyncio.gather(loading, return_exceptions=True)
    await services.storages.stop()
    assert held.drops == 1


async def test_a_task_waits_for_the_storage_it_needs(
    services: Services, tmp_path: Path, held: type[Held]
) -> None:
    services.registry.register("Held", held, HeldOptions, DriverConfig(name="Held"))
    root = make_tree(tmp_path / "a", {"here.txt": "here"})
    await store(services, "/a", "Local", {"root_folder_path": str(root)})
    await store(services, "/held", "Held", {})
    await services.storages.load_all()
    async with asyncio.timeout(STUCK):
        await held.started.wait()
    payload = {"src": "/held/x.txt", "dst_dir": "/a"}
    task = await services.tasks.submit("copy", "copy from a loading storage", None, payload)
    await asyncio.sleep(1.0)
    assert services.tasks.get(task.id).state == TaskState.RUNNING  # waiting, not failed
    held.release.set()
    async with asyncio.timeout(STUCK):
        done = await services.tasks.wait_done(task.id)
    # Each run waited for the storage, then asked it (it holds no such file).
    assert (done.state, done.error) == (TaskState.FAILED, "object not found")
