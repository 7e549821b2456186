"""The SFTP driver against a real OpenSSH server: the conformance suite as the server
mounts it, logins and host keys, symlinks, and the server dying mid-call."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncssh
import pytest

from manifold.drivers.base import (
    EXCLUSIVE_CREATE,
    FOLDER_MOVE,
    FOLDER_TIMES,
    RESERVED_PREFIX,
    Driver,
    LinkArgs,
    Upload,
    translating,
)
from manifold.drivers.registry import builtin_registry
from manifold.drivers.sftp.driver import ERRORS, PAGE_SIZE, READ_CHUNK, WRITE_CHUNK, SftpDriver
from manifold.drivers.sftp.meta import CONFIG, Addition
from manifold.drivers.sftp.session import parse_address, same_fingerprint
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotAFolder,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.models import Storage
from manifold.testing.conformance import (
    DriverConformance,
    DriverFactory,
    chunks,
    put_bytes,
    read_obj,
)
from manifold.vfs.layers import wrap
from tests.conftest import Api
from tests.drivers.driver_helpers import driver_form, form_items
from tests.drivers.sftp_server import PasswordLogin, SshServer, fingerprint, password_login
from tests.fixtures.processes import free_port

STORAGE = Storage(id=1, mount_path="/sftp", driver="SFTP")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = SshServer(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def account() -> Iterator[PasswordLogin]:
    login = password_login()
    yield login
    shutil.rmtree(login.folder, ignore_errors=True)


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """A fresh folder the key login (root) serves."""
    folder = tmp_path / "served"
    folder.mkdir()
    return folder


@pytest.fixture
async def running(sshd: SshServer) -> AsyncIterator[SshServer]:
    """The module's server, up again after a test that killed it."""
    yield sshd
    sshd.start()


def key_options(sshd: SshServer, root: Path | str, **options: Any) -> Addition:
    values: dict[str, Any] = {
        "address": sshd.address,
        "username": "root",
        "private_key": sshd.private_key,
        "root_folder_path": str(root),
        "host_key_fingerprint": sshd.host_fingerprint,
        **options,
    }
    return Addition(**values)


async def started(options: Addition) -> SftpDriver:
    driver = SftpDriver(STORAGE, options)
    await driver.init()
    return driver


@pytest.fixture
async def driver(sshd: SshServer, served: Path) -> AsyncIterator[SftpDriver]:
    built = await started(key_options(sshd, served))
    yield built
    await built.drop()


@pytest.fixture
async def mounted(sshd: SshServer, served: Path) -> AsyncIterator[Driver[Any]]:
    """The driver wrapped in the layers the server puts around it."""
    built = await started(key_options(sshd, served))
    yield wrap(built, CONFIG)
    await built.drop()


class TestSftpConformance(DriverConformance):
    @pytest.fixture
    def driver_factory(self, sshd: SshServer, served: Path) -> DriverFactory:
        async def build() -> Driver[Any]:
            return wrap(await started(key_options(sshd, served)), CONFIG)

        return build


def temporaries(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.startswith(RESERVED_PREFIX)]


# --- options, logins and host keys --------------------------------------------------

ALIST_OPTIONS = [
    ("address", "string", "", True),
    ("username", "string", "", True),
    ("private_key", "text", "", False),
    ("password", "string", "", False),
    ("passphrase", "string", "", False),
    ("root_folder_path", "string", "/", True),
    ("ignore_symlink_error", "bool", "false", False),
]


async def test_driver_info_shows_alists_options_then_the_pin(api: Api) -> None:
    info = await driver_form(api, "SFTP")
    items = info["additional"]
    assert form_items(items) == [*ALIST_OPTIONS, ("host_key_fingerprint", "string", "", False)]
    assert all(i["help"] == "" and i["options"] == "" for i in items[:-1])
    assert info["config"] == {
        "name": "SFTP",
        "local_sort": True,
        "only_local": True,
        "only_proxy": False,
        "no_cache": False,
        "no_upload": False,
        "need_ms": False,
        "default_root": "/",
        "alert": "",
    }
    assert CONFIG.check_status


