"""The SMB driver against a real Samba server on a private port (never 445, so every
test also covers a port given in the address): the conformance suite, the options as
AList shows them, login and connection failures, names SMB refuses, fingerprints of
changes made on the server's own disk, downloads and uploads that meet on one file,
the server dying under a listing, a download and an upload, and the driver mounted
through the API."""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
import smbclient

from manifold.drivers.base import Driver, LinkArgs, Upload
from manifold.drivers.local.driver import LocalDriver
from manifold.drivers.local.meta import Addition as LocalAddition
from manifold.drivers.smb.driver import SMBDriver
from manifold.drivers.smb.meta import CONFIG, Addition
from manifold.drivers.smb.names import from_wire, parse_address, to_wire
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotAFolder,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.models import Obj, Storage
from manifold.testing.conformance import (
    DriverConformance,
    DriverFactory,
    chunks,
    names,
    put_bytes,
    read_obj,
)
from manifold.vfs.layers import Layer, wrap
from manifold.vfs.storage_ops import MemoryListCache, StorageOps
from tests.conftest import Api
from tests.drivers import smb_server
from tests.drivers.driver_helpers import driver_form, form_items
from tests.drivers.smb_server import Samba
from tests.drivers.space_helpers import df, near
from tests.fixtures.processes import free_port

pytestmark = pytest.mark.skipif(not smb_server.available(), reason="Samba is not installed")

T = TypeVar("T")
BLOCK = 1 << 20
# Generous: only a hang fails this; no test asserts how fast anything is.
BOUND = 60.0
AN_HOUR_AGO = time.time() - 3600


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


def storage() -> Storage:
    return Storage(id=1, mount_path="/smb", driver="SMB")


async def smb_driver(samba: Samba, **changed: Any) -> SMBDriver:
    driver = SMBDriver(storage(), options(samba, **changed))
    await driver.init()
    return driver


@pytest.fixture
async def bare(samba: Samba) -> AsyncIterator[SMBDriver]:
    """The driver itself, without the layers a mount adds."""
    driver = await smb_driver(samba)
    yield driver
    await driver.drop()


@pytest.fixture
async def mounted(bare: SMBDriver) -> Driver[Any]:
    """The driver wrapped as the server mounts it."""
    return wrap(bare, CONFIG)


@pytest.fixture
async def folder(bare: SMBDriver, samba: Samba) -> tuple[Obj, Path]:
    """A fresh folder: the driver's object and the same folder on the share's disk."""
    name = f"t-{secrets.token_hex(6)}"
    made = await bare.make_dir(await bare.root_obj(), name)
    return made, samba.folder / name


async def bounded(call: Awaitable[T]) -> T:
    return await asyncio.wait_for(call, BOUND)


class TestSMBConformance(DriverConformance):
    @pytest.fixture
    def driver_factory(self, samba: Samba) -> DriverFactory:
        async def build() -> Driver[Any]:
            return wrap(await smb_driver(samba), CONFIG)

        return build


# --- options and logging in ----------------------------------------------------------


ALIST_ITEMS = [
    ("root_folder_path", ".", True),
    ("address", "", True),
    ("username", "", True),
    ("password", "", False),
    ("share_name", "", True),
]


async def test_driver_info_shows_alists_options(api: Api) -> None:
    info = await driver_form(api, "SMB")
    additional = info["additional"]
    expected = [(name, "string", default, required) for name, default, required in ALIST_ITEMS]
    assert form_items(additional) == expected
    assert all(item["help"] == "" and item["options"] == "" for item in additional)
    assert info["config"] == {
        "name": "SMB",
        "local_sort": True,
        "only_local": True,
        "only_proxy": False,
        "no_cache": True,
        "no_upload": False,
        "need_ms": False,
        "default_root": ".",
        "alert": "",
    }


async def test_a_wrong_password_fails_init_without_naming_it(samba: Samba) -> None:
    wrong = "not-the-password-" + secrets.token_hex(8)
    driver = SMBDriver(storage(), options(samba, password=wrong))
    with pytest.raises(PermissionDenied) as failed:
        await driver.init()
    assert "login failed" in failed.value.message
    assert wrong not in str(failed.value) and wrong not in repr(failed.value)
    await driver.drop()


async def test_an_unreachable_server_is_a_temporary_failure(samba: Samba) -> None:
    nobody = free_port()
    driver = SMBDriver(storage(), options(samba, address=f"127.0.0.1:{nobody}"))
    with pytest.raises(TemporaryFailure) as failed:
        await bounded(driver.init())
    assert smb_server.PASSWORD not in str(failed.value)
    await driver.drop()


