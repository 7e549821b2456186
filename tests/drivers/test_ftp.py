"""The FTP driver against two real servers, pyftpdlib and vsftpd: the conformance
suite, its options, TLS, connection reuse, and a server killed under each kind of call."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pytest

from manifold.drivers.base import FOLDER_MOVE, RESERVED_PREFIX, LinkArgs, Upload
from manifold.drivers.ftp.driver import FtpDriver
from manifold.drivers.ftp.listing import LINK, Entry, parse_list, parse_mlsx
from manifold.drivers.ftp.meta import CONFIG, Addition
from manifold.errors import (
    InvalidRequest,
    NotSupported,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.models import Obj, Storage
from manifold.testing.conformance import DriverConformance, DriverFactory, chunks, read_obj
from manifold.vfs.layers import wrap
from tests.conftest import Api
from tests.drivers.driver_helpers import driver_form, form_items
from tests.drivers.ftp_server import FtpServer, pyftpdlib_server, vsftpd_server
from tests.drivers.space_helpers import df, near

SERVERS = {"pyftpdlib": pyftpdlib_server, "vsftpd": vsftpd_server}
# For a test of what only one of the servers does (vsftpd alone speaks TLS here).
only_vsftpd = pytest.mark.parametrize("ftp_server", ["vsftpd"], indirect=True)
only_pyftpdlib = pytest.mark.parametrize("ftp_server", ["pyftpdlib"], indirect=True)


@pytest.fixture(scope="module", params=sorted(SERVERS))
def ftp_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FtpServer]:
    kind: str = request.param
    server = SERVERS[kind](tmp_path_factory.mktemp(kind))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pyftpd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FtpServer]:
    server = pyftpdlib_server(tmp_path_factory.mktemp("pyftpd-api"))
    yield server
    server.stop()


def make_driver(server: FtpServer, **options: Any) -> FtpDriver:
    fields: dict[str, Any] = {
        "address": server.address,
        "username": server.user,
        "password": server.password,
        "root_folder_path": "/",
        **options,
    }
    return FtpDriver(Storage(id=1, mount_path="/ftp", driver="FTP"), Addition(**fields))


async def started(server: FtpServer, **options: Any) -> FtpDriver:
    driver = make_driver(server, **options)
    await driver.init()
    return driver


@pytest.fixture
async def ftp(ftp_server: FtpServer) -> AsyncIterator[FtpDriver]:
    """A bare driver (no layers: the tests look at what the driver itself does)."""
    driver = await started(ftp_server)
    yield driver
    await driver.drop()


async def fresh_folder(driver: FtpDriver) -> Obj:
    return await driver.make_dir(await driver.root_obj(), f"t-{secrets.token_hex(4)}")


async def put(driver: FtpDriver, folder: Obj, name: str, data: bytes) -> Obj:
    return await driver.put(folder, Upload(name, chunks(data), len(data), None))


class TestFtpConformance(DriverConformance):
    @pytest.fixture
    def driver_factory(self, ftp_server: FtpServer) -> DriverFactory:
        async def build() -> Any:
            return wrap(await started(ftp_server), CONFIG)

        return build


# --- options -------------------------------------------------------------------------


async def test_options_are_alists_then_tls(api: Api) -> None:
    info = await driver_form(api, "FTP")
    assert form_items(info["additional"]) == [
        ("address", "string", "", True),
        ("encoding", "string", "", True),
        ("username", "string", "", True),
        ("password", "string", "", True),
        ("root_folder_path", "string", "/", True),
        ("tls", "select", "none", False),
        ("tls_insecure_skip_verify", "bool", "false", False),
    ]
    alist = info["additional"][:5]
    assert all(item["help"] == "" and item["options"] == "" for item in alist)
    tls, insecure = info["additional"][5:]
    assert tls["options"] == "none,explicit"
    assert "unsafe" in insecure["help"].lower()
    config = info["config"]
    assert (config["name"], config["local_sort"], config["only_local"]) == ("FTP", True, True)
    assert (config["default_root"], config["no_cache"], config["only_proxy"]) == ("/", False, False)


def test_defaults_keep_tls_off_and_verification_on() -> None:
    options = Addition(address="h:21", root_folder_path="/")
    assert (options.tls, options.tls_insecure_skip_verify) == ("none", False)
    assert {FOLDER_MOVE} == FtpDriver.PROMISES


async def test_wrong_password_fails_without_showing_it(ftp_server: FtpServer) -> None:
    secret = "not-the-password-" + secrets.token_hex(6)
    driver = make_driver(ftp_server, password=secret)
    with pytest.raises(PermissionDenied) as caught:
        await driver.init()
    assert "login" in caught.value.message
    assert secret not in caught.value.message
    await driver.drop()


async def test_unreachable_server_is_temporary(ftp_server: FtpServer) -> None:
    from tests.fixtures.processes import free_port

    secret = "pw-" + secrets.token_hex(6)
    driver = make_driver(ftp_server, address=f"127.0.0.1:{free_port()}", password=secret)
    with pytest.raises(TemporaryFailure) as caught:
        await driver.init()
    assert secret not in caught.value.message
    await driver.drop()


@pytest.mark.parametrize("address", ["", "ftp://u:secret@h:21", "u:secret@h", "h:notaport"])
async def test_bad_address_is_refused_without_echo(address: str) -> None:
    driver = FtpDriver(
        Storage(id=1, mount_path="/ftp", driver="FTP"),
        Addition(address=address, root_folder_path="/"),
    )
    with pytest.raises(InvalidRequest) as caught:
        await driver.init()
    assert "secret" not in caught.value.message


async def test_missing_root_fails_init(ftp_server: FtpServer) -> None:
    driver = make_driver(ftp_server, root_folder_path="/no/such/root")
    with pytest.raises(ObjectNotFound):
        await driver.init()
    await driver.drop()


async def test_sub_folder_as_root(ftp: FtpDriver, ftp_server: FtpServer) -> None:
    folder = await fresh_folder(ftp)
    await put(ftp, folder, "inside.txt", b"inside")
    for root in (folder.path, folder.path.lstrip("/")):  # absolute, and from the login folder
        rooted = await started(ftp_server, root_folder_path=root)
        listed = await rooted.list(await rooted.root_obj())
        assert [o.name for o in listed] == ["inside.txt"]
        assert (await rooted.get("/inside.txt")).size == 6
        await rooted.drop()


# --- listings ------------------------------------------------------------------------


def test_list_lines_of_unix_and_dos_servers() -> None:
    now = datetime(2024, 3, 10, 12, 0, tzinfo=UTC)
    assert parse_list(
        "-rw-r--r--    1 999      994            5 Mar 01 09:30  two spaces ", now
    ) == (Entry(" two spaces ", "file", 5, datetime(2024, 3, 1, 9, 30, tzinfo=UTC)))
    assert parse_list("drwxr-xr-x 2 ftp ftp 4096 Dec 24 2019 old dir", now) == Entry(
        "old dir", "dir", 0, datetime(2019, 12, 24, tzinfo=UTC)
    )
    # A date without a year later than tomorrow is last year's.
    assert parse_list("-rw-r--r-- 1 a b 7 Dec 31 23:59 x", now) == Entry(
        "x", "file", 7, datetime(2023, 12, 31, 23, 59, tzinfo=UTC)
    )
    assert parse_list("lrwxrwxrwx 1 a b 3 Mar 01 09:30 to dir -> ../dir", now) == Entry(
        "to dir", LINK, 0, datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
    )
    assert parse_list("03-01-24  09:30AM       <DIR>          Win Dir", now) == Entry(
        "Win Dir", "dir", 0, datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
    )
    assert parse_list("03-01-2024  01:05PM             1234 a b.txt", now) == Entry(
        "a b.txt", "file", 1234, datetime(2024, 3, 1, 13, 5, tzinfo=UTC)
    )
    for skipped in ("total 12", "drwxr-xr-x 2 a b 4096 Mar 01 09:30 .", "garbage"):
        assert parse_list(skipped, now) is None


def test_mlsd_lines() -> None:
    line = "type=file;size=12;modify=20240301093005.5;perm=r;  lead;semi "
    assert parse_mlsx(line) == Entry(  # one space ends the facts; the name keeps the rest
        " lead;semi ", "file", 12, datetime(2024, 3, 1, 9, 30, 5, 500000, tzinfo=UTC)
    )
    assert parse_mlsx("type=dir;modify=20240301093005; d") == Entry(
        "d", "dir", 0, datetime(2024, 3, 1, 9, 30, 5, tzinfo=UTC)
    )
    assert parse_mlsx("type=cdir;modify=20240301093005; .") is None
    assert parse_mlsx("type=OS.unix=slink:/x;modify=bad; l") == Entry("l", LINK, 0, None)


def test_mlsd_times_out_of_range_are_none() -> None:
    for stamp in ("20241301093005", "20230229120000", "20240301246000", "2024030109300"):
        entry = parse_mlsx(f"type=file;size=1;modify={stamp}; f")
        assert entry is not None and entry.modified is None, stamp


async def test_files_and_folders_carry_times_in_utc(ftp: FtpDriver, ftp_server: FtpServer) -> None:
    folder = await fresh_folder(ftp)
    await put(ftp, folder, "timed.txt", b"t")
    await ftp.make_dir(folder, "sub")
    (ftp_server.root / folder.name / "timed.txt").touch()  # now, whatever the upload said
    listed = {o.name: o for o in await ftp.list(folder)}
    now = datetime.now(UTC)
    # LIST gives minutes only: within a few minutes of the server's clock (this one).
    assert abs((listed["timed.txt"].modified - now).total_seconds()) < 600
    assert abs((listed["sub"].modified - now).total_seconds()) < 600


async def test_upload_keeps_the_senders_time_where_mfmt_exists(
    ftp: FtpDriver, ftp_server: FtpServer
) -> None:
    folder = await fresh_folder(ftp)
    when = datetime(2021, 6, 5, 4, 3, 2, tzinfo=UTC)
    await ftp.put(folder, Upload("dated.txt", chunks(b"d"), 1, when))
    listed = (await ftp.list(folder))[0]
    if ftp_server.kind == "pyftpdlib":
        assert listed.modified == when
    else:  # vsftpd has no MFMT: the server's own time stays
        assert listed.modified.year >= 2024


async def test_temporaries_are_hidden_and_stale_ones_swept(
    ftp: FtpDriver, ftp_server: FtpServer
) -> None:
    folder = await fresh_folder(ftp)
    await put(ftp, folder, "real.txt", b"r")
    on_disk = ftp_server.root / folder.name
    fresh, stale = on_disk / f"{RESERVED_PREFIX}fresh", on_disk / f"{RESERVED_PREFIX}stale"
    for temp in (fresh, stale):
        temp.write_bytes(b"partial")
        os.chown(temp, on_disk.stat().st_uid, on_disk.stat().st_gid)
    two_days_ago = time.time() - 2 * 86400
    os.utime(stale, (two_days_ago, two_days_ago))
    assert [o.name for o in await ftp.list(folder)] == ["real.txt"]
    assert fresh.exists()  # may be an upload under way elsewhere
    assert not stale.exists()
    fresh.unlink()


async def test_a_big_folder_lists_in_full_and_one_past_the_bound_is_refused(
    ftp: FtpDriver, ftp_server: FtpServer
) -> None:
    folder = await fresh_folder(ftp)
    on_disk = ftp_server.root / folder.name
    # Lines of several batches (MLSD's or LIST's), each name cut nowhere.
    for i in range(6_000):
        (on_disk / f"entry with spaces {i:05d}.txt").write_bytes(b"")
    listed = {o.name for o in await ftp.list(folder)}
    assert len(listed) == 6_000 and "entry with spaces 05999.txt" in listed
    ftp.resources.max_listing_entries = 2_000
    with pytest.raises(ServerError, match="holds more than 2000 entries"):
        await ftp.list(folder)
    ftp.resources.max_listing_entries = 6_000
    assert len(await ftp.list(folder)) == 6_000  # the refused listing left the pool sound


@only_vsftpd
async def test_names_in_another_encoding(ftp_server: FtpServer) -> None:
    folder_name = f"enc-{secrets.token_hex(4)}"
    folder = ftp_server.root / folder_name
    folder.mkdir()
    latin1_name = folder / "café.txt".encode("latin-1").decode("utf-8", "surrogateescape")
    latin1_name.write_bytes(b"x")
    owner = ftp_server.root.stat()
    for path in (folder, latin1_name):
        os.chown(path, owner.st_uid, owner.st_gid)
    latin = await started(ftp_server, encoding="latin-1", root_folder_path=f"/{folder_name}")
    listed = await latin.list(await latin.root_obj())
    assert [o.name for o in listed] == ["café.txt"]
    assert await read_obj(latin, listed[0]) == b"x"
    await latin.drop()
    utf8 = await started(ftp_server, root_folder_path=f"/{folder_name}")
    assert await utf8.list(await utf8.root_obj()) == []  # not shown as a name nobody can reach
    await utf8.drop()


async def test_removing_a_folder_leaves_what_its_links_lead_to(
    ftp: FtpDriver, ftp_server: FtpServer
) -> None:
    folder = await fresh_folder(ftp)
    kept = await ftp.make_dir(folder, "kept")
    await put(ftp, kept, "precious.txt", b"keep me")
    doomed = await ftp.make_dir(folder, "doomed")
    await put(ftp, doomed, "own.txt", b"mine")
    os.symlink("../kept", ftp_server.root / folder.name / "doomed" / "link")
    await ftp.remove(doomed)
    assert [o.name for o in await ftp.list(folder)] == ["kept"]
    assert await read_obj(ftp, (await ftp.list(kept))[0]) == b"keep me"


# --- downloads reuse their connections ------------------------------------------------


async def test_many_small_ranges_reuse_connections(ftp: FtpDriver, ftp_server: FtpServer) -> None:
    folder = await fresh_folder(ftp)
    data = os.urandom(3 * 1024 * 1024)
    obj = await put(ftp, folder, "archive.bin", data)
    logins, logged = ftp.pool.logins, ftp_server.logins()
    link = await ftp.link(obj, LinkArgs())
    assert link.reader is not None
    starts = [(i * 104729) % (len(data) - 500) for i in range(40)]
    for start in starts:
        got = b"".join([c async for c in link.reader(start, 300)])
        assert got == data[start : start + 300]
    # Every range read aborted its transfer and left the connection in step for the next.
    assert ftp.pool.logins == logins
    assert ftp.pool.reuses >= len(starts)
    assert ftp_server.logins() == logged  # the server's own count agrees


async def test_a_reader_closed_early_gives_its_connection_back(ftp: FtpDriver) -> None:
    folder = await fresh_folder(ftp)
    data = os.urandom(2 * 1024 * 1024)
    obj = await put(ftp, folder, "big.bin", data)
    link = await ftp.link(obj, LinkArgs())
    assert link.reader is not None
    logins = ftp.pool.logins
    for _ in range(5):
        stream = link.reader(0, None)
        first = await anext(stream)
        assert data.startswith(first)
        await stream.aclose()  # type: ignore[attr-defined]
    assert await read_obj(ftp, obj, 100, 10) == data[100:110]
    assert ftp.pool.logins == logins


async def test_concurrent_readers_share_a_bounded_pool(ftp: FtpDriver) -> None:
    folder = await fresh_folder(ftp)
    data = os.urandom(256 * 1024)
    obj = await put(ftp, folder, "shared.bin", data)
    results = await asyncio.gather(*(read_obj(ftp, obj, i * 1000, 5000) for i in range(20)))
    assert results == [data[i * 1000 : i * 1000 + 5000] for i in range(20)]
    assert ftp.pool.logins <= CONFIG.max_concurrency + 1


async def test_read_past_the_end_is_empty(ftp: FtpDriver) -> None:
    folder = await fresh_folder(ftp)
    obj = await put(ftp, folder, "short.txt", b"0123456789")
    assert await read_obj(ftp, obj, 10) == b""
    assert await read_obj(ftp, obj, 50, 5) == b""
    assert await read_obj(ftp, obj, 8) == b"89"


# --- TLS -----------------------------------------------------------------------------


@only_vsftpd
async def test_tls_verifies_certificates_by_default(ftp_server: FtpServer) -> None:
    driver = make_driver(ftp_server, tls="explicit")
    with pytest.raises(TemporaryFailure) as caught:
        await driver.init()
    assert "certificate" in caught.value.message
    await driver.drop()


@only_vsftpd
async def test_tls_with_a_trusted_certificate(
    ftp_server: FtpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ftp_server.ca_file is not None
    monkeypatch.setenv("SSL_CERT_FILE", str(ftp_server.ca_file))
    await _round_trip(await started(ftp_server, tls="explicit"), ftp_server)


@only_vsftpd
async def test_tls_without_verification_when_asked(ftp_server: FtpServer) -> None:
    driver = await started(ftp_server, tls="explicit", tls_insecure_skip_verify=True)
    await _round_trip(driver, ftp_server)


@only_pyftpdlib
async def test_tls_refused_by_a_server_without_it(ftp_server: FtpServer) -> None:
    driver = make_driver(ftp_server, tls="explicit")
    with pytest.raises(InvalidRequest) as caught:
        await driver.init()
    assert "TLS" in caught.value.message
    await driver.drop()


async def _round_trip(driver: FtpDriver, server: FtpServer) -> None:
    folder = await fresh_folder(driver)
    data = os.urandom(200_000)
    obj = await put(driver, folder, "secret.bin", data)
    assert await read_obj(driver, obj) == data
    assert await read_obj(driver, obj, 1000, 10) == data[1000:1010]
    assert [o.name for o in await driver.list(folder)] == ["secret.bin"]
    await driver.remove(folder)
    assert folder.name not in server.files()
    await driver.drop()


# --- the server dies under a call ----------------------------------------------------


def temporaries(server: FtpServer, folder: Obj) -> list[str]:
    return [p for p in server.files() if p.startswith(folder.name + "/") and RESERVED_PREFIX in p]


async def test_server_killed_during_a_list(ftp_server: FtpServer) -> None:
    driver = wrap(await started(ftp_server), CONFIG)
    folder = await driver.make_dir(await driver.root_obj(), f"t-{secrets.token_hex(4)}")
    with ftp_server.frozen():
        listing = asyncio.ensure_future(driver.list(folder))
        await asyncio.sleep(0.2)  # let it send its command to the frozen server
        ftp_server.crash()
        with pytest.raises(TemporaryFailure):
            await listing
    ftp_server.start()
    assert await driver.list(folder) == []
    await driver.drop()


async def test_server_killed_during_a_download(ftp_server: FtpServer) -> None:
    driver = await started(ftp_server)
    folder = await fresh_folder(driver)
    data = os.urandom(8 * 1024 * 1024)
    obj = await put(driver, folder, "long.bin", data)
    link = await driver.link(obj, LinkArgs())
    assert link.reader is not None
    stream = link.reader(0, None)
    got = await anext(stream)
    ftp_server.crash()
    with pytest.raises(TemporaryFailure):
        async for chunk in stream:
            got += chunk
    assert len(got) < len(data)
    ftp_server.start()
    assert await read_obj(driver, obj, 5000, 100) == data[5000:5100]
    await driver.drop()


async def test_server_killed_during_an_upload(ftp_server: FtpServer) -> None:
    driver = await started(ftp_server)
    folder = await fresh_folder(driver)

    async def endless() -> AsyncIterator[bytes]:
        for sent in range(10_000):
            if sent == 20:
                ftp_server.crash()
            yield os.urandom(64 * 1024)

    with pytest.raises(TemporaryFailure):
        await driver.put(folder, Upload("cut.bin", endless(), None, None))
    ftp_server.start()
    # The first call after the restart deletes the temporary left on the server.
    assert await driver.list(folder) == []
    assert temporaries(ftp_server, folder) == []
    assert await read_obj(driver, await put(driver, folder, "after.txt", b"again")) == b"again"
    await driver.drop()


async def test_a_restart_while_idle_costs_no_call(ftp_server: FtpServer) -> None:
    driver = await started(ftp_server)
    folder = await fresh_folder(driver)
    await put(driver, folder, "before.txt", b"b")
    logins = driver.pool.logins
    ftp_server.crash()
    ftp_server.start()
    # Not retried by any layer: the driver replaces the dead connection by itself.
    renamed = await driver.rename((await driver.list(folder))[0], "after.txt")
    assert renamed.name == "after.txt"
    assert driver.pool.logins == logins + 1  # one new connection served both calls
    await driver.drop()


async def test_a_cancelled_upload_leaves_nothing(ftp: FtpDriver, ftp_server: FtpServer) -> None:
    folder = await fresh_folder(ftp)
    gate = asyncio.Event()

    async def stalled() -> AsyncIterator[bytes]:
        yield b"x" * 1000
        gate.set()
        await asyncio.Event().wait()
        yield b""

    upload = asyncio.ensure_future(ftp.put(folder, Upload("stalled.bin", stalled(), None, None)))
    await gate.wait()
    upload.cancel()
    with pytest.raises(asyncio.CancelledError):
        await upload
    assert await ftp.list(folder) == []
    assert temporaries(ftp_server, folder) == []


# --- through the server's API ---------------------------------------------------------


async def mount_ftp(api: Api, pyftpd: FtpServer) -> None:
    """The pyftpdlib server's root mounted at ``/ftp`` through the admin API."""
    await api.as_admin()
    addition = {
        "address": pyftpd.address,
        "encoding": "",
        "username": pyftpd.user,
        "password": pyftpd.password,
        "root_folder_path": "/",
    }
    body = {"mount_path": "/ftp", "driver": "FTP", "addition": json.dumps(addition)}
    created = await api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created


