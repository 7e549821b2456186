"""The SFTP server's edges, driven by asyncssh's client: logins, confinement, writes."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from manifold.container import Services
from manifold.models import Perm
from tests.protocols.sftp_helpers import (
    SFTP_BITS,
    SFTP_READ,
    WRITER,
    Live,
    add_user,
    enable_guest,
    live_manifold,
    register_key,
)


@pytest.fixture
async def live(services: Services, tmp_path: Path) -> AsyncIterator[Live]:
    await add_user(services, "sam")
    async with live_manifold(services, tmp_path / "disk") as started:
        yield started


async def refused(live: Live, username: str, **options: object) -> None:
    with pytest.raises(asyncssh.PermissionDenied):
        async with live.connect(username, **options):
            pass


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- logins -------------------------------------------------------------------------


async def test_password_login_lists_the_tree(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        assert await sftp.listdir("/") == [".", "..", "local"]
        assert sorted(await sftp.listdir("/local")) == [
            ".",
            "..",
            "big.bin",
            "docs",
            "empty",
            "locked",
        ]


async def test_wrong_password_and_missing_user_are_refused_alike(live: Live) -> None:
    await refused(live, "sam", password="wrong")
    await refused(live, "nobody", password="whatever")


async def test_user_without_the_sftp_bit_is_refused(live: Live) -> None:
    await add_user(live.services, "webby", permission=0xFF)
    await refused(live, "webby")


async def test_disabled_user_is_refused(live: Live) -> None:
    await add_user(live.services, "gone", disabled=True)
    await refused(live, "gone")


async def test_failures_lock_the_name_out_as_the_api_does(live: Live) -> None:
    for _ in range(live.services.config.max_login_failures):
        await refused(live, "sam", password="wrong")
    await refused(live, "sam")  # the right password, too late


async def test_public_key_login_with_a_registered_key(live: Live, tmp_path: Path) -> None:
    private = await register_key(live, "sam", tmp_path)
    async with live.sftp("sam", client_keys=[str(private)], password=None) as sftp:
        assert await sftp.exists("/local/docs/readme.txt")
    other = asyncssh.generate_private_key("ssh-ed25519")
    await refused(live, "sam", client_keys=[other], password=None)


async def test_guest_gets_in_without_credentials_only_when_enabled(live: Live) -> None:
    await refused(live, "guest", password=None)
    await enable_guest(live.services, SFTP_READ)
    async with live.sftp("guest", password=None) as sftp:
        async with sftp.open("/local/docs/readme.txt") as f:
            assert await f.read() == "hello world"
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            await sftp.mkdir("/local/by-guest")


async def test_guest_without_the_bit_is_refused(live: Live) -> None:
    await enable_guest(live.services, 0)
    await refused(live, "guest", password=None)


async def test_no_shell_or_command(live: Live) -> None:
    async with live.connect("sam") as conn:
        with pytest.raises(asyncssh.ChannelOpenError):
            await conn.run("id", check=True)


# --- reading ------------------------------------------------------------------------


async def test_ranged_reads_at_any_offset(live: Live) -> None:
    data = (live.disk / "big.bin").read_bytes()
    async with live.sftp("sam") as sftp, sftp.open("/local/big.bin", "rb") as f:
        for offset, length in ((0, 10), (700_000, 4096), (5, 1), (len(data) - 3, 100)):
            await f.seek(offset)
            assert await f.read(length) == data[offset : offset + length]
        await f.seek(len(data))
        assert await f.read(10) == b""


async def test_stat_of_files_and_folders(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        file = await sftp.stat("/local/big.bin")
        assert (file.size, stat.S_ISREG(file.permissions or 0)) == (1 << 20, True)
        folder = await sftp.stat("/local/docs")
        assert stat.S_ISDIR(folder.permissions or 0)
        with pytest.raises(asyncssh.SFTPNoSuchFile):
            await sftp.stat("/local/missing.txt")


async def test_hidden_entries_are_left_out(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        assert sorted(await sftp.listdir("/local/docs")) == [".", "..", "readme.txt"]


async def test_folder_with_a_password_is_denied(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            await sftp.listdir("/local/locked")
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            async with sftp.open("/local/locked/inside.txt"):
                pass


async def test_user_with_the_password_pass_bit_gets_in(live: Live) -> None:
    await add_user(live.services, "pat", permission=WRITER | 0b10)
    async with live.sftp("pat") as sftp:
        assert "inside.txt" in await sftp.listdir("/local/locked")


# --- confinement --------------------------------------------------------------------


async def test_dot_dot_never_leaves_the_base_path(live: Live) -> None:
    await add_user(live.services, "bea", base_path="/local/docs")
    async with live.sftp("bea") as sftp:
        assert await sftp.realpath("../../..") == "/"
        assert await sftp.realpath("a/../../b") == "/b"
        assert sorted(await sftp.listdir("/../..")) == [".", "..", "readme.txt"]
        async with sftp.open("/../../readme.txt") as f:
            assert await f.read() == "hello world"
        with pytest.raises(asyncssh.SFTPNoSuchFile):
            await sftp.stat("/../big.bin")


async def test_user_with_a_base_path_sees_only_it(live: Live) -> None:
    await add_user(live.services, "bea", base_path="/local/docs")
    async with live.sftp("bea") as sftp:
        assert sorted(await sftp.listdir("/")) == [".", "..", "readme.txt"]
        with pytest.raises(asyncssh.SFTPNoSuchFile):
            await sftp.stat("/local")


async def test_no_symbolic_links(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        with pytest.raises(asyncssh.SFTPOpUnsupported):
            await sftp.symlink("/local/docs/readme.txt", "/local/link")
        folder = await sftp.stat("/local/docs")
        assert (await sftp.lstat("/local/docs")).permissions == folder.permissions
    assert not (live.disk / "link").exists()


async def test_statvfs_answers_for_the_storage_never_a_host_path(live: Live) -> None:
    await add_user(live.services, "bea", permission=SFTP_READ, base_path="/local/docs")
    host = os.statvfs(live.disk)
    async with live.sftp("bea") as sftp:
        space = await sftp.statvfs("/")
        assert space.blocks * space.frsize == host.f_blocks * host.f_frsize // 4096 * 4096
        for named in ("/etc", str(live.services.config.data_dir / "ssh"), "/missing"):
            with pytest.raises(asyncssh.SFTPNoSuchFile):
                await sftp.statvfs(named)


async def test_statvfs_where_no_storage_reports_space_is_unsupported(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        with pytest.raises(asyncssh.SFTPOpUnsupported):
            await sftp.statvfs("/")  # only mount points: no storage's space
        assert (await sftp.statvfs("/local/docs")).blocks > 0


async def test_statvfs_is_refused_behind_a_password(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            await sftp.statvfs("/local/locked")


async def test_lsetstat_changes_no_host_file(live: Live, tmp_path: Path) -> None:
    host = tmp_path / "host.txt"
    host.write_text("the host's")
    host.chmod(0o600)
    async with live.sftp("sam") as sftp:
        with pytest.raises(asyncssh.SFTPNoSuchFile):
            await sftp.chmod(str(host), 0o666, follow_symlinks=False)
        await sftp.chmod("/local/big.bin", 0o600, follow_symlinks=False)
    assert stat.S_IMODE(host.stat().st_mode) == 0o600


# --- writing ------------------------------------------------------------------------


async def test_put_streams_and_lands_whole(live: Live) -> None:
    payload = bytes(range(256)) * 1000
    async with live.sftp("sam") as sftp:
        async with sftp.open("/local/new.bin", "wb") as f:
            for at in range(0, len(payload), 32768):
                await f.write(payload[at : at + 32768], at)
        assert (await sftp.stat("/local/new.bin")).size == len(payload)
    assert (live.disk / "new.bin").read_bytes() == payload


async def test_a_gap_is_refused_and_nothing_lands(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        f = await sftp.open("/local/gap.bin", "wb")
        await f.write(b"a" * 100, 0)
        with pytest.raises(asyncssh.SFTPFailure):
            await f.write(b"b" * 100, 200)
        with pytest.raises(asyncssh.SFTPFailure):
            await f.close()
    assert "gap.bin" not in leftovers(live.disk)


async def test_disconnect_mid_upload_leaves_nothing(live: Live) -> None:
    before = leftovers(live.disk)
    conn = await live.connect("sam")
    sftp = await conn.start_sftp_client()
    f = await sftp.open("/local/cut.bin", "wb")
    await f.write(b"x" * 65536, 0)
    conn.abort()
    await conn.wait_closed()
    for _ in range(600):  # until the server has noticed the connection went
        if leftovers(live.disk) == before:
            break
        await asyncio.sleep(0.05)
    async with live.sftp("sam") as again:
        assert not await again.exists("/local/cut.bin")
    assert leftovers(live.disk) == before


async def test_fsync_of_a_read_is_ok_and_of_an_upload_unsupported(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        async with sftp.open("/local/docs/readme.txt", "rb") as f:
            await f.fsync()
            assert await f.read() == b"hello world"
        async with sftp.open("/local/synced.txt", "wb") as f:
            await f.write(b"kept")
            with pytest.raises(asyncssh.SFTPOpUnsupported):
                await f.fsync()
    assert (live.disk / "synced.txt").read_bytes() == b"kept"


async def test_append(live: Live) -> None:
    async with live.sftp("sam") as sftp, sftp.open("/local/docs/readme.txt", "ab") as f:
        await f.write(b"!!")
    assert (live.disk / "docs" / "readme.txt").read_bytes() == b"hello world!!"


async def test_resume_keeps_the_bytes_before_the_first_write(live: Live) -> None:
    async with live.sftp("sam") as sftp, sftp.open("/local/docs/readme.txt", "r+b") as f:
        await f.write(b"there", 6)
    assert (live.disk / "docs" / "readme.txt").read_bytes() == b"hello there"


async def test_exclusive_create_refuses_a_taken_name(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        with pytest.raises(asyncssh.SFTPFailure):
            async with sftp.open("/local/docs/readme.txt", "xb"):
                pass
    assert (live.disk / "docs" / "readme.txt").read_bytes() == b"hello world"


async def test_read_only_user_cannot_write(live: Live) -> None:
    await add_user(live.services, "rita", permission=SFTP_READ | 0xF8)
    async with live.sftp("rita") as sftp:
        assert await sftp.exists("/local/big.bin")
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            async with sftp.open("/local/nope.txt", "wb"):
                pass
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            await sftp.mkdir("/local/newdir")
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            await sftp.remove("/local/big.bin")
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            await sftp.rename("/local/big.bin", "/local/b.bin")
    assert leftovers(live.disk) == ["big.bin", "docs", "empty", "locked"]


async def test_sftp_write_bit_without_the_file_bits_cannot_write(live: Live) -> None:
    await add_user(live.services, "sid", permission=SFTP_BITS)
    async with live.sftp("sid") as sftp:
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            await sftp.mkdir("/local/newdir")


async def test_rename_keeps_a_taken_name_and_posix_rename_replaces_it(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        await sftp.mkdir("/local/a")
        async with sftp.open("/local/a/one.txt", "wb") as f:
            await f.write(b"one")
        async with sftp.open("/local/a/two.txt", "wb") as f:
            await f.write(b"two")
        with pytest.raises(asyncssh.SFTPFailure):
            await sftp.rename("/local/a/one.txt", "/local/a/two.txt")
        await sftp.posix_rename("/local/a/one.txt", "/local/a/two.txt")
        assert await sftp.listdir("/local/a") == [".", "..", "two.txt"]
        await sftp.rename("/local/a/two.txt", "/local/docs/three.txt")
    assert (live.disk / "docs" / "three.txt").read_bytes() == b"one"


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("/local/t/f.txt", "/local/t/full"),  # a file onto a folder with contents
        ("/local/t/f.txt", "/local/t/void"),  # onto an empty folder
        ("/local/t/full/in.txt", "/local/t/full"),  # onto its own folder
        ("/local/t/full/deep/g.txt", "/local/t"),  # onto an ancestor
        ("/local/t/full", "/local/t"),  # a folder onto its parent
        ("/local/t/full", "/local/t/f.txt"),  # a folder onto a file
    ],
)
async def test_posix_rename_never_replaces_a_folder_or_an_ancestor(
    live: Live, src: str, dst: str
) -> None:
    t = live.disk / "t"
    for path, text in {"f.txt": "f", "full/in.txt": "in", "full/deep/g.txt": "g"}.items():
        (t / path).parent.mkdir(parents=True, exist_ok=True)
        (t / path).write_text(text)
    (t / "void").mkdir()
    before = snapshot(live.disk)
    async with live.sftp("sam") as sftp:
        with pytest.raises(asyncssh.SFTPError):
            await sftp.posix_rename(src, dst)
    assert snapshot(live.disk) == before
    assert (t / "void").is_dir()


async def test_posix_rename_over_a_file_needs_the_remove_permission(live: Live) -> None:
    await add_user(live.services, "kept", permission=WRITER & ~int(Perm.REMOVE))
    (live.disk / "docs" / "old.txt").write_text("old")
    (live.disk / "docs" / "new.txt").write_text("new")
    (live.disk / "docs" / "empty.txt").write_text("")
    async with live.sftp("kept") as sftp:
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            await sftp.remove("/local/docs/old.txt")
        with pytest.raises(asyncssh.SFTPPermissionDenied):
            await sftp.posix_rename("/local/docs/new.txt", "/local/docs/old.txt")
        assert (live.disk / "docs" / "old.txt").read_text() == "old"
        await sftp.posix_rename("/local/docs/new.txt", "/local/docs/empty.txt")
    assert (live.disk / "docs" / "empty.txt").read_text() == "new"


async def test_rmdir_removes_only_an_empty_folder(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        with pytest.raises(asyncssh.SFTPFailure):
            await sftp.rmdir("/local/docs")  # a visible file, and a hidden one
        (live.disk / "docs" / "readme.txt").unlink()
        with pytest.raises(asyncssh.SFTPFailure):
            await sftp.rmdir("/local/docs")  # looks empty: only the hidden file
        with pytest.raises(asyncssh.SFTPFailure):
            await sftp.rmdir("/local/big.bin")
        with pytest.raises(asyncssh.SFTPFailure):
            await sftp.remove("/local/empty")
        await sftp.rmdir("/local/empty")
    assert (live.disk / "docs" / ".secret").exists()
    assert not (live.disk / "empty").exists()


async def test_mkdir_of_a_taken_name_and_under_a_missing_folder_fail(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        with pytest.raises(asyncssh.SFTPFailure):
            await sftp.mkdir("/local/docs")
        with pytest.raises(asyncssh.SFTPNoSuchFile):
            await sftp.mkdir("/local/missing/child")
        with pytest.raises(asyncssh.SFTPNoSuchFile):
            await sftp.remove("/local/missing.txt")


async def test_setstat_is_accepted_and_a_cut_is_not(live: Live) -> None:
    async with live.sftp("sam") as sftp:
        await sftp.utime("/local/big.bin", (1_000_000, 1_000_000))
        await sftp.chmod("/local/big.bin", 0o600)
        with pytest.raises(asyncssh.SFTPOpUnsupported):
            await sftp.truncate("/local/big.bin", 10)
    assert (live.disk / "big.bin").stat().st_size == 1 << 20


async def test_host_keys_are_kept_private_in_the_data_folder(live: Live) -> None:
    folder = live.services.config.data_dir / "ssh"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("ssh_host_rsa_key", "ssh_host_ed25519_key"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
        assert (folder / f"{name}.pub").read_text().startswith(("ssh-rsa ", "ssh-ed25519 "))
    assert (folder / "ssh_host_rsa_key").read_text().startswith("-----BEGIN RSA PRIVATE KEY")
