"""The SFTP server with real clients: OpenSSH's ``sftp`` and rclone's sftp backend."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from manifold.app import create_app
from manifold.config import load_config
from manifold.container import Services
from manifold.drivers.rclone.process import RCLONE
from tests.conftest import start_services
from tests.fixtures.processes import free_port, port_open
from tests.protocols.sftp_helpers import (
    CLIENT_OPTIONS,
    Live,
    Run,
    add_user,
    live_manifold,
    register_key,
    reuse_host_keys,
    run,
)

needs_sftp = pytest.mark.skipif(shutil.which("sftp") is None, reason="OpenSSH sftp missing")
needs_rclone = pytest.mark.skipif(not os.path.exists(RCLONE), reason="rclone missing")


@pytest.fixture
async def live(services: Services, tmp_path: Path) -> AsyncIterator[Live]:
    await add_user(services, "sam")
    async with live_manifold(services, tmp_path / "disk") as started:
        yield started


async def openssh(live: Live, key: Path, batch: str) -> Run:
    """``sftp -b -`` with ``batch`` as its commands, logged in as sam with ``key``."""
    args = ["sftp", "-b", "-", "-P", str(live.port), "-i", str(key), *CLIENT_OPTIONS]
    args += ["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "sam@127.0.0.1"]
    return await run(*args, stdin=batch.encode())


@needs_sftp
async def test_openssh_session(live: Live, tmp_path: Path) -> None:
    key = await register_key(live, "sam", tmp_path)
    upload = tmp_path / "upload.bin"
    upload.write_bytes(bytes(range(256)) * 3000)
    got = tmp_path / "got.txt"
    batch = f"""
ls -l /local
cd /local/docs
put {upload} up.bin
get readme.txt {got}
rename up.bin renamed.bin
mkdir /local/made
ls /local
rm renamed.bin
rmdir /local/made
rmdir /local/empty
"""
    result = await openssh(live, key, batch)
    assert result.code == 0, result.err
    assert "big.bin" in result.out and "made" in result.out
    assert got.read_text() == "hello world"
    assert sorted(p.name for p in live.disk.iterdir()) == ["big.bin", "docs", "locked"]
    assert sorted(p.name for p in (live.disk / "docs").iterdir()) == [".secret", "readme.txt"]


@needs_sftp
async def test_openssh_put_lands_exact_bytes(live: Live, tmp_path: Path) -> None:
    key = await register_key(live, "sam", tmp_path)
    upload = tmp_path / "up.bin"
    upload.write_bytes(bytes(range(251)) * 20_000)  # 5 MB, many pipelined writes
    result = await openssh(live, key, f"put {upload} /local/up.bin\n")
    assert result.code == 0, result.err
    assert (live.disk / "up.bin").read_bytes() == upload.read_bytes()


@needs_sftp
async def test_openssh_errors_end_the_batch(live: Live, tmp_path: Path) -> None:
    key = await register_key(live, "sam", tmp_path)
    result = await openssh(live, key, "get /local/missing.txt /dev/null\n")
    assert result.code != 0
    assert "not found" in result.err.lower() or "no such file" in result.err.lower()


@needs_sftp
async def test_openssh_refused_without_a_registered_key(live: Live, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    stranger.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    stranger.chmod(0o600)
    result = await openssh(live, stranger, "ls /\n")
    assert result.code != 0
    assert "permission denied" in result.err.lower()


@needs_sftp
async def test_openssh_df_reports_the_storage_and_no_host_path(live: Live, tmp_path: Path) -> None:
    key = await register_key(live, "sam", tmp_path)
    result = await openssh(live, key, "df /local/docs\n")
    assert result.code == 0, result.err
    host = os.statvfs(live.disk)
    size_kib = host.f_blocks * host.f_frsize // 4096 * 4
    assert result.out.splitlines()[-1].split()[0] == str(size_kib)
    refused = await openssh(live, key, "df /etc\n")
    assert refused.code != 0


@needs_sftp
async def test_openssh_put_with_fsync_lands_the_file(live: Live, tmp_path: Path) -> None:
    key = await register_key(live, "sam", tmp_path)
    upload = tmp_path / "up.txt"
    upload.write_text("synced")
    result = await openssh(live, key, f"put -f {upload} /local/up.txt\n")
    assert "fsync: Operation unsupported" in result.err
    assert (live.disk / "up.txt").read_text() == "synced"


def rclone_env(live: Live, password: str) -> dict[str, str]:
    return {
        "RCLONE_CONFIG": "/dev/null",
        "RCLONE_CONFIG_M_TYPE": "sftp",
        "RCLONE_CONFIG_M_HOST": "127.0.0.1",
        "RCLONE_CONFIG_M_PORT": str(live.port),
        "RCLONE_CONFIG_M_USER": "sam",
        "RCLONE_CONFIG_M_PASS": password,
        "RCLONE_CONFIG_M_SHELL_TYPE": "none",
    }


async def rclone(env: dict[str, str], *args: str) -> Run:
    result = await run(RCLONE, *args, env=env)
    assert result.code == 0, result.err
    return result


@needs_rclone
async def test_rclone_session(live: Live, tmp_path: Path) -> None:
    obscured = (await run(RCLONE, "obscure", "sam-pw")).out.strip()
    env = rclone_env(live, obscured)
    listed = json.loads((await rclone(env, "lsjson", "m:/local")).out)
    assert {e["Name"]: e["IsDir"] for e in listed} == {
        "big.bin": False,
        "docs": True,
        "empty": True,
        "locked": True,
    }
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 8192)  # 2 MiB
    await rclone(env, "copyto", str(source), "m:/local/docs/copied.bin")
    assert (live.disk / "docs" / "copied.bin").read_bytes() == source.read_bytes()
    part = await rclone(env, "cat", "--offset", "1000", "--count", "300", "m:/local/big.bin")
    assert part.raw == (live.disk / "big.bin").read_bytes()[1000:1300]
    await rclone(env, "moveto", "m:/local/docs/copied.bin", "m:/local/empty/moved.bin")
    assert (live.disk / "empty" / "moved.bin").read_bytes() == source.read_bytes()
    assert not (live.disk / "docs" / "copied.bin").exists()
    await rclone(env, "deletefile", "m:/local/empty/moved.bin")
    assert list((live.disk / "empty").iterdir()) == []


async def test_sftp_port_starts_and_stops_with_the_app(tmp_path: Path) -> None:
    services = await start_services(tmp_path / "data")
    port = free_port()
    services.config.address = "127.0.0.1"
    services.config.sftp_port = port
    reuse_host_keys(services.config.data_dir / "ssh")
    app = create_app(services.config, services)
    async with app.router.lifespan_context(app):
        assert port_open(port)
    assert not port_open(port)
    reloaded = load_config(tmp_path / "data", env={"MANIFOLD_SFTP_PORT": "5222"})
    assert reloaded.sftp_port == 5222
