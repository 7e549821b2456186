"""The AList V3 driver against a real remote: a second Manifold over HTTP.

Most tests share one remote served in this process; the fault tests kill a remote
running as a process of its own and start it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import httpx
import pytest

from manifold.drivers.alist_v3.driver import NOT_MOUNTABLE, AListV3Driver
from manifold.drivers.alist_v3.meta import CONFIG, Addition
from manifold.drivers.base import Driver, LinkArgs, Upload
from manifold.drivers.local.driver import LocalDriver
from manifold.drivers.local.meta import CONFIG as LOCAL_CONFIG
from manifold.drivers.local.meta import Addition as LocalAddition
from manifold.errors import (
    ManifoldError,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.models import Obj, Storage
from manifold.services.fs.streams import open_range
from manifold.testing.conformance import (
    DriverConformance,
    DriverFactory,
    chunks,
    put_bytes,
    read_obj,
)
from manifold.vfs.layers import TimeoutLayer, wrap
from manifold.vfs.storage_ops import MemoryListCache, StorageOps
from tests.api.fs_helpers import save_settings
from tests.api.test_archives import zip_bytes
from tests.conftest import ADMIN_PASSWORD, Api
from tests.drivers.alist_v3_server import (
    MOUNT,
    USER,
    USER_PASSWORD,
    Remote,
    RemoteProcess,
    in_process,
    serving_tls,
)
from tests.drivers.driver_helpers import driver_form, form_items
from tests.drivers.space_helpers import df, near
from tests.fixtures.processes import free_port

# Long enough for anything on a slow shared machine; only a hang reaches it.
HANG = 120


@pytest.fixture(scope="module")
async def remote(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Remote]:
    async with in_process(tmp_path_factory.mktemp("alist-remote")) as running:
        yield running


@pytest.fixture(scope="module")
async def process(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RemoteProcess]:
    started = RemoteProcess(tmp_path_factory.mktemp("alist-process"))
    await started.start()
    try:
        await started.remote.set_up()
        yield started
    finally:
        await started.stop()


def build(remote: Remote, **options: Any) -> AListV3Driver:
    fields: dict[str, Any] = {
        "root_folder_path": MOUNT,
        "url": remote.url + "/",
        "username": USER,
        "password": USER_PASSWORD,
        **options,
    }
    return AListV3Driver(Storage(id=7, mount_path="/remote", driver="AList V3"), Addition(**fields))


async def mounted(remote: Remote, **options: Any) -> Driver[Any]:
    """A driver as the server mounts it: initialised, then wrapped in its layers."""
    driver = build(remote, **options)
    await driver.init()
    return wrap(driver, CONFIG)


async def fresh_folder(driver: Driver[Any]) -> Obj:
    return await driver.make_dir(await driver.root_obj(), f"t-{secrets.token_hex(6)}")


class Saved:
    """An options saver that keeps what it was given."""

    def __init__(self) -> None:
        self.additions: list[dict[str, Any]] = []

    async def __call__(self, addition: str) -> None:
        self.additions.append(json.loads(addition))


class TestAListV3Conformance(DriverConformance):
    @pytest.fixture
    def driver_factory(self, remote: Remote) -> DriverFactory:
        async def factory() -> Driver[Any]:
            return await mounted(remote)

        return factory


# --- options and configuration -----------------------------------------------------

ALIST_OPTIONS = [
    ("root_folder_path", "string", "/", True),
    ("url", "string", "", True),
    ("meta_password", "string", "", False),
    ("username", "string", "", False),
    ("password", "string", "", False),
    ("token", "string", "", False),
    ("pass_ua_to_upsteam", "bool", "true", False),
    ("forward_archive_requests", "bool", "true", False),
]


async def test_the_form_shows_alists_options_then_manifolds(api: Api) -> None:
    info = await driver_form(api, "AList V3")
    shown = form_items(info["additional"])
    assert shown[:-1] == ALIST_OPTIONS
    assert all(item["help"] == "" for item in info["additional"][:-1])
    assert shown[-1] == ("tls_insecure_skip_verify", "bool", "false", False)
    assert "unsafe" in info["additional"][-1]["help"].lower()
    assert info["config"] == {
        "name": "AList V3",
        "local_sort": True,
        "only_local": False,
        "only_proxy": False,
        "no_cache": False,
        "no_upload": False,
        "need_ms": False,
        "default_root": "/",
        "alert": "",
    }
    assert "proxy_range" in [item["name"] for item in info["common"]]
    assert (CONFIG.check_status, CONFIG.never_indexed) == (True, True)


# --- login and the session ---------------------------------------------------------


async def test_init_trims_the_url_and_logs_in_saving_the_token(remote: Remote) -> None:
    driver, saved = build(remote), Saved()
    driver.options_saver = saved
    await driver.init()
    try:
        assert driver.options.url == remote.url
        [addition] = saved.additions
        assert addition["token"] == driver.options.token != ""
        assert await whose(remote, addition["token"]) == USER
    finally:
        await driver.drop()


async def test_a_bogus_token_is_replaced_by_a_login(remote: Remote) -> None:
    driver, saved = build(remote, token="not-a-token"), Saved()
    driver.options_saver = saved
    await driver.init()
    try:
        token = saved.additions[-1]["token"]
        assert token != "not-a-token"
        assert await whose(remote, token) == USER
    finally:
        await driver.drop()


async def test_another_users_token_is_replaced_by_a_login(remote: Remote) -> None:
    admin_token = await remote.login("admin", "admin-secret-pw")
    driver = build(remote, token=admin_token)
    await driver.init()
    try:
        assert await whose(remote, driver.options.token) == USER
    finally:
        await driver.drop()


async def test_an_ended_session_is_renewed_and_the_call_made_again(remote: Remote) -> None:
    driver, saved = build(remote), Saved()
    await driver.init()
    driver.options_saver = saved
    try:
        folder = await fresh_folder(driver)
        stale = driver.options.token
        await logout(remote, stale)
        assert await driver.list(folder) == []
        renewed = saved.additions[-1]["token"]
        assert renewed not in ("", stale)
        await logout(remote, renewed)
        await put_bytes(
            driver, folder, "after.txt", b"renewed"
        )  # a small upload is kept: sent again
        assert [o.name for o in await driver.list(folder)] == ["after.txt"]
    finally:
        await driver.drop()


async def test_a_refused_login_is_not_tried_again_by_every_call(remote: Remote) -> None:
    name = f"changer-{secrets.token_hex(3)}"
    await remote.call(
        "POST", "/api/admin/user/create", json={"username": name, "password": "old-pw-1"}
    )
    logins: list[str] = []

    async def record(request: httpx.Request) -> None:
        if request.url.path == "/api/auth/login":
            logins.append(request.url.path)

    driver = build(remote, username=name, password="old-pw-1")
    driver.resources.http(verify=True).event_hooks["request"].append(record)
    await driver.init()
    try:
        user = await remote.user(name)
        await remote.call("POST", "/api/admin/user/update", json={**user, "password": "new-pw-2"})
        with pytest.raises(ManifoldError) as first:
            await driver.list(await driver.root_obj())
        assert "old-pw-1" not in first.value.message
        with pytest.raises(PermissionDenied):
            await driver.list(await driver.root_obj())
        assert len(logins) == 2  # init's, and the one renewal the remote refused
    finally:
        await driver.drop()


async def test_a_token_alone_cannot_be_renewed(remote: Remote) -> None:
    token = await remote.login()
    driver = build(remote, username="", password="", token=token)
    await driver.init()
    try:
        await driver.list(await driver.root_obj())
        await logout(remote, token)
        with pytest.raises(PermissionDenied) as caught:
            await driver.list(await driver.root_obj())
        assert token not in caught.value.message
    finally:
        await driver.drop()


async def test_a_guest_mount_needs_the_remotes_consent(remote: Remote) -> None:
    guest = await remote.user("guest")
    await remote.call("POST", "/api/admin/user/update", json={**guest, "disabled": False})
    try:
        await remote.settings(allow_mounted="false")
        refused = build(remote, username="", password="")
        with pytest.raises(PermissionDenied) as caught:
            await refused.init()
        assert caught.value.message == NOT_MOUNTABLE
        await refused.drop()
        await remote.settings(allow_mounted="true")
        allowed = build(remote, username="", password="")
        await allowed.init()
        assert isinstance(await allowed.list(await allowed.root_obj()), list)
        await allowed.drop()
    finally:
        await remote.settings(allow_mounted="true")
        await remote.call("POST", "/api/admin/user/update", json={**guest, "disabled": True})


@pytest.mark.parametrize(
    ("options", "secret"),
    [
        ({"username": "nobody-here", "password": "wrong-pw-1234"}, "wrong-pw-1234"),
        ({"username": "", "password": "", "token": "bogus-token-5678"}, "bogus-token-5678"),
    ],
    ids=["wrong password", "bogus token"],
)
async def test_init_failures_name_no_secret(
    remote: Remote, options: dict[str, str], secret: str
) -> None:
    driver = build(remote, **options)
    with pytest.raises(ManifoldError) as caught:
        await driver.init()
    await driver.drop()
    assert secret not in caught.value.message
    assert caught.value.message


async def test_an_unreachable_url_fails_temporarily_without_its_credentials() -> None:
    url = f"http://user:s3cret-in-url@127.0.0.1:{free_port()}"
    driver = AListV3Driver(
        Storage(id=8, mount_path="/gone", driver="AList V3"),
        Addition(root_folder_path="/", url=url, username=USER, password="pw-9876"),
    )
    with pytest.raises(TemporaryFailure) as caught:
        await driver.init()
    await driver.drop()
    for secret in ("s3cret-in-url", "pw-9876"):
        assert secret not in caught.value.message


# --- TLS -------------------------------------------------------------------------


async def test_certificates_are_checked_unless_the_admin_said_otherwise(
    remote: Remote, tmp_path: Path
) -> None:
    assert remote.services is not None
    async with serving_tls(remote.services, tmp_path) as url:
        checked = AListV3Driver(
            Storage(id=9, mount_path="/tls", driver="AList V3"),
            Addition(root_folder_path=MOUNT, url=url, username=USER, password=USER_PASSWORD),
        )
        with pytest.raises(TemporaryFailure):
            await checked.init()
        await checked.drop()
        trusting = AListV3Driver(
            Storage(id=9, mount_path="/tls", driver="AList V3"),
            Addition(
                root_folder_path=MOUNT,
                url=url,
                username=USER,
                password=USER_PASSWORD,
                tls_insecure_skip_verify=True,
            ),
        )
        await trusting.init()
        try:
            folder = await fresh_folder(trusting)
            obj = await put_bytes(trusting, folder, "over-tls.bin", b"0123456789")
            link = await trusting.link(obj, LinkArgs())
            # The link says its certificate is not to be checked, and is fetched so.
            assert (link.url.startswith("https://"), link.verify) == (True, False)
            assert await read_obj(trusting, obj, 3, 4) == b"3456"
        finally:
            await trusting.drop()


# --- behaviour --------------------------------------------------------------------


async def test_a_meta_password_is_sent_with_every_call(remote: Remote) -> None:
    locked = f"locked-{secrets.token_hex(4)}"
    (remote.files / locked).mkdir()
    (remote.files / locked / "inside.txt").write_text("secret text")
    await remote.call(
        "POST",
        "/api/admin/meta/create",
        json={"path": f"{MOUNT}/{locked}", "password": "meta-pw", "p_sub": True},
    )
    root = f"{MOUNT}/{locked}"
    opened = await mounted(remote, root_folder_path=root, meta_password="meta-pw")
    shut = await mounted(remote, root_folder_path=root)
    try:
        listed = await opened.list(await opened.root_obj())
        assert [o.name for o in listed] == ["inside.txt"]
        assert await read_obj(opened, listed[0]) == b"secret text"
        await put_bytes(opened, await opened.root_obj(), "added.txt", b"added")
        assert (remote.files / locked / "added.txt").read_bytes() == b"added"
        with pytest.raises(PermissionDenied):
            await shut.list(await shut.root_obj())
    finally:
        await opened.drop()
        await shut.drop()


async def test_the_clients_user_agent_goes_with_the_lookup(remote: Remote) -> None:
    agents: list[str] = []

    async def record(request: httpx.Request) -> None:
        if request.url.path == "/api/fs/get":
            agents.append(request.headers.get("user-agent", ""))

    sent = {}
    for passed in (True, False):
        driver = build(remote, pass_ua_to_upsteam=passed)
        driver.resources.http(verify=True).event_hooks["request"].append(record)
        await driver.init()
        try:
            obj = await put_bytes(driver, await fresh_folder(driver), "ua.txt", b"ua")
            await driver.link(obj, LinkArgs(headers={"user-agent": "probe-agent/1.0"}))
            sent[passed] = agents[-1]
        finally:
            await driver.drop()
    assert sent[True] == "probe-agent/1.0"
    assert sent[False] != "probe-agent/1.0"


async def test_a_link_lasts_as_long_as_the_remote_sign(remote: Remote) -> None:
    driver = await mounted(remote)
    try:
        obj = await put_bytes(driver, await fresh_folder(driver), "signed.txt", b"signed")
        assert (await driver.link(obj, LinkArgs())).expires_in is None  # expiry 0: never
        await remote.settings(link_expiration="1")
        expires_in = (await driver.link(obj, LinkArgs())).expires_in
        assert expires_in is not None and 0 < expires_in <= 3600
        assert await read_obj(driver, obj) == b"signed"
    finally:
        await remote.settings(link_expiration="0")
        await driver.drop()


async def test_a_copy_between_remote_storages_is_whole_when_it_returns(
    remote: Remote, tmp_path: Path
) -> None:
    other = f"/other-{secrets.token_hex(4)}"
    (tmp_path / "other").mkdir()
    addition = json.dumps({"root_folder_path": str(tmp_path / "other")})
    body = {"mount_path": other, "driver": "Local", "addition": addition}
    await remote.call("POST", "/api/admin/storage/create", json=body)
    driver = await mounted(remote, root_folder_path="/")
    try:
        source = await driver.get(MOUNT)
        folder = await driver.make_dir(source, f"t-{secrets.token_hex(6)}")
        data = os.urandom(300_000)
        file = await put_bytes(driver, folder, "across.bin", data)
        target = await driver.get(other)
        copied = await driver.copy(file, target)
        assert (copied.name, copied.size) == ("across.bin", len(data))
        assert (tmp_path / "other" / "across.bin").read_bytes() == data
        with pytest.raises(ObjectExists):
            await driver.copy(file, target)
        assert (tmp_path / "other" / "across.bin").read_bytes() == data
        # A folder's copy task makes a task per entry and ends first: all are waited for.
        top = tree = await driver.make_dir(folder, "tree")
        await put_bytes(driver, tree, "a.txt", b"alpha")
        for depth in range(3):
            tree = await driver.make_dir(tree, f"level{depth}")
        big = os.urandom(16 << 20)  # copied by a task three levels down, well after the first
        await put_bytes(driver, tree, "deep.bin", big)
        await driver.copy(top, target)
        copied_tree = tmp_path / "other" / "tree"
        assert (copied_tree / "a.txt").read_bytes() == b"alpha"
        deepest = copied_tree / "level0" / "level1" / "level2" / "deep.bin"
        assert deepest.read_bytes() == big
    finally:
        await driver.drop()


async def test_a_missing_object_is_not_found(remote: Remote) -> None:
    driver = await mounted(remote)
    try:
        with pytest.raises(ObjectNotFound):
            await driver.get("/no/such/thing")
    finally:
        await driver.drop()


async def test_a_refresh_reaches_the_remotes_own_cache(remote: Remote) -> None:
    # The remote's storage here is cached (an AList V3 storage of the remote's own
    # Local one): a file made on its disk shows there only through a refresh.
    chain = f"/chain-{secrets.token_hex(4)}"
    addition = {"root_folder_path": MOUNT, "url": remote.url, "username": USER}
    addition["password"] = USER_PASSWORD
    body = {"mount_path": chain, "driver": "AList V3", "addition": json.dumps(addition)}
    await remote.call("POST", "/api/admin/storage/create", json={**body, "cache_expiration": 30})
    driver = await mounted(remote, root_folder_path=chain)
    try:
        name = f"t-{secrets.token_hex(6)}"
        (remote.files / name).mkdir()
        (remote.files / name / "first.txt").write_bytes(b"1")
        ops = StorageOps(
            Storage(id=7, mount_path="/remote", driver="AList V3"), driver, MemoryListCache()
        )
        assert [o.name for o in await ops.list(f"/{name}")] == ["first.txt"]
        (remote.files / name / "second.txt").write_bytes(b"2")
        assert [o.name for o in await ops.list(f"/{name}", refresh=True)] == [
            "first.txt",
            "second.txt",
        ]
        (remote.files / name / "third.txt").write_bytes(b"3")
        folder = await driver.get(f"/{name}")
        # Without a refresh the remote answers from its cache; with one, from its disk.
        assert [o.name for o in await driver.list(folder)] == ["first.txt", "second.txt"]
        assert [o.name for o in await driver.list_refreshed(folder)] == [
            "first.txt",
            "second.txt",
            "third.txt",
        ]
    finally:
        await driver.drop()


async def test_a_big_remote_folder_comes_in_pages_and_is_refused_past_the_bound(
    remote: Remote,
) -> None:
    name = f"big-{secrets.token_hex(4)}"
    (remote.files / name).mkdir()
    for i in range(2_500):
        (remote.files / name / f"f{i:05d}").write_bytes(b"")
    driver = build(remote)
    await driver.init()
    try:
        folder = await driver.get(f"/{name}")
        pages = [page async for page in driver.list_pages(folder)]
        assert [len(page) for page in pages] == [1000, 1000, 500]
        names = {o.name for page in pages for o in page}
        assert len(names) == 2_500 and "f02499" in names
        driver.resources.max_listing_entries = 1_200
        with pytest.raises(ServerError, match="holds more than 1200 entries"):
            await driver.list(folder)
        with pytest.raises(ServerError, match="holds more than 1200 entries"):
            await driver.list_refreshed(folder)
    finally:
        await driver.drop()


# --- through the API of a server that mounts it -------------------------------------


async def test_mounted_through_the_admin_api(api: Api, remote: Remote) -> None:
    await api.as_admin()
    addition = {
        "root_folder_path": MOUNT,
        "url": remote.url,
        "username": USER,
        "password": USER_PASSWORD,
    }
    created = await api.post(
        "/api/admin/storage/create",
        {"mount_path": "/remote", "driver": "AList V3", "addition": json.dumps(addition)},
    )
    assert created["code"] == 200, created
    folder = f"/remote/api-{secrets.token_hex(4)}"
    assert (await api.post("/api/fs/mkdir", {"path": folder}))["code"] == 200
    data = os.urandom(200_000)
    put = await api.client.put(
        "/api/fs/put",
        content=data,
        headers={"Authorization": api.token, "File-Path": f"{folder}/up.bin"},
    )
    assert put.json()["code"] == 200, put.text
    listed = await api.post("/api/fs/list", {"path": folder})
    assert [(o["name"], o["size"]) for o in listed["data"]["content"]] == [("up.bin", len(data))]
    got = await api.post("/api/fs/get", {"path": f"{folder}/up.bin"})
    raw = urlsplit(got["data"]["raw_url"])
    redirect = await api.client.get(f"{raw.path}?{raw.query}")
    assert redirect.status_code == 302
    async with httpx.AsyncClient() as outside:
        assert (await outside.get(redirect.headers["location"])).content == data
    # /p relays the remote's link, ranges included (a text file may always be proxied).
    note = await api.client.put(
        "/api/fs/put",
        content=b"0123456789",
        headers={"Authorization": api.token, "File-Path": f"{folder}/note.txt"},
    )
    assert note.json()["code"] == 200, note.text
    signed = urlsplit(
        (await api.post("/api/fs/get", {"path": f"{folder}/note.txt"}))["data"]["raw_url"]
    )
    proxied = await api.client.get(
        f"/p{signed.path.removeprefix('/d')}?{signed.query}", headers={"Range": "bytes=2-5"}
    )
    assert (proxied.status_code, proxied.content) == (206, b"2345")
    removed = await api.post("/api/fs/remove", {"dir": folder, "names": ["up.bin", "note.txt"]})
    assert removed["code"] == 200
    assert (await api.post("/api/fs/list", {"path": folder}))["data"]["content"] in (None, [])


# --- archives: read by the remote, or here by ranges -------------------------------

ARCHIVE = {"docs/readme.txt": b"0123456789 read me", "top.txt": b"top", "docs/more.txt": b"m"}


async def mount_remote_folder(
    api: Api, remote: Remote, mount: str, folder: str, **extra: Any
) -> None:
    addition = {"root_folder_path": f"{MOUNT}/{folder}", "url": remote.url, "username": USER}
    addition |= {"password": USER_PASSWORD, **extra}
    body = {"mount_path": mount, "driver": "AList V3", "addition": json.dumps(addition)}
    created = await api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created


async def read_member(api: Api, path: str, inner: str, sign: str, **headers: str) -> httpx.Response:
    query = urlencode({"inner": inner, "sign": sign})
    return await api.client.get(f"/ae{quote(path)}?{query}", headers=headers)


async def test_archive_requests_are_forwarded_to_the_remote(api: Api, remote: Remote) -> None:
    await api.as_admin()
    folder = f"arc-{secrets.token_hex(4)}"
    (remote.files / folder).mkdir()
    (remote.files / folder / "a.zip").write_bytes(zip_bytes(ARCHIVE))
    await mount_remote_folder(api, remote, "/fwd", folder)
    await mount_remote_folder(api, remote, "/ranges", folder, forward_archive_requests=False)
    # Reading an archive here stops at its second entry: what works, the remote read.
    await save_settings(api, archive_max_entries="1")
    try:
        meta = await api.post("/api/fs/archive/meta", {"path": "/fwd/a.zip"})
        assert meta["code"] == 200, meta
        tree = {e["name"]: e for e in meta["data"]["content"]}
        assert sorted(tree) == ["docs", "top.txt"]
        assert sorted(c["name"] for c in tree["docs"]["children"]) == ["more.txt", "readme.txt"]
        listed = await api.post(
            "/api/fs/archive/list", {"path": "/fwd/a.zip", "inner_path": "/docs"}
        )
        assert listed["code"] == 200, listed
        assert sorted((e["name"], e["size"]) for e in listed["data"]["content"]) == [
            ("more.txt", 1),
            ("readme.txt", len(ARCHIVE["docs/readme.txt"])),
        ]
        sign = meta["data"]["sign"]
        whole = await read_member(api, "/fwd/a.zip", "/docs/readme.txt", sign)
        assert (whole.status_code, whole.content) == (200, ARCHIVE["docs/readme.txt"])
        part = await read_member(api, "/fwd/a.zip", "/docs/readme.txt", sign, Range="bytes=2-5")
        assert (part.status_code, part.content) == (206, b"2345")
        missing = await read_member(api, "/fwd/a.zip", "/docs/none.txt", sign)
        assert missing.status_code == 404
        # The same archive read here: the limit stops it.
        refused = await api.post("/api/fs/archive/meta", {"path": "/ranges/a.zip"})
        assert refused["code"] == 500 and "more than 1 entries" in refused["message"]
    finally:
        await save_settings(api, archive_max_entries="200000")
    # The option off: read here by ranges, as any file.
    meta = await api.post("/api/fs/archive/meta", {"path": "/ranges/a.zip"})
    assert meta["code"] == 200, meta
    assert sorted(e["name"] for e in meta["data"]["content"]) == ["docs", "top.txt"]
    ranged = await read_member(
        api, "/ranges/a.zip", "/docs/readme.txt", meta["data"]["sign"], Range="bytes=2-5"
    )
    assert (ranged.status_code, ranged.content) == (206, b"2345")


async def test_an_extraction_within_the_storage_is_the_remotes(api: Api, remote: Remote) -> None:
    await api.as_admin()
    folder = f"ext-{secrets.token_hex(4)}"
    (remote.files / folder / "out").mkdir(parents=True)
    (remote.files / folder / "a.zip").write_bytes(zip_bytes(ARCHIVE))
    await mount_remote_folder(api, remote, "/fwd", folder)
    await save_settings(api, archive_max_entries="1")  # no extraction here could do it
    try:
        body = {"src_dir": "/fwd", "dst_dir": "/fwd/out", "name": "a.zip", "inner_path": "/docs"}
        answer = await api.post("/api/fs/archive/decompress", body)
        assert answer["code"] == 200, answer
        assert answer["data"]["task"] == []  # the remote's tasks, not this server's
        extracted = remote.files / folder / "out" / "docs"
        async with asyncio.timeout(HANG):
            # Files on a disk offer no event to wait on.
            while not all((extracted / n).exists() for n in ("more.txt", "readme.txt")):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert (extracted / "readme.txt").read_bytes() == ARCHIVE["docs/readme.txt"]
    finally:
        await save_settings(api, archive_max_entries="200000")


# --- faults: the remote killed mid-call, then started again -------------------------


async def test_a_list_in_flight_when_the_remote_dies_fails_temporarily(
    process: RemoteProcess,
) -> None:
    driver = await mounted(process.remote)
    try:
        folder = await fresh_folder(driver)
        with process.daemon.paused():
            listing = asyncio.create_task(driver.list(folder))
            await asyncio.sleep(0.5)  # the request is sent and waits on the stopped server
            await process.kill()
        with pytest.raises(TemporaryFailure):
            async with asyncio.timeout(HANG):
                await listing
        with pytest.raises(TemporaryFailure):  # a new storage cannot start meanwhile
            await build(process.remote).init()
        await process.start()
        assert await driver.list(folder) == []
    finally:
        await process.start()
        await driver.drop()


async def test_an_upload_cut_by_the_remote_dying_leaves_nothing(process: RemoteProcess) -> None:
    driver = await mounted(process.remote)
    sending, cut = asyncio.Event(), asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        for i in range(64):
            if i == 8:
                sending.set()
                await cut.wait()
            yield b"u" * 65536

    try:
        folder = await fresh_folder(driver)
        upload = Upload("cut.bin", body(), 64 * 65536, None)
        putting = asyncio.create_task(driver.put(folder, upload))
        await sending.wait()
        await process.kill()
        cut.set()
        with pytest.raises(TemporaryFailure):
            async with asyncio.timeout(HANG):
                await putting
        await process.start()
        assert await driver.list(folder) == []
        assert [p.name for p in (process.remote.files / folder.name).iterdir()] == []
        stored = await driver.put(folder, Upload("whole.bin", chunks(b"w" * 5000), 5000, None))
        assert await read_obj(driver, stored) == b"w" * 5000
    finally:
        await process.start()
        await driver.drop()


async def test_a_download_cut_by_the_remote_dying_fails_temporarily(
    process: RemoteProcess,
) -> None:
    driver = await mounted(process.remote)
    data = os.urandom(24 << 20)  # more than the sockets on the way can hold
    try:
        obj = await put_bytes(driver, await fresh_folder(driver), "big.bin", data)
        link = await driver.link(obj, LinkArgs())
        reading = open_range(link, 0, None)
        first = await anext(reading)
        await process.kill()
        with pytest.raises(TemporaryFailure):
            async with asyncio.timeout(HANG):
                async for _ in reading:
                    pass
        assert first == data[: len(first)]
        await process.start()
        assert await read_obj(driver, obj, 1000, 10) == data[1000:1010]
    finally:
        await process.start()
        await driver.drop()


# --- helpers ----------------------------------------------------------------------


async def whose(remote: Remote, token: str) -> str:
    async with httpx.AsyncClient(base_url=remote.url) as client:
        body = (await client.get("/api/me", headers={"Authorization": token})).json()
    assert body["code"] == 200, body
    name: str = body["data"]["username"]
    return name


async def logout(remote: Remote, token: str) -> None:
    async with httpx.AsyncClient(base_url=remote.url) as client:
        body = (await client.get("/api/auth/logout", headers={"Authorization": token})).json()
    assert body["code"] == 200, body


class SlowRemoval(LocalDriver):
    """A Local storage whose removals take ``SLOW_REMOVAL`` seconds: a remote removing a
    big folder in one call."""

    async def remove(self, obj: Obj) -> None:
        await asyncio.sleep(SLOW_REMOVAL)
        await super().remove(obj)


SLOW_REMOVAL = 4.0


async def test_a_folder_removal_in_one_slow_call_outlasts_the_call_timeout(
    remote: Remote, tmp_path: Path
) -> None:
    services = remote.services
    assert services is not None
    config = dataclasses.replace(LOCAL_CONFIG, name="SlowRemoval")
    services.registry.register("SlowRemoval", SlowRemoval, LocalAddition, config)
    (tmp_path / "doomed").mkdir()
    addition = json.dumps({"root_folder_path": str(tmp_path)})
    storage = {"mount_path": "/slow-removal", "driver": "SlowRemoval", "addition": addition}
    await remote.call("POST", "/api/admin/storage/create", json=storage)
    driver = build(
        remote, root_folder_path="/slow-removal", username="admin", password=ADMIN_PASSWORD
    )
    await driver.init()
    try:
        doomed = next(obj for obj in await driver.list(await driver.root_obj()))
        # Watched as under way, not cut at the layer's time limit.
        await TimeoutLayer(driver, SLOW_REMOVAL / 2).remove(doomed)
    finally:
        await driver.drop()
    assert not (tmp_path / "doomed").exists()


async def test_the_remotes_storage_details_are_the_storages_space(remote: Remote) -> None:
    driver = build(remote)
    await driver.init()
    try:
        usage = await driver.details()
    finally:
        await driver.drop()
    # The remote's storage at the root folder is a Local one over remote.files.
    measured = df(remote.files)
    assert usage.total == measured.size
    assert near(usage.free, measured.avail)
    assert usage.used == usage.total - usage.free


async def test_a_folder_below_a_mount_point_tells_no_space(remote: Remote) -> None:
    (remote.files / "below").mkdir(exist_ok=True)
    driver = build(remote, root_folder_path=f"{MOUNT}/below")
    await driver.init()
    try:
        with pytest.raises(NotSupported):
            await driver.details()
    finally:
        await driver.drop()