async def test_a_missing_share_or_root_fails_init(samba: Samba) -> None:
    for changed in ({"share_name": "no-such-share"}, {"root_folder_path": "/no/such/root"}):
        driver = SMBDriver(storage(), options(samba, **changed))
        with pytest.raises(ObjectNotFound):
            await driver.init()
        await driver.drop()


async def test_a_file_as_root_fails_init(samba: Samba) -> None:
    name = f"root-file-{secrets.token_hex(4)}"
    (samba.folder / name).write_bytes(b"x")
    driver = SMBDriver(storage(), options(samba, root_folder_path=name))
    with pytest.raises(NotAFolder):
        await driver.init()
    await driver.drop()


def test_addresses_take_a_port() -> None:
    assert parse_address("files.example") == ("files.example", 445)
    assert parse_address("10.0.0.5:1445") == ("10.0.0.5", 1445)
    assert parse_address("[fd00::5]:4450") == ("fd00::5", 4450)
    assert parse_address("fd00::5") == ("fd00::5", 445)
    for bad in ("", "host:port", "host:70000"):
        with pytest.raises(InvalidRequest):
            parse_address(bad)


async def test_a_root_folder_inside_the_share(samba: Samba) -> None:
    inner = f"inner-{secrets.token_hex(4)}"
    (samba.folder / inner / "deeper").mkdir(parents=True)
    driver = await smb_driver(samba, root_folder_path=f"/{inner}/deeper")
    await put_bytes(driver, await driver.root_obj(), "here.txt", b"here")
    assert (samba.folder / inner / "deeper" / "here.txt").read_bytes() == b"here"
    assert await names(driver, await driver.root_obj()) == ["here.txt"]
    await driver.drop()


async def test_two_storages_keep_their_own_connections(samba: Samba, bare: SMBDriver) -> None:
    other = await smb_driver(samba)
    await other.list(await other.root_obj())
    await other.drop()
    await other.drop()  # twice is fine
    assert isinstance(await bare.list(await bare.root_obj()), list)


async def test_what_the_server_refuses_is_permission_denied(
    samba: Samba, bare: SMBDriver, folder: tuple[Obj, Path]
) -> None:
    obj, on_disk = folder
    file = await put_bytes(bare, obj, "held.txt", b"held")
    reader = await smb_driver(samba, share_name=smb_server.READ_ONLY)
    inside = await reader.get(obj.path)
    assert await names(reader, inside) == ["held.txt"]
    with pytest.raises(PermissionDenied):
        await put_bytes(reader, inside, "new.txt", b"new")
    with pytest.raises(PermissionDenied):
        await reader.make_dir(inside, "new")
    with pytest.raises(PermissionDenied):
        await reader.remove(await reader.get(file.path))
    await reader.drop()
    # Another client holding the file open without sharing it:
    kwargs = {"username": smb_server.USER, "password": smb_server.PASSWORD, "port": samba.port}
    kwargs["connection_cache"] = cache = {}
    unc = rf"\\127.0.0.1\{smb_server.SHARE}\{obj.name}\held.txt"
    with smbclient.open_file(unc, mode="rb", **kwargs), pytest.raises(PermissionDenied):
        await bare.remove(file)
    smbclient.reset_connection_cache(connection_cache=cache)
    await bare.remove(file)
    assert os.listdir(on_disk) == []


# --- names -----------------------------------------------------------------------------


def test_names_smb_refuses_round_trip() -> None:
    for name in ["a?b", "x*y", "c:d", '<>|"', "tab\there", "back\\slash", "end ", "end."]:
        wire = to_wire(name)
        assert not any(c in wire for c in '?*:<>|"\t\\') and wire[-1] not in " ."
        assert from_wire(wire) == name


async def test_refused_characters_are_real_on_the_servers_disk(
    bare: SMBDriver, folder: tuple[Obj, Path]
) -> None:
    obj, on_disk = folder
    await put_bytes(bare, obj, "what?*:.txt", b"odd")
    (on_disk / "made|on<disk>").write_bytes(b"disk")
    assert sorted(os.listdir(on_disk)) == ["made|on<disk>", "what?*:.txt"]
    listed = await bare.list(obj)
    assert sorted(o.name for o in listed) == ["made|on<disk>", "what?*:.txt"]
    made = next(o for o in listed if o.name == "made|on<disk>")
    assert await read_obj(bare, made) == b"disk"
    assert (await bare.get(made.path)).size == 4


# --- fingerprints ---------------------------------------------------------------------


class CountingLayer(Layer):
    """Counts the listings that reach the driver."""

    listed = 0

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        self.listed += 1
        return await self.inner.list(dir)