async def test_password_login_lists_writes_and_reads(
    sshd: SshServer, account: PasswordLogin
) -> None:
    options = Addition(
        address=sshd.address,
        username=account.username,
        password=account.password,
        root_folder_path=str(account.folder),
        host_key_fingerprint=sshd.host_fingerprint,
    )
    driver = await started(options)
    try:
        root = await driver.root_obj()
        obj = await put_bytes(driver, root, "by-password.txt", b"pw")
        assert [o.name for o in await driver.list(root)] == ["by-password.txt"]
        assert await read_obj(driver, obj) == b"pw"
        owner = (account.folder / "by-password.txt").stat().st_uid
        assert owner != 0  # written as the account, not as root
    finally:
        await driver.drop()


def test_invalid_options_are_refused_without_echoing_them() -> None:
    storage = Storage(
        id=2, mount_path="/x", driver="SFTP", addition='{"password": "hunter2-secret"}'
    )
    with pytest.raises(InvalidRequest) as failed:
        builtin_registry().build(storage)
    assert "root_folder_path" in failed.value.message
    assert "hunter2-secret" not in failed.value.message


async def test_a_refused_login_names_the_user_never_the_password(
    sshd: SshServer, account: PasswordLogin, served: Path
) -> None:
    wrong = "not-the-" + secrets.token_hex(6)
    options = Addition(
        address=sshd.address,
        username=account.username,
        password=wrong,
        root_folder_path=str(served),
        host_key_fingerprint=sshd.host_fingerprint,
    )
    with pytest.raises(PermissionDenied) as failed:
        await started(options)
    assert account.username in failed.value.message
    assert wrong not in failed.value.message
    assert wrong not in repr(failed.value)


@pytest.fixture
def locked_key(tmp_path: Path) -> tuple[Path, str]:
    """A private key file encrypted with a passphrase, and the passphrase."""
    secret = "passphrase-" + secrets.token_hex(6)
    key = tmp_path / "locked"
    argv = ["ssh-keygen", "-q", "-t", "ed25519", "-N", secret, "-C", "", "-f", str(key)]
    subprocess.run(argv, check=True)
    return key, secret


async def test_a_wrong_key_passphrase_is_an_init_error_without_secrets(
    sshd: SshServer, served: Path, locked_key: tuple[Path, str]
) -> None:
    key, secret = locked_key
    options = key_options(sshd, served, private_key=key.read_text(), passphrase="wrong-one")
    with pytest.raises(InvalidRequest) as failed:
        await started(options)
    assert "private_key" in failed.value.message
    assert secret not in failed.value.message and "wrong-one" not in failed.value.message
    assert "PRIVATE KEY" not in failed.value.message


async def test_a_host_key_mismatch_fails_init_naming_both_fingerprints(
    sshd: SshServer, served: Path
) -> None:
    other = fingerprint(Path(f"{sshd.client_key}.pub"))
    options = key_options(sshd, served, host_key_fingerprint=other, password="pw-never-shown")
    with pytest.raises(PermissionDenied) as failed:
        await started(options)
    message = failed.value.message
    assert "host key mismatch" in message
    assert other in message and sshd.host_fingerprint in message
    assert "pw-never-shown" not in message and "PRIVATE KEY" not in message


async def test_the_first_connection_pins_the_host_key_and_saves_it(
    sshd: SshServer, served: Path
) -> None:
    saved: list[str] = []

    async def saver(addition: str) -> None:
        saved.append(addition)

    driver = SftpDriver(STORAGE, key_options(sshd, served, host_key_fingerprint=""))
    driver.options_saver = saver
    await driver.init()
    try:
        assert driver.options.host_key_fingerprint == sshd.host_fingerprint
        assert [json.loads(s)["host_key_fingerprint"] for s in saved] == [sshd.host_fingerprint]
        assert json.loads(driver.addition())["host_key_fingerprint"] == sshd.host_fingerprint
    finally:
        await driver.drop()
    # Pinned from now on: the same options open the storage again without saving.
    again = SftpDriver(STORAGE, Addition.model_validate_json(saved[0]))
    again.options_saver = saver
    await again.init()
    await again.drop()
    assert len(saved) == 1


