"""A remote storage whose server is down at start, or goes away later, comes back by
itself: its status says why, its paths answer at once, the rest of the tree works."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import BaseModel

from manifold.container import Services
from manifold.drivers.base import DriverConfig, option
from manifold.errors import PermissionDenied, TemporaryFailure
from manifold.models import Link, LinkArgs, Obj
from manifold.services.admin import storages
from manifold.vfs import health
from tests.api.fs_helpers import CREATE, mount_local
from tests.conftest import Api
from tests.drivers.inert import InertDriver

WHEN = datetime(2024, 5, 1, tzinfo=UTC)


class RemoteOptions(BaseModel):
    # The folder whose marker files say how the pretend server behaves.
    flags: str = option("")
    token: str = option("")


class Remote(InertDriver[RemoteOptions]):
    """A back end that is down while ``flags/down`` exists, and never answers its
    login while ``flags/hang`` exists; each listing renews its token."""

    def flag(self, name: str) -> bool:
        return (Path(self.options.flags) / name).exists()

    async def init(self) -> None:
        with (Path(self.options.flags) / "inits").open("a") as log:
            log.write("init\n")
        if self.flag("denied"):
            raise PermissionDenied("login refused")
        if self.flag("hang"):
            await asyncio.Event().wait()
        if self.flag("down"):
            raise TemporaryFailure("connection refused")

    async def list(self, dir: Obj) -> list[Obj]:
        with (Path(self.options.flags) / "calls").open("a") as log:
            log.write("list\n")
        if self.flag("down"):
            raise TemporaryFailure("connection refused")
        if self.flag("renew"):
            self.options.token = "renewed-token"
            await self.save_options()
        return [Obj("a.txt", 1, False, WHEN, path="/a.txt")]

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link(url="http://192.0.2.1/a.txt")


def calls(flags: Path) -> int:
    path = flags / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def flags(tmp_path: Path) -> Path:
    folder = tmp_path / "flags"
    folder.mkdir()
    return folder


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storages, "FIRST_RETRY", 0.0)
    monkeypatch.setattr(health, "FIRST_WAIT", 0.0)


def register(services: Services, *, check_status: bool, init_timeout: float = 30.0) -> None:
    config = DriverConfig(
        name="Remote", check_status=check_status, call_timeout=5.0, init_timeout=init_timeout
    )
    services.registry.register("Remote", Remote, RemoteOptions, config)


async def create(admin: Api, flags: Path, mount_path: str = "/remote") -> dict[str, object]:
    addition = json.dumps({"flags": str(flags)})
    return await admin.post(
        CREATE, {"mount_path": mount_path, "driver": "Remote", "addition": addition}
    )


async def listing(admin: Api, path: str = "/remote") -> dict[str, object]:
    return await admin.post("/api/fs/list", {"path": path, "refresh": True})


async def status_of(admin: Api, mount_path: str = "/remote") -> str:
    body = await admin.get("/api/admin/storage/list")
    (found,) = [s for s in body["data"]["content"] if s["mount_path"] == mount_path]
    return str(found["status"])


async def test_a_storage_down_at_start_is_mounted_once_its_server_is_back(
    api: Api, services: Services, flags: Path, tmp_path: Path
) -> None:
    register(services, check_status=True)
    admin = await api.as_admin()
    await mount_local(admin, "/local", tmp_path)
    (flags / "down").touch()
    created = await create(admin, flags)
    assert created["code"] == 500
    assert "connection refused" in str(created["message"])
    assert await status_of(admin) == "connection refused"

    refused = await listing(admin)
    assert (refused["code"], refused["message"]) == (500, "storage not init: connection refused")
    assert (await listing(admin, "/local"))["code"] == 200  # the rest of the tree works
    await services.storages.revived()

    (flags / "down").unlink()
    assert (await listing(admin))["code"] == 500  # this call starts the revival
    await services.storages.revived()
    body = await listing(admin)
    assert body["code"] == 200, body
    assert [o["name"] for o in body["data"]["content"]] == ["a.txt"]
    assert await status_of(admin) == "work"


async def test_a_storage_whose_server_goes_away_refuses_at_once(
    api: Api, services: Services, flags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(services, check_status=True)
    admin = await api.as_admin()
    assert (await create(admin, flags))["code"] == 200
    assert (await listing(admin))["code"] == 200

    (flags / "down").touch()
    failed = await listing(admin)
    assert (failed["code"], failed["message"]) == (500, "connection refused")
    assert await status_of(admin) == "unreachable: connection refused"
    monkeypatch.setattr(health, "FIRST_WAIT", 3600.0)
    assert (await listing(admin))["code"] == 500  # the probe: fails, waits an hour now
    before = calls(flags)
    (flags / "down").unlink()
    for _ in range(3):
        refused = await listing(admin)
        assert refused["message"] == "storage not init: unreachable: connection refused"
    assert calls(flags) == before  # refused without asking the back end


async def test_a_probe_after_the_back_off_brings_the_storage_back(
    api: Api, services: Services, flags: Path
) -> None:
    register(services, check_status=True)
    admin = await api.as_admin()
    assert (await create(admin, flags))["code"] == 200
    (flags / "down").touch()
    assert (await listing(admin))["code"] == 500
    assert await status_of(admin) == "unreachable: connection refused"
    (flags / "down").unlink()
    body = await listing(admin)  # the back-off (0 s here) is over: this call probes
    assert body["code"] == 200, body
    assert await status_of(admin) == "work"


async def test_a_driver_without_check_status_is_still_called_while_down(
    api: Api, services: Services, flags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(services, check_status=False)
    admin = await api.as_admin()
    assert (await create(admin, flags))["code"] == 200
    (flags / "down").touch()
    monkeypatch.setattr(health, "FIRST_WAIT", 3600.0)
    before = calls(flags)
    for _ in range(3):
        assert (await listing(admin))["message"] == "connection refused"
    assert calls(flags) == before + 3
    assert await status_of(admin) == "unreachable: connection refused"


async def test_a_login_that_never_answers_fails_within_the_deadline(
    api: Api, services: Services, flags: Path, tmp_path: Path
) -> None:
    register(services, check_status=True, init_timeout=0.3)
    admin = await api.as_admin()
    await mount_local(admin, "/local", tmp_path)
    (flags / "hang").touch()
    created = await create(admin, flags)
    assert created["code"] == 500
    assert await status_of(admin) == "no answer from the back end within 0.3s"
    assert (await listing(admin, "/local"))["code"] == 200


async def test_options_a_driver_renews_are_saved(api: Api, services: Services, flags: Path) -> None:
    register(services, check_status=True)
    admin = await api.as_admin()
    created = await create(admin, flags)
    (flags / "renew").touch()
    assert (await listing(admin))["code"] == 200
    stored = await admin.get("/api/admin/storage/get", params={"id": created["data"]["id"]})
    assert json.loads(stored["data"]["addition"])["token"] == "renewed-token"


async def test_a_refused_login_is_not_tried_again_by_itself(
    api: Api, services: Services, flags: Path
) -> None:
    # A password tried again and again can lock the account: only an edit retries it.
    register(services, check_status=True)
    admin = await api.as_admin()
    (flags / "denied").touch()
    assert (await create(admin, flags))["code"] == 500
    for _ in range(3):
        assert (await listing(admin))["message"] == "storage not init: login refused"
        await services.storages.revived()
    assert (flags / "inits").read_text().splitlines() == ["init"]
