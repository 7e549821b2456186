"""An OAuth token rclone refreshes, across server processes that each run their own
rclone on one storage (workers, or instances on one PostgreSQL and Redis).

Providers rotate refresh tokens, so the token one process's rclone refreshed must reach
every other process's rclone, and an older one must never replace it. No OAuth
provider runs here: a ``local`` remote's section holds a ``token`` (rclone keeps it),
changed in one process's rclone with ``config/update``, as rclone's OAuth code saves a
refreshed one. Each process is a ``Services`` of its own in this test process, with
its own data folder and so its own rclone.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.drivers.rclone.driver import ASK_SECONDS
from manifold.drivers.rclone.process import Rclone, rclone_of
from tests.conftest import open_api, start_services
from tests.fixtures.dbservers import RunningServer, have_postgres, start_postgres
from tests.fixtures.redisserver import RedisServer

WAIT = 60.0  # only a guard against a hang: each check ends as soon as it holds


def token(name: str, expiry: str) -> str:
    """A token as rclone keeps it (its JSON, one line)."""
    return json.dumps({"access_token": name, "refresh_token": f"r-{name}", "expiry": expiry})


OLD = token("old", "2030-01-01T00:00:00Z")
NEW = token("new", "2031-01-01T00:00:00Z")
# Refreshed at the same time as NEW by another process, but expiring before it.
EARLIER = token("earlier", "2030-06-01T00:00:00Z")
EXPIRED = token("expired", "2020-01-01T00:00:00Z")


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[RunningServer]:
    if not have_postgres():
        pytest.fail("PostgreSQL is not installed: run the test command from README.md")
    server = start_postgres(tmp_path / "pg")
    yield server
    server.stop()


@pytest.fixture
async def stopping() -> AsyncIterator[list[Services]]:
    """The processes a test starts, stopped at its end."""
    started: list[Services] = []
    yield started
    for services in reversed(started):
        await services.stop()


async def process(folder: Path, database: str, stopping: list[Services], **env: str) -> Services:
    services = await start_services(folder, database, env=env)
    stopping.append(services)
    return services


async def create(services: Services, root: Path, config_token: str) -> int:
    root.mkdir(exist_ok=True)
    config = f"type = local\ntoken = {config_token}\n"
    addition = json.dumps({"config": config, "root_folder_path": str(root)})
    body = {"mount_path": "/rc", "driver": "Rclone", "addition": addition}
    async with open_api(services) as api:
        made = await api.post("/api/admin/storage/create", json=body, token=await api.login())
    assert made["code"] == 200, made
    return int(made["data"]["id"])


async def refresh(services: Services) -> None:
    """A call through the storage (rclone would refresh an expired token on it)."""
    async with open_api(services) as api:
        body = {"path": "/rc", "refresh": True}
        listed = await api.post("/api/fs/list", json=body, token=await api.login())
    assert listed["code"] == 200, listed


async def remote(services: Services, storage_id: int) -> str:
    """The name of the storage's remote in this process's rclone, once it has one."""
    rclone = rclone_of(services.storages.resources)

    async def named() -> str:
        names = (await rclone.call("config/listremotes", {}))["remotes"] or []
        found = [n for n in names if n.startswith(f"manifold{storage_id}_")]
        return found[0] if found else ""

    await until(lambda: _truthy(named()), "the storage is mounted")
    return await named()


async def held(rclone: Rclone, name: str) -> str:
    """The token the remote ``name`` holds in ``rclone``."""
    return str((await rclone.call("config/get", {"name": name})).get("token", ""))


async def saved(services: Services, storage_id: int) -> str:
    """The token in the storage's ``config`` as the database holds it."""
    stored = await services.storages.get(storage_id)
    config = json.loads(stored.addition)["config"]
    [line] = [line for line in config.splitlines() if line.startswith("token = ")]
    return line.removeprefix("token = ")


async def _truthy(value: Awaitable[Any]) -> bool:
    return bool(await value)


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not await check():
        assert time.monotonic() < deadline, f"not within {WAIT} s: {what}"
        await asyncio.sleep(0.1)


async def holds(services: Services, name: str, wanted: str) -> bool:
    return await held(rclone_of(services.storages.resources), name) == wanted


async def test_a_refreshed_token_reaches_the_other_instance_and_never_goes_back(
    tmp_path: Path, postgres: RunningServer, redis_server: RedisServer, stopping: list[Services]
) -> None:
    a = await process(tmp_path / "a", postgres.url, stopping, MANIFOLD_REDIS_URL=redis_server.url)
    b = await process(tmp_path / "b", postgres.url, stopping, MANIFOLD_REDIS_URL=redis_server.url)
    storage_id = await create(a, tmp_path / "root", OLD)
    in_a, in_b = await remote(a, storage_id), await remote(b, storage_id)

    # a's rclone refreshes: saved, and b's rclone takes it (no restart of b's storage).
    await rclone_of(a.storages.resources).call(
        "config/update", {"name": in_a, "parameters": {"token": NEW}}
    )
    await refresh(a)
    assert await saved(a, storage_id) == NEW
    await until(lambda: holds(b, in_b, NEW), "b's rclone holds the new token")
    assert await remote(b, storage_id) == in_b  # the same remote: not mounted again

    # b's rclone refreshed at the same time, to a token expiring earlier: it is not saved
    # over the newer one, and b's rclone takes the newer one back.
    await rclone_of(b.storages.resources).call(
        "config/update", {"name": in_b, "parameters": {"token": EARLIER}}
    )
    await refresh(b)
    await until(lambda: holds(b, in_b, NEW), "b's rclone holds the newer token again")
    assert await saved(b, storage_id) == NEW
    assert await holds(a, in_a, NEW)


async def test_a_process_that_missed_the_news_takes_the_saved_token_before_refreshing(
    tmp_path: Path, postgres: RunningServer, stopping: list[Services]
) -> None:
    """Two processes on one database with no bus between them (as one whose messages
    were lost): the one whose token expired asks the database before its next call."""
    a = await process(tmp_path / "a", postgres.url, stopping)
    storage_id = await create(a, tmp_path / "root", EXPIRED)
    b = await process(tmp_path / "b", postgres.url, stopping)
    in_a, in_b = await remote(a, storage_id), await remote(b, storage_id)
    await rclone_of(a.storages.resources).call(
        "config/update", {"name": in_a, "parameters": {"token": NEW}}
    )
    await refresh(a)
    assert await saved(a, storage_id) == NEW
    assert await holds(b, in_b, EXPIRED)  # nothing told b

    await asyncio.sleep(ASK_SECONDS)  # b last asked when it started
    await refresh(b)
    assert await holds(b, in_b, NEW)
    assert await saved(b, storage_id) == NEW