def test_fingerprints_match_as_admins_write_them(sshd: SshServer) -> None:
    offered = sshd.host_fingerprint
    digest = offered.removeprefix("SHA256:")
    assert same_fingerprint(offered, offered)
    assert same_fingerprint(f"  {offered}=  ", offered)
    assert same_fingerprint(digest, offered)
    assert not same_fingerprint("SHA256:" + "A" * len(digest), offered)
    assert same_fingerprint("MD5:AB:cd", "MD5:ab:cd")
    assert not same_fingerprint("MD5:ab:cd", offered)


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        ("example.org", ("example.org", 22)),
        ("example.org:2222", ("example.org", 2222)),
        ("[::1]:2200", ("::1", 2200)),
        ("::1", ("::1", 22)),
    ],
)
def test_addresses(address: str, parsed: tuple[str, int]) -> None:
    assert parse_address(address) == parsed


@pytest.mark.parametrize("address", ["", "host:0", "host:http", "[::1]:99999"])
def test_bad_addresses_are_refused(address: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_address(address)


async def test_a_key_that_cannot_be_pinned_leaves_no_connection_open(
    sshd: SshServer, served: Path
) -> None:
    """The first key is pinned by saving the options: when that fails, the connection
    it was offered on is closed, not left to the server."""
    driver = SftpDriver(STORAGE, key_options(sshd, served, host_key_fingerprint=""))

    async def unsaved(addition: str) -> None:
        raise ServerError("the database is away")

    driver.options_saver = unsaved
    with pytest.raises(ServerError, match="database"):
        await driver.init()
    for _ in range(300):  # the server's session ends once the client is gone
        if sshd.sessions() == 0:
            break
        await asyncio.sleep(0.1)
    assert sshd.sessions() == 0


async def test_a_missing_root_fails_init(sshd: SshServer, served: Path) -> None:
    with pytest.raises(ObjectNotFound, match="root folder"):
        await started(key_options(sshd, served / "nope"))


async def test_a_closed_port_fails_init_as_temporary(sshd: SshServer, served: Path) -> None:
    options = key_options(sshd, served, address=f"127.0.0.1:{free_port()}")
    with pytest.raises(
        TemporaryFailure, match=r"^cannot reach the SFTP server at .*: connection refused$"
    ):
        await started(options)


@pytest.mark.parametrize(
    ("exc", "error"),
    [
        (asyncssh.SFTPNoSuchFile("No such file"), ObjectNotFound),
        (asyncssh.SFTPPermissionDenied("Permission denied"), PermissionDenied),
        (asyncssh.SFTPFailure("Failure"), ServerError),
        (asyncssh.SFTPOpUnsupported("no statvfs"), NotSupported),
        (asyncssh.SFTPConnectionLost("Connection lost"), TemporaryFailure),
        (asyncssh.ConnectionLost("Connection lost"), TemporaryFailure),
        (ConnectionResetError(104, "Connection reset by peer"), TemporaryFailure),
        (TimeoutError(), TemporaryFailure),
    ],
)
def test_library_errors_are_translated_with_cause(exc: Exception, error: type) -> None:
    with pytest.raises(ManifoldError) as caught, translating(ERRORS):
        raise exc
    assert type(caught.value) is error
    assert caught.value.__cause__ is exc


# --- listings ------------------------------------------------------------------------


@pytest.fixture
def linked(served: Path) -> Path:
    (served / "target.txt").write_bytes(b"target bytes")
    (served / "folder").mkdir()
    (served / "folder" / "inner.txt").write_bytes(b"inner")
    (served / "file-link").symlink_to("target.txt")
    (served / "dir-link").symlink_to(served / "folder")
    return served


async def test_symlinks_are_followed(sshd: SshServer, linked: Path) -> None:
    driver = await started(key_options(sshd, linked))
    try:
        listed = {o.name: o for o in await driver.list(await driver.root_obj())}
        assert sorted(listed) == ["dir-link", "file-link", "folder", "target.txt"]
        assert (listed["file-link"].is_dir, listed["file-link"].size) == (False, 12)
        assert listed["dir-link"].is_dir
        assert await read_obj(driver, listed["file-link"]) == b"target bytes"
        assert [o.name for o in await driver.list(listed["dir-link"])] == ["inner.txt"]
    finally:
        await driver.drop()


async def test_a_broken_symlink_fails_the_listing_unless_ignored(
    sshd: SshServer, linked: Path
) -> None:
    (linked / "broken").symlink_to("nowhere")
    strict = await started(key_options(sshd, linked))
    lenient = await started(key_options(sshd, linked, ignore_symlink_error=True))
    try:
        with pytest.raises(ManifoldError, match="symlink") as failed:
            await strict.list(await strict.root_obj())
        assert not isinstance(failed.value, ObjectNotFound)  # the folder is there
        names = sorted(o.name for o in await lenient.list(await lenient.root_obj()))
        assert names == ["dir-link", "file-link", "folder", "target.txt"]
    finally:
        await strict.drop()
        await lenient.drop()


async def test_listings_carry_utc_times_and_hide_temporaries(
    driver: SftpDriver, served: Path
) -> None:
    (served / f"{RESERVED_PREFIX}left").write_bytes(b"half")
    (served / "kept.txt").write_bytes(b"kept")
    os.utime(served / "kept.txt", (1_700_000_000, 1_700_000_000))
    listed = await driver.list(await driver.root_obj())
    assert [o.name for o in listed] == ["kept.txt"]
    assert listed[0].modified.timestamp() == 1_700_000_000
    assert listed[0].modified.utcoffset() is not None
    assert listed[0].modified.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


async def test_stale_temporaries_are_swept_fresh_ones_only_hidden(
    driver: SftpDriver, served: Path
) -> None:
    """A temporary left for an hour by a process that died goes at the next listing;
    a young one (an upload under way elsewhere) stays."""
    stale, young = served / f"{RESERVED_PREFIX}stale", served / f"{RESERVED_PREFIX}young"
    stale.write_bytes(b"left by a dead upload")
    young.write_bytes(b"being written elsewhere")
    an_hour_ago = time.time() - 3600
    os.utime(stale, (an_hour_ago, an_hour_ago))
    assert await driver.list(await driver.root_obj()) == []
    assert temporaries(served) == [young.name]


async def test_a_big_folder_comes_in_pages(driver: SftpDriver, served: Path) -> None:
    for i in range(PAGE_SIZE + 5):
        (served / f"f{i:05d}").write_bytes(b"")
    pages = [page async for page in driver.list_pages(await driver.root_obj())]
    assert len(pages) == 2 and all(0 < len(p) <= PAGE_SIZE for p in pages)
    assert sum(len(p) for p in pages) == PAGE_SIZE + 5
    assert len(await driver.list(await driver.root_obj())) == PAGE_SIZE + 5


@pytest.fixture(scope="module")
def one_channel_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A server that allows one channel per connection (``MaxSessions 1``)."""
    server = SshServer(tmp_path_factory.mktemp("sshd-one"), max_sessions=1).start()
    yield server
    server.stop()


async def test_a_server_allowing_one_channel_is_listed_over_that_channel(
    one_channel_sshd: SshServer, served: Path
) -> None:
    """Listings go over a second channel where the server allows one; without it the
    one channel lists, in the same pages, links followed and temporaries hidden."""
    for i in range(PAGE_SIZE + 5):
        (served / f"f{i:05d}").write_bytes(b"")
    (served / "sub").mkdir()
    (served / "sub-link").symlink_to("sub")
    (served / f"{RESERVED_PREFIX}young").write_bytes(b"being written")
    driver = await started(key_options(one_channel_sshd, served))
    try:
        root = await driver.root_obj()
        pages = [page async for page in driver.list_pages(root)]
        assert len(pages) == 2 and all(0 < len(p) <= PAGE_SIZE for p in pages)
        assert sum(len(p) for p in pages) == PAGE_SIZE + 7
        listed = {o.name: o for o in await driver.list(root)}
        assert len(listed) == PAGE_SIZE + 7
        assert listed["sub-link"].is_dir and listed["sub"].is_dir
        with pytest.raises(NotAFolder):
            await driver.list(listed["f00000"])
    finally:
        await driver.drop()


async def test_listing_a_file_is_not_a_folder(driver: SftpDriver, served: Path) -> None:
    obj = await put_bytes(driver, await driver.root_obj(), "plain.txt", b"x")
    with pytest.raises(NotAFolder):
        await driver.list(obj)


async def test_get_and_details(driver: SftpDriver, served: Path) -> None:
    (served / "sub").mkdir()
    (served / "sub" / "f.bin").write_bytes(b"12345")
    found = await driver.get("/sub/f.bin")
    assert (found.name, found.size, found.is_dir) == ("f.bin", 5, False)
    assert (await driver.get("/")).is_dir
    usage = await driver.details()
    assert usage.total > 0 and 0 <= usage.free <= usage.total


# --- writes --------------------------------------------------------------------------


async def test_put_sets_the_time_and_refuses_a_folders_name(
    driver: SftpDriver, served: Path
) -> None:
    root = await driver.root_obj()
    when = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    obj = await driver.put(root, Upload("dated.txt", chunks(b"dated"), 5, when))
    assert obj.modified == when
    assert (served / "dated.txt").stat().st_mtime == when.timestamp()
    await driver.make_dir(root, "taken")
    for overwrite in (True, False):
        with pytest.raises(ObjectExists):
            await driver.put(root, Upload("taken", chunks(b"x"), 1, None, overwrite=overwrite))
    assert (served / "taken").is_dir()
    assert temporaries(served) == []


async def test_a_failed_upload_leaves_no_temporary_on_disk(
    driver: SftpDriver, served: Path
) -> None:
    with pytest.raises(InvalidRequest):
        await driver.put(await driver.root_obj(), Upload("short.bin", chunks(b"x" * 10), 20, None))
    assert os.listdir(served) == []


async def test_a_folder_copy_keeps_links_as_links(driver: SftpDriver, linked: Path) -> None:
    root = await driver.root_obj()
    target = await driver.make_dir(root, "copies")
    folder = await driver.get("/folder")
    (linked / "folder" / "link").symlink_to("inner.txt")
    copied = await driver.copy(folder, target)
    assert os.readlink(linked / "copies" / "folder" / "link") == "inner.txt"
    assert sorted(o.name for o in await driver.list(copied)) == ["inner.txt", "link"]
    assert temporaries(linked / "copies") == []


async def test_copies_go_through_this_server_where_the_server_cannot_copy(
    driver: SftpDriver, served: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(asyncssh.SFTPClient, "supports_remote_copy", property(lambda _: False))
    data = os.urandom(2 * READ_CHUNK + 7)
    (served / "tree").mkdir()
    (served / "tree" / "data.bin").write_bytes(data)
    (served / "tree" / "empty.bin").write_bytes(b"")
    os.utime(served / "tree" / "data.bin", (1_600_000_000, 1_600_000_000))
    target = await driver.make_dir(await driver.root_obj(), "target")
    await driver.copy(await driver.get("/tree"), target)
    assert (served / "target" / "tree" / "data.bin").read_bytes() == data
    assert (served / "target" / "tree" / "data.bin").stat().st_mtime == 1_600_000_000
    assert (served / "target" / "tree" / "empty.bin").read_bytes() == b""


async def test_remove_takes_links_not_their_targets(driver: SftpDriver, linked: Path) -> None:
    listed = {o.name: o for o in await driver.list(await driver.root_obj())}
    await driver.remove(listed["dir-link"])
    assert (linked / "folder" / "inner.txt").exists()
    assert not os.path.lexists(linked / "dir-link")


async def test_a_cancelled_upload_leaves_nothing(driver: SftpDriver, served: Path) -> None:
    written = asyncio.Event()

    async def stalled() -> AsyncIterator[bytes]:
        yield b"x" * WRITE_CHUNK  # a whole batch: written before the next is asked for
        written.set()
        await asyncio.Event().wait()
        yield b""

    upload = Upload("stalled.bin", stalled(), None, None)
    task = asyncio.ensure_future(driver.put(await driver.root_obj(), upload))
    await written.wait()
    assert len(temporaries(served)) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert os.listdir(served) == []


async def test_a_reader_closed_early_releases_the_file(
    sshd: SshServer, driver: SftpDriver, served: Path
) -> None:
    (served / "long.bin").write_bytes(os.urandom(3 * READ_CHUNK))
    link = await driver.link(await driver.get("/long.bin"), LinkArgs())
    assert link.reader is not None
    stream = link.reader(READ_CHUNK, None)
    assert len(await anext(stream)) == READ_CHUNK
    assert str(served / "long.bin") in sshd.open_files()
    await stream.aclose()  # type: ignore[attr-defined]
    assert str(served / "long.bin") not in sshd.open_files()


async def test_promises_on_openssh(driver: SftpDriver) -> None:
    assert driver.promises() == {EXCLUSIVE_CREATE, FOLDER_MOVE, FOLDER_TIMES}


class _Guests(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return False  # no login needed


async def test_another_server_is_served_without_the_exclusive_create_promise(
    served: Path,
) -> None:
    """asyncssh's own server renames by checking the name, then renaming: not atomic."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    server = await asyncssh.listen(
        "127.0.0.1",
        0,
        server_host_keys=[key],
        server_factory=_Guests,
        sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=str(served).encode()),
    )
    port = server.sockets[0].getsockname()[1]
    options = Addition(
        address=f"127.0.0.1:{port}",
        username="guest",
        root_folder_path="/",
        host_key_fingerprint=key.get_fingerprint(),
    )
    try:
        driver = await started(options)
        try:
            assert driver.promises() == {FOLDER_MOVE, FOLDER_TIMES}
            obj = await put_bytes(driver, await driver.root_obj(), "elsewhere.txt", b"bytes")
            assert await read_obj(driver, obj) == b"bytes"
            assert (served / "elsewhere.txt").read_bytes() == b"bytes"
        finally:
            await driver.drop()
    finally:
        server.close()
        await server.wait_closed()