async def test_a_folder_past_the_listing_bound_is_refused_naming_it(
    bare: SMBDriver, folder: tuple[Obj, Path]
) -> None:
    made, on_disk = folder
    for i in range(1_500):
        (on_disk / f"f{i:05d}").write_bytes(b"")
    assert len(await bare.list(made)) == 1_500
    bare.resources.max_listing_entries = 1_000
    with pytest.raises(ServerError, match=f"{made.name} holds more than 1000 entries"):
        await bare.list(made)


def settle(path: Path) -> None:
    """The folder's times an hour back, as a folder nobody changed for a while."""
    os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))


async def test_fingerprint_changes_with_every_change_on_the_disk(
    bare: SMBDriver, folder: tuple[Obj, Path]
) -> None:
    obj, on_disk = folder
    (on_disk / "a.txt").write_bytes(b"a")
    for change in (
        lambda: (on_disk / "b.txt").write_bytes(b"b"),
        lambda: (on_disk / "b.txt").rename(on_disk / "c.txt"),
        lambda: (on_disk / "c.txt").unlink(),
        lambda: (on_disk / "sub").mkdir(),
    ):
        settle(on_disk)
        before = await bare.fingerprint(obj)
        assert before is not None and before == await bare.fingerprint(obj)
        change()
        # None while the change is fresh (another may follow within the same tick).
        assert await bare.fingerprint(obj) != before


async def test_a_kept_listing_shows_a_change_on_the_disk_at_once(
    mounted: Driver[Any], folder: tuple[Obj, Path]
) -> None:
    obj, on_disk = folder
    counting = CountingLayer(mounted)
    ops = StorageOps(storage(), counting, MemoryListCache(), no_cache=CONFIG.no_cache)
    (on_disk / "first.txt").write_bytes(b"1")
    settle(on_disk)
    assert [o.name for o in await ops.list(obj.path)] == ["first.txt"]
    assert [o.name for o in await ops.list(obj.path)] == ["first.txt"]
    assert counting.listed == 1  # unchanged: the kept listing, checked by fingerprint
    (on_disk / "second.txt").write_bytes(b"2")
    assert sorted(o.name for o in await ops.list(obj.path)) == ["first.txt", "second.txt"]
    assert counting.listed == 2


# --- reading and writing one file ----------------------------------------------------


async def test_a_download_closed_early_releases_the_file(
    mounted: Driver[Any], bare: SMBDriver, folder: tuple[Obj, Path], samba: Samba
) -> None:
    obj, _ = folder
    data = os.urandom(3 * BLOCK)
    file = await put_bytes(bare, obj, "long.bin", data)
    link = await mounted.link(file, LinkArgs())
    assert link.reader is not None
    stream = link.reader(BLOCK, None)
    assert await anext(stream) == data[BLOCK : 2 * BLOCK]
    assert "long.bin" in samba.open_files()
    await stream.aclose()  # type: ignore[attr-defined]
    assert "long.bin" not in samba.open_files()


async def test_an_upload_replaces_a_file_being_downloaded(
    bare: SMBDriver, folder: tuple[Obj, Path]
) -> None:
    obj, on_disk = folder
    old, new = b"o" * (2 * BLOCK), b"new bytes"
    file = await put_bytes(bare, obj, "busy.bin", old)
    link = await bare.link(file, LinkArgs())
    assert link.reader is not None
    stream = link.reader(0, None)
    assert await anext(stream) == old[:BLOCK]
    replaced = await put_bytes(bare, obj, "busy.bin", new)
    assert replaced.size == len(new)
    assert await anext(stream) == old[BLOCK:]  # the reader keeps the bytes it opened
    await stream.aclose()  # type: ignore[attr-defined]
    assert await read_obj(bare, find_named(await bare.list(obj), "busy.bin")) == new
    assert os.listdir(on_disk) == ["busy.bin"]


async def test_an_upload_keeps_the_time_it_is_given(
    bare: SMBDriver, folder: tuple[Obj, Path]
) -> None:
    obj, _ = folder
    when = datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)
    await bare.put(obj, Upload("dated.txt", chunks(b"dated"), 5, when))
    listed = find_named(await bare.list(obj), "dated.txt")
    assert listed.modified == when
    copied = await bare.copy(listed, await bare.make_dir(obj, "copies"))
    assert copied.modified == when


