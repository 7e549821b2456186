"""Storage administration through /api/admin/storage/* and the driver catalogue."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel

from manifold.drivers.base import Driver, DriverConfig, LinkArgs
from manifold.errors import ServerError
from manifold.models import Link, Obj
from tests.api.fs_helpers import (
    CREATE,
    create_local,
    fs_list,
    local_body,
    make_tree,
    mount_local,
    names,
    storage_by_mount,
)
from tests.conftest import Api

STUCK = 120  # seconds after which a start that has not begun is taken as stuck


# What the `root` fixture makes (tests/api/conftest.py).
TREE: dict[str, bytes | str] = {"a.txt": "alpha", "sub/b.txt": "beta"}


async def test_create_list_get_round_trip(api: Api, root: Path) -> None:
    await api.as_admin()
    sid = await mount_local(api, "/local", root, remark="my disk", order=3)
    listing = await api.get("/api/admin/storage/list")
    assert listing["code"] == 200
    assert listing["data"]["total"] == 1
    [shown] = listing["data"]["content"]
    assert shown["id"] == sid
    assert shown["mount_path"] == "/local"
    assert shown["driver"] == "Local"
    assert shown["status"] == "work"
    assert shown["remark"] == "my disk"
    assert shown["order"] == 3
    assert json.loads(shown["addition"])["root_folder_path"] == str(root)
    got = await api.get("/api/admin/storage/get", params={"id": sid})
    assert got["code"] == 200
    # The list adds the disk's usage (OpenList's ``mount_details``); a get does not.
    assert got["data"] == {k: v for k, v in shown.items() if k != "mount_details"}


async def test_get_missing_storage_is_an_error(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/storage/get", params={"id": 999})
    assert body["code"] == 500
    assert body["message"].endswith("record not found")


async def test_mount_path_is_cleaned(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "local//x/../y/", root)
    shown = await storage_by_mount(api, "/local/y")
    assert shown["status"] == "work"
    assert set(names(await fs_list(api, "/local/y"))) == {"a.txt", "sub"}


@pytest.mark.parametrize("second", ["/local", "/local/", "local", "//local/./"])
async def test_duplicate_mount_path_is_refused(api: Api, root: Path, second: str) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await create_local(api, second, root)
    assert body["code"] == 500, body
    listing = await api.get("/api/admin/storage/list")
    assert listing["data"]["total"] == 1


@pytest.mark.parametrize(
    "addition",
    ["not json", "{", "[1, 2]", "{}", json.dumps({"show_hidden": True})],
    ids=["garbage", "truncated", "array", "empty", "no-root"],
)
async def test_bad_addition_is_a_bad_request(api: Api, root: Path, addition: str) -> None:
    await api.as_admin()
    body = await create_local(api, "/local", root, addition=addition)
    assert body["code"] == 400, body
    listing = await api.get("/api/admin/storage/list")
    assert listing["data"]["total"] == 0


async def test_unknown_driver_is_an_error(api: Api, root: Path) -> None:
    await api.as_admin()
    body = await api.post(CREATE, {**local_body("/x", root), "driver": "NoSuchDriver"})
    assert body["code"] != 200
    assert "NoSuchDriver" in body["message"]
    listing = await api.get("/api/admin/storage/list")
    assert listing["data"]["total"] == 0


async def test_missing_root_keeps_server_running(api: Api, root: Path, tmp_path: Path) -> None:
    await api.as_admin()
    good = await mount_local(api, "/good", root)
    body = await create_local(api, "/broken", tmp_path / "does-not-exist")
    assert body["code"] == 500, body
    assert isinstance(body["data"]["id"], int)
    assert body["data"]["id"] != good
    shown = await storage_by_mount(api, "/broken")
    assert shown["id"] == body["data"]["id"]
    assert shown["status"] != "work"
    assert shown["status"]
    # The server keeps answering and the working storage keeps working.
    assert set(names(await fs_list(api, "/good"))) == {"a.txt", "sub"}
    assert (await storage_by_mount(api, "/good"))["status"] == "work"
    broken = await fs_list(api, "/broken")
    assert broken["code"] == 500


async def test_broken_mount_never_falls_through_to_parent(
    api: Api, root: Path, tmp_path: Path
) -> None:
    await api.as_admin()
    make_tree(root, {"broken/leak.txt": "parent content"})
    await mount_local(api, "/", root)
    body = await create_local(api, "/broken", tmp_path / "nowhere")
    assert body["code"] == 500
    for path in ("/broken", "/broken/leak.txt"):
        listed = await fs_list(api, path)
        assert listed["code"] != 200, listed
        got = await api.post("/api/fs/get", {"path": path})
        assert got["code"] != 200, got
        assert "parent content" not in str(got)
    # The parent mount itself still works.
    assert "a.txt" in names(await fs_list(api, "/"))


async def test_update_moves_the_mount(api: Api, root: Path) -> None:
    await api.as_admin()
    sid = await mount_local(api, "/old", root)
    shown = await storage_by_mount(api, "/old")
    shown.update(mount_path="/new/", remark="moved")
    body = await api.post("/api/admin/storage/update", shown)
    assert body["code"] == 200, body
    got = await api.get("/api/admin/storage/get", params={"id": sid})
    assert got["data"]["mount_path"] == "/new"
    assert got["data"]["remark"] == "moved"
    assert set(names(await fs_list(api, "/new"))) == {"a.txt", "sub"}
    assert (await fs_list(api, "/old"))["code"] == 500


async def test_update_to_a_missing_root_reports_failure(
    api: Api, root: Path, tmp_path: Path
) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    shown = await storage_by_mount(api, "/local")
    shown["addition"] = json.dumps({"root_folder_path": str(tmp_path / "gone")})
    body = await api.post("/api/admin/storage/update", shown)
    assert body["code"] == 500
    assert (await storage_by_mount(api, "/local"))["status"] != "work"
    assert (await fs_list(api, "/local"))["code"] == 500


async def test_delete_unmounts(api: Api, root: Path) -> None:
    await api.as_admin()
    sid = await mount_local(api, "/local", root)
    keep = await mount_local(api, "/keep", root)
    body = await api.post(f"/api/admin/storage/delete?id={sid}")
    assert body["code"] == 200, body
    listing = await api.get("/api/admin/storage/list")
    assert [s["id"] for s in listing["data"]["content"]] == [keep]
    assert (await fs_list(api, "/local"))["code"] == 500
    assert names(await fs_list(api, "/")) == ["keep"]
    again = await api.post(f"/api/admin/storage/delete?id={sid}")
    assert again["code"] == 500


async def test_disable_and_enable(api: Api, root: Path) -> None:
    await api.as_admin()
    sid = await mount_local(api, "/local", root)
    await mount_local(api, "/other", root)
    body = await api.post(f"/api/admin/storage/disable?id={sid}")
    assert body["code"] == 200, body
    disabled = await storage_by_mount(api, "/local")
    assert (disabled["disabled"], disabled["status"]) == (True, "disabled")
    assert (await api.get(f"/api/admin/storage/get?id={sid}"))["data"]["status"] == "disabled"
    assert (await fs_list(api, "/local"))["code"] == 500
    assert (await fs_list(api, "/local/a.txt"))["code"] == 500
    assert names(await fs_list(api, "/")) == ["other"]
    assert (await api.post(f"/api/admin/storage/disable?id={sid}"))["code"] != 200

    body = await api.post(f"/api/admin/storage/enable?id={sid}")
    assert body["code"] == 200, body
    enabled = await storage_by_mount(api, "/local")
    assert (enabled["disabled"], enabled["status"]) == (False, "work")
    assert set(names(await fs_list(api, "/local"))) == {"a.txt", "sub"}
    assert (await api.post(f"/api/admin/storage/enable?id={sid}"))["code"] != 200


async def test_enable_twice_answers_500_like_alist(api: Api, root: Path) -> None:
    await api.as_admin()
    sid = await mount_local(api, "/local", root)
    assert (await api.post(f"/api/admin/storage/enable?id={sid}"))["code"] == 500


async def test_load_all_keeps_storages_working(api: Api, root: Path, tmp_path: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await create_local(api, "/broken", tmp_path / "nowhere")
    body = await api.post("/api/admin/storage/load_all")
    assert body["code"] == 200, body
    await api.services.storages.started()  # the storages start again in the background
    assert set(names(await fs_list(api, "/local"))) == {"a.txt", "sub"}
    assert (await storage_by_mount(api, "/broken"))["status"] != "work"


async def test_list_paging(api: Api, root: Path) -> None:
    await api.as_admin()
    for n in range(5):
        await mount_local(api, f"/m{n}", root)
    body = await api.get("/api/admin/storage/list", params={"page": 2, "per_page": 2})
    assert body["data"]["total"] == 5
    assert [s["mount_path"] for s in body["data"]["content"]] == ["/m2", "/m3"]


async def test_storage_endpoints_require_admin(api: Api, root: Path) -> None:
    await api.make_user("bob", "bob-password-1")
    token = await api.login("bob", "bob-password-1")
    body = await api.post(CREATE, local_body("/x", root), token=token)
    assert body["code"] in (401, 403)
    body = await api.get("/api/admin/storage/list", token=token)
    assert body["code"] in (401, 403)


async def test_driver_catalogue(api: Api) -> None:
    await api.as_admin()
    listed = await api.get("/api/admin/driver/list")
    assert listed["code"] == 200
    assert "Local" in listed["data"]
    assert set(listed["data"]["Local"]) == {"common", "additional", "config"}
    driver_names = await api.get("/api/admin/driver/names")
    assert "Local" in driver_names["data"]
    info = await api.get("/api/admin/driver/info", params={"driver": "Local"})
    assert info["code"] == 200
    assert set(info["data"]) == {"common", "additional", "config"}
    assert info["data"]["config"]["name"] == "Local"
    additional = {item["name"] for item in info["data"]["additional"]}
    assert "root_folder_path" in additional
    missing = await api.get("/api/admin/driver/info", params={"driver": "Nope"})
    assert missing["code"] != 200


# --- no listing outlives the storage instance that made it ---------------------------


@pytest.fixture
def two_roots(tmp_path: Path) -> tuple[Path, Path]:
    a = make_tree(tmp_path / "a", {"sub/from-a.txt": "a"})
    b = make_tree(tmp_path / "b", {"sub/from-b.txt": "b"})
    return a, b


async def test_an_edited_root_shows_its_own_sub_folders_at_once(
    api: Api, two_roots: tuple[Path, Path]
) -> None:
    a, b = two_roots
    await api.as_admin()
    await mount_local(api, "/m", a)
    assert names(await fs_list(api, "/m/sub")) == ["from-a.txt"]
    shown = await storage_by_mount(api, "/m")
    shown["addition"] = json.dumps({"root_folder_path": str(b)})
    assert (await api.post("/api/admin/storage/update", shown))["code"] == 200
    assert names(await fs_list(api, "/m/sub")) == ["from-b.txt"]


async def test_a_new_storage_reusing_a_deleted_id_never_serves_its_listings(
    api: Api, two_roots: tuple[Path, Path]
) -> None:
    a, b = two_roots
    await api.as_admin()
    old = await mount_local(api, "/m", a)
    assert names(await fs_list(api, "/m/sub")) == ["from-a.txt"]
    assert (await api.post(f"/api/admin/storage/delete?id={old}"))["code"] == 200
    new = await mount_local(api, "/m", b)
    assert new == old  # the database hands the freed id out again
    assert names(await fs_list(api, "/m/sub")) == ["from-b.txt"]


async def test_disabling_and_enabling_drops_the_kept_listings(
    api: Api, two_roots: tuple[Path, Path]
) -> None:
    a, _ = two_roots
    await api.as_admin()
    sid = await mount_local(api, "/m", a)
    assert names(await fs_list(api, "/m/sub")) == ["from-a.txt"]
    (a / "sub" / "from-a.txt").rename(a / "sub" / "renamed.txt")
    assert (await api.post(f"/api/admin/storage/disable?id={sid}"))["code"] == 200
    assert (await api.post(f"/api/admin/storage/enable?id={sid}"))["code"] == 200
    assert names(await fs_list(api, "/m/sub")) == ["renamed.txt"]


# --- a failed mount releases its driver ------------------------------------------------


class FailingOptions(BaseModel):
    pass


class FailingDriver(Driver[FailingOptions]):
    dropped: ClassVar[int] = 0

    async def init(self) -> None:
        raise RuntimeError("a library bug, not a Manifold error")

    async def drop(self) -> None:
        type(self).dropped += 1

    async def list(self, dir: Obj) -> list[Obj]:
        return []

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link()


async def test_a_mount_failing_unexpectedly_drops_its_driver(api: Api) -> None:
    api.services.registry.register(
        "Failing", FailingDriver, FailingOptions, DriverConfig(name="Failing")
    )
    await api.as_admin()
    body = await api.post(CREATE, {"mount_path": "/f", "driver": "Failing", "addition": "{}"})
    assert body["code"] == 500, body
    assert (await storage_by_mount(api, "/f"))["status"] == "failed init storage: RuntimeError"
    assert FailingDriver.dropped == 1


# -- usage and editing -----------------------------------------------------------


async def test_a_mount_point_tells_its_space_and_a_folder_below_does_not(
    api: Api, root: Path
) -> None:
    await api.as_admin()
    (root / "below").mkdir()
    await mount_local(api, "/local", root)
    found = await api.post("/api/fs/get", {"path": "/local"})
    details = found["data"]["mount_details"]
    fs = os.statvfs(root)
    assert details["total_space"] == fs.f_blocks * fs.f_frsize
    # What no writer may use is used, blocks kept for root included (as SMB tells).
    assert details["used_space"] == details["total_space"] - details["free_space"]
    below = await api.post("/api/fs/get", {"path": "/local/below"})
    assert below["code"] == 200 and "mount_details" not in below["data"]


async def test_the_storage_list_shows_a_local_disk_s_usage(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    api.services.registry.register(
        "Failing", FailingDriver, FailingOptions, DriverConfig(name="Failing")
    )
    await api.post(CREATE, {"mount_path": "/f", "driver": "Failing", "addition": "{}"})
    shown = {
        s["mount_path"]: s for s in (await api.get("/api/admin/storage/list"))["data"]["content"]
    }
    usage = shutil.disk_usage(root)
    details = shown["/local"]["mount_details"]
    assert set(details) == {"total_space", "used_space", "free_space"}
    assert details["total_space"] == usage.total
    assert 0 < details["used_space"] < details["total_space"]
    assert 0 <= details["free_space"] <= details["total_space"]
    assert "mount_details" not in shown["/f"]  # a storage that is not running knows nothing


class HeldOptions(BaseModel):
    tag: str = ""
    hold: bool = False


class HeldDriver(Driver[HeldOptions]):
    """Lists one entry named after its ``tag``; with ``hold``, its start waits for
    ``release``. A dropped instance refuses to list."""

    started: ClassVar[asyncio.Event]
    release: ClassVar[asyncio.Event]

    async def init(self) -> None:
        self.dropped = False
        if self.options.hold:
            type(self).started.set()
            await type(self).release.wait()

    async def drop(self) -> None:
        self.dropped = True

    async def list(self, dir: Obj) -> list[Obj]:
        if self.dropped:
            raise ServerError("a dropped driver was used")
        return [Obj(name=self.options.tag, size=0, is_dir=False, modified=datetime.now(UTC))]

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link()


async def test_an_edited_storage_is_loading_until_its_new_driver_is_up(api: Api) -> None:
    HeldDriver.started, HeldDriver.release = asyncio.Event(), asyncio.Event()
    api.services.registry.register(
        "Held", HeldDriver, HeldOptions, DriverConfig(name="Held", no_cache=True)
    )
    await api.as_admin()
    made = await api.post(
        CREATE, {"mount_path": "/h", "driver": "Held", "addition": '{"tag": "old"}'}
    )
    sid = made["data"]["id"]
    assert names(await fs_list(api, "/h")) == ["old"]
    stored = (await api.get("/api/admin/storage/get", params={"id": sid}))["data"]
    edited = {**stored, "addition": json.dumps({"tag": "new", "hold": True})}
    update = asyncio.create_task(api.post("/api/admin/storage/update", edited))
    async with asyncio.timeout(STUCK):
        await HeldDriver.started.wait()
    during = await fs_list(api, "/h", refresh=True)
    assert (during["code"], during["message"]) == (500, "storage not init: loading"), during
    HeldDriver.release.set()
    assert (await update)["code"] == 200
    assert names(await fs_list(api, "/h")) == ["new"]