# --- the server going away -----------------------------------------------------------


async def test_the_same_driver_works_again_after_a_restart(
    running: SshServer, mounted: Driver[Any], served: Path
) -> None:
    root = await mounted.root_obj()
    await put_bytes(mounted, root, "before.txt", b"before")
    running.kill()
    with pytest.raises(TemporaryFailure):
        await mounted.list(root)
    running.start()
    assert [o.name for o in await mounted.list(root)] == ["before.txt"]
    await put_bytes(mounted, root, "after.txt", b"after")
    assert (served / "after.txt").read_bytes() == b"after"


async def test_a_kill_during_a_listing_fails_it_as_temporary(
    running: SshServer, mounted: Driver[Any], served: Path
) -> None:
    for i in range(PAGE_SIZE + 1):
        (served / f"e{i:05d}").write_bytes(b"")
    pages = mounted.list_pages(await mounted.root_obj())
    first = await anext(pages)
    assert 0 < len(first) <= PAGE_SIZE
    running.kill()
    with pytest.raises(TemporaryFailure):
        await anext(pages)
    await pages.aclose()
    running.start()
    assert len(await mounted.list(await mounted.root_obj())) == PAGE_SIZE + 1


async def test_a_kill_during_a_download_fails_it_as_temporary(
    running: SshServer, mounted: Driver[Any], served: Path
) -> None:
    data = os.urandom(3 * READ_CHUNK)
    (served / "big.bin").write_bytes(data)
    big = await mounted.get("/big.bin")
    link = await mounted.link(big, LinkArgs())
    assert link.reader is not None
    stream = link.reader(0, None)
    first = await anext(stream)
    assert first == data[: len(first)]
    running.kill()
    with pytest.raises(TemporaryFailure):
        async for _ in stream:
            pass
    running.start()
    assert await read_obj(mounted, big) == data