async def test_a_cancelled_upload_leaves_nothing(bare: SMBDriver, folder: tuple[Obj, Path]) -> None:
    obj, on_disk = folder

    async def stalled() -> AsyncIterator[bytes]:
        yield b"x" * BLOCK
        yield b"x" * BLOCK
        await asyncio.Event().wait()  # the sender goes quiet
        yield b""

    upload = asyncio.ensure_future(bare.put(obj, Upload("cancelled.bin", stalled(), None, None)))
    while not os.listdir(on_disk) or os.path.getsize(on_disk / os.listdir(on_disk)[0]) == 0:
        assert not upload.done()
        await asyncio.sleep(0.05)  # until the first block is on the server
    upload.cancel()
    with pytest.raises(asyncio.CancelledError):
        await upload
    assert os.listdir(on_disk) == []
    assert await bare.list(obj) == []


async def test_left_over_temporaries_are_hidden_and_swept(
    bare: SMBDriver, folder: tuple[Obj, Path]
) -> None:
    obj, on_disk = folder
    (on_disk / "kept.txt").write_bytes(b"kept")
    (on_disk / ".manifold-upload-fresh").write_bytes(b"being written")
    (on_disk / ".manifold-upload-stale").write_bytes(b"left by a crash")
    (on_disk / ".manifold-upload-tree" / "sub").mkdir(parents=True)
    (on_disk / ".manifold-upload-tree" / "sub" / "f").write_bytes(b"f")
    for stale in (".manifold-upload-stale", ".manifold-upload-tree"):
        os.utime(on_disk / stale, (AN_HOUR_AGO, AN_HOUR_AGO))
    assert await names(bare, obj) == ["kept.txt"]
    assert sorted(os.listdir(on_disk)) == [".manifold-upload-fresh", "kept.txt"]


async def test_the_share_reports_its_space(bare: SMBDriver) -> None:
    usage = await bare.details()
    assert usage.total > 0 and 0 <= usage.free <= usage.total and usage.used >= 0


def find_named(objs: builtins.list[Obj], name: str) -> Obj:
    return next(o for o in objs if o.name == name)


# --- the server dies, and comes back ---------------------------------------------------


async def test_the_driver_reconnects_by_itself_after_a_restart(
    bare: SMBDriver, folder: tuple[Obj, Path], samba: Samba
) -> None:
    obj, _ = folder
    await put_bytes(bare, obj, "kept.txt", b"kept")
    samba.daemon.kill()
    samba.daemon.start()
    # No layer retries here: the driver's own first call after the restart works.
    assert await names(bare, obj) == ["kept.txt"]


async def test_the_server_killed_during_a_listing(
    mounted: Driver[Any], folder: tuple[Obj, Path], samba: Samba
) -> None:
    obj, on_disk = folder
    for i in range(50):
        (on_disk / f"f{i:02d}").write_bytes(b"x")
    try:
        with samba.daemon.paused():
            listing = asyncio.ensure_future(mounted.list(obj))
            await asyncio.sleep(0.3)  # the request is out; the server does not answer
            samba.daemon.kill()
        with pytest.raises(TemporaryFailure):
            await bounded(listing)
    finally:
        samba.daemon.start()
    assert len(await mounted.list(obj)) == 50


async def test_the_server_killed_during_a_download(
    mounted: Driver[Any], bare: SMBDriver, folder: tuple[Obj, Path], samba: Samba
) -> None:
    obj, _ = folder
    data = os.urandom(3 * BLOCK)
    file = await put_bytes(bare, obj, "download.bin", data)
    link = await mounted.link(file, LinkArgs())
    assert link.reader is not None
    stream = link.reader(0, None)
    try:
        assert await anext(stream) == data[:BLOCK]
        samba.daemon.kill()
        with pytest.raises(TemporaryFailure):
            await bounded(anext(stream))
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        samba.daemon.start()
    assert await read_obj(mounted, file) == data


async def test_the_server_killed_during_an_upload(
    mounted: Driver[Any], folder: tuple[Obj, Path], samba: Samba
) -> None:
    obj, on_disk = folder

    async def dying() -> AsyncIterator[bytes]:
        yield b"a" * BLOCK  # written to the server
        samba.daemon.kill()
        yield b"b" * BLOCK

    try:
        with pytest.raises(ManifoldError):
            await bounded(mounted.put(obj, Upload("upload.bin", dying(), 2 * BLOCK, None)))
    finally:
        samba.daemon.start()
    assert await mounted.list(obj) == []
    # The temporary, left when the server died under it, went once the driver was back.
    assert os.listdir(on_disk) == []
    await put_bytes(mounted, obj, "upload.bin", b"whole")
    assert await read_obj(mounted, find_named(await mounted.list(obj), "upload.bin")) == b"whole"


# --- the server hangs -------------------------------------------------------------------