async def test_mounted_through_the_api(api: Api, pyftpd: FtpServer) -> None:
    await mount_ftp(api, pyftpd)
    data = os.urandom(300_000)
    put_response = await api.client.put(
        "/api/fs/put",
        content=data,
        headers={"Authorization": api.token, "File-Path": "/ftp/up.bin"},
    )
    assert put_response.json()["code"] == 200, put_response.text
    listed = await api.post("/api/fs/list", {"path": "/ftp", "refresh": True})
    assert [o["name"] for o in listed["data"]["content"]] == ["up.bin"]
    got = await api.post("/api/fs/get", {"path": "/ftp/up.bin"})
    raw = urlsplit(got["data"]["raw_url"])
    download = await api.client.get(f"{raw.path}?{raw.query}")
    assert download.status_code == 200
    assert download.content == data
    ranged = await api.client.get(f"{raw.path}?{raw.query}", headers={"Range": "bytes=10-19"})
    assert (ranged.status_code, ranged.content) == (206, data[10:20])
    removed = await api.post("/api/fs/remove", {"dir": "/ftp", "names": ["up.bin"]})
    assert removed["code"] == 200, removed
    assert pyftpd.files() == []


async def test_names_ftp_cannot_carry_are_refused(ftp: FtpDriver) -> None:
    folder = await fresh_folder(ftp)
    for bad in ("line\nbreak", "carriage\rreturn"):
        with pytest.raises(InvalidRequest):
            await ftp.make_dir(folder, bad)
        with pytest.raises(InvalidRequest):
            await put(ftp, folder, bad, b"x")
    assert await ftp.list(folder) == []