async def test_a_kill_during_an_upload_leaves_nothing_once_back(
    running: SshServer, mounted: Driver[Any], served: Path
) -> None:
    async def killed_midway() -> AsyncIterator[bytes]:
        yield b"a" * (2 << 20)
        running.kill()
        yield b"b" * (2 << 20)

    root = await mounted.root_obj()
    with pytest.raises(TemporaryFailure):
        await mounted.put(root, Upload("cut.bin", killed_midway(), 4 << 20, None))
    assert len(temporaries(served)) == 1  # the server died before it could be removed
    running.start()
    assert await mounted.list(root) == []
    assert os.listdir(served) == []  # the temporary went at the reconnect


async def test_an_upload_right_after_an_idle_restart_works(
    running: SshServer, mounted: Driver[Any], served: Path
) -> None:
    """The connection died unnoticed while idle; uploads are never retried by the
    layers, so the driver itself opens the file again on a new connection."""
    root = await mounted.root_obj()
    await mounted.list(root)
    running.kill()
    running.start()
    await put_bytes(mounted, root, "fresh.txt", b"fresh")
    assert os.listdir(served) == ["fresh.txt"]


async def test_reading_a_missing_file_after_reconnect_is_not_found(
    running: SshServer, mounted: Driver[Any]
) -> None:
    root = await mounted.root_obj()
    obj = await put_bytes(mounted, root, "gone.txt", b"x")
    await mounted.remove(obj)
    running.kill()
    running.start()
    with pytest.raises(ObjectNotFound):
        await read_obj(mounted, obj)