class QuickSMBDriver(SMBDriver):
    """The driver of a storage with short time limits, so that a hang shows soon."""

    CALL_SECONDS = 2.0
    BLOCK_SECONDS = 2.0


QUICK = replace(CONFIG, call_timeout=2.0, idle_timeout=2.0, retries=0)


async def test_a_hung_server_fails_calls_and_frees_the_threads(
    samba: Samba, folder: tuple[Obj, Path]
) -> None:
    obj, _ = folder
    bare = QuickSMBDriver(storage(), options(samba))
    await bare.init()
    driver = wrap(bare, QUICK)
    data = os.urandom(4 * BLOCK)
    file = await put_bytes(driver, obj, "hang.bin", data)
    link = await driver.link(file, LinkArgs())
    assert link.reader is not None
    stream = link.reader(0, None)
    threads = bare.threads.size
    try:
        assert await anext(stream) == data[:BLOCK]
        with samba.daemon.paused():
            with pytest.raises(TemporaryFailure):  # a download's next block
                await bounded(drain(stream))
            calls = [driver.get(f"/{obj.name}/hang.bin") for _ in range(threads)]
            failed = await bounded(asyncio.gather(*calls, return_exceptions=True))
            assert all(isinstance(outcome, TemporaryFailure) for outcome in failed), failed
            # The server still hung, every one of the storage's threads is free again.
            everyone = threading.Barrier(threads)
            waits = [bare.run_blocking(everyone.wait, BOUND) for _ in range(threads)]
            await bounded(asyncio.gather(*waits))
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    try:
        assert await read_obj(driver, file) == data  # a new connection, once it answers
    finally:
        await bare.drop()


async def drain(stream: AsyncIterator[bytes]) -> None:
    async for _ in stream:
        pass


# --- mounted through the API -----------------------------------------------------------


async def test_mounted_through_the_api(api: Api, samba: Samba) -> None:
    await api.as_admin()
    folder = f"api-{secrets.token_hex(4)}"
    (samba.folder / folder).mkdir()
    addition = options(samba).model_dump_json()
    created = await api.post(
        "/api/admin/storage/create", {"mount_path": "/smb", "driver": "SMB", "addition": addition}
    )
    assert created["code"] == 200, created
    listed = await api.post("/api/fs/list", {"path": "/smb"})
    assert listed["code"] == 200 and folder in [o["name"] for o in listed["data"]["content"]]

    data = os.urandom(BLOCK + 77)
    path = f"/smb/{folder}/up load.bin"
    headers = {"File-Path": quote(path), "Authorization": api.token}
    put = await api.client.put("/api/fs/put", content=data, headers=headers)
    assert put.json()["code"] == 200, put.text
    assert (samba.folder / folder / "up load.bin").read_bytes() == data

    sign = api.services.signer.sign(path)
    download = await api.client.get(f"/d{quote(path)}", params={"sign": sign})
    assert download.status_code == 200 and download.content == data
    ranged = await api.client.get(
        f"/d{quote(path)}", params={"sign": sign}, headers={"Range": "bytes=10-19"}
    )
    assert ranged.status_code == 206 and ranged.content == data[10:20]

    removed = await api.post("/api/fs/remove", {"dir": f"/smb/{folder}", "names": ["up load.bin"]})
    assert removed["code"] == 200, removed
    assert os.listdir(samba.folder / folder) == []

    wrong = "wrong-" + secrets.token_hex(8)
    addition = options(samba, password=wrong).model_dump_json()
    failed = await api.post(
        "/api/admin/storage/create", {"mount_path": "/bad", "driver": "SMB", "addition": addition}
    )
    assert failed["code"] == 500 and wrong not in json.dumps(failed)
    storages = await api.get("/api/admin/storage/list")
    status = next(s["status"] for s in storages["data"]["content"] if s["mount_path"] == "/bad")
    assert "login failed" in status and wrong not in status


async def test_the_share_and_a_local_storage_of_its_disk_tell_the_same_space(
    bare: SMBDriver, samba: Samba
) -> None:
    # Samba sends the space a writer may use for both of its "available" figures, so
    # the share cannot tell the blocks kept for root: used counts them on both sides.
    addition = LocalAddition(root_folder_path=str(samba.folder))
    local = LocalDriver(Storage(id=2, mount_path="/l", driver="Local"), addition)
    await local.init()
    shared, here, measured = await bare.details(), await local.details(), df(samba.folder)
    assert shared.total == here.total == measured.size
    assert near(shared.free, measured.avail) and near(here.free, measured.avail)
    assert shared.used == shared.total - shared.free
    assert here.used == here.total - here.free
    assert near(shared.used, here.used)