@only_pyftpdlib
async def test_a_read_only_login_is_refused_writes(ftp: FtpDriver, ftp_server: FtpServer) -> None:
    folder = await fresh_folder(ftp)
    obj = await put(ftp, folder, "theirs.txt", b"theirs")
    reader = await started(ftp_server, username=ftp_server.reader)
    [seen] = await reader.list(folder)
    assert await read_obj(reader, seen) == b"theirs"
    with pytest.raises(PermissionDenied):
        await put(reader, folder, "mine.txt", b"mine")
    with pytest.raises(PermissionDenied):
        await reader.make_dir(folder, "sub")
    with pytest.raises(PermissionDenied):
        await reader.remove(seen)
    with pytest.raises(PermissionDenied):
        await reader.rename(seen, "renamed.txt")
    assert [o.name for o in await ftp.list(folder)] == [obj.name]
    await reader.drop()


async def test_free_space_where_the_server_answers_avbl(
    ftp: FtpDriver, ftp_server: FtpServer
) -> None:
    if ftp_server.kind == "vsftpd":  # vsftpd has no AVBL: the space stays unknown
        with pytest.raises(NotSupported):
            await ftp.details()
        return
    usage = await ftp.details()
    # AVBL tells the free space alone: the size stays unknown (0, which the page hides).
    assert (usage.total, usage.used) == (0, 0)
    assert near(usage.free, df(ftp_server.root).avail)


async def test_the_storage_list_shows_an_ftp_servers_free_space(
    api: Api, pyftpd: FtpServer
) -> None:
    await mount_ftp(api, pyftpd)
    [shown] = (await api.get("/api/admin/storage/list"))["data"]["content"]
    details = shown["mount_details"]
    assert (details["total_space"], details["used_space"]) == (0, 0)
    assert near(details["free_space"], df(pyftpd.root).avail)