# --- through the API -----------------------------------------------------------------


async def test_mounted_through_the_api(api: Api, sshd: SshServer, served: Path) -> None:
    await api.as_admin()
    addition = key_options(sshd, served, host_key_fingerprint="").model_dump_json()
    created = await api.post(
        "/api/admin/storage/create",
        {"mount_path": "/remote", "driver": "SFTP", "addition": addition},
    )
    assert created["code"] == 200, created
    storages = (await api.get("/api/admin/storage/list"))["data"]["content"]
    stored = next(s for s in storages if s["mount_path"] == "/remote")
    assert stored["status"] == "work"
    assert json.loads(stored["addition"])["host_key_fingerprint"] == sshd.host_fingerprint
    (served / "hello.txt").write_bytes(b"hello over sftp")
    listed = await api.post("/api/fs/list", {"path": "/remote"})
    assert [o["name"] for o in listed["data"]["content"]] == ["hello.txt"]

    payload = os.urandom(300_000)
    response = await api.client.put(
        "/api/fs/put",
        content=payload,
        headers={"File-Path": "/remote/up.bin", "Authorization": api.token},
    )
    assert response.json()["code"] == 200, response.text
    assert (served / "up.bin").read_bytes() == payload

    got = await api.post("/api/fs/get", {"path": "/remote/up.bin"})
    raw = urlsplit(got["data"]["raw_url"])
    download = await api.client.get(f"{raw.path}?{raw.query}")
    assert download.status_code == 200
    assert download.content == payload

    removed = await api.post("/api/fs/remove", {"dir": "/remote", "names": ["up.bin"]})
    assert removed["code"] == 200, removed
    assert sorted(os.listdir(served)) == ["hello.txt"]
