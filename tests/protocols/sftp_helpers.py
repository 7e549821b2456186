"""A live Manifold with its SFTP server on a free loopback port, and its users."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import httpx

from manifold.container import Services
from manifold.drivers.sftp.driver import SftpDriver
from manifold.drivers.sftp.meta import CONFIG, Addition
from manifold.models import Meta, Perm, Role, Storage
from manifold.protocols.sftp import start_sftp
from manifold.services.auth.users import UserInput
from tests.api.fs_helpers import make_tree
from tests.api.live_server import serving
from tests.drivers.sftp_server import SshServer

SFTP_READ = int(Perm.FTP_READ)
SFTP_BITS = int(Perm.FTP_READ | Perm.FTP_MANAGE)
FILE_BITS = 0xF8  # write, rename, move, copy, remove: no hidden files, no password pass
WRITER = SFTP_BITS | FILE_BITS
TREE: dict[str, bytes | str] = {
    "docs/readme.txt": "hello world",
    "docs/.secret": "hidden by a meta",
    "empty/": "",
    "locked/inside.txt": "behind a password",
    "big.bin": bytes(range(256)) * 4096,  # 1 MiB
}
CLIENT_OPTIONS = ["-F", "/dev/null", "-o", "StrictHostKeyChecking=no"]
CLIENT_OPTIONS += ["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]


@dataclass
class Live:
    services: Services
    url: str  # the HTTP API
    port: int  # the SFTP server
    disk: Path  # the Local storage's folder, mounted at /local

    def connect(self, username: str, **options: Any) -> asyncssh.SSHClientConnection:
        """An SSH connection (to be awaited or used with ``async with``)."""
        if "password" not in options and "client_keys" not in options:
            options["password"] = f"{username}-pw"
        options.setdefault("client_keys", None)
        return asyncssh.connect(
            "127.0.0.1", self.port, username=username, known_hosts=None, **options
        )

    @asynccontextmanager
    async def sftp(self, username: str, **options: Any) -> AsyncIterator[asyncssh.SFTPClient]:
        async with self.connect(username, **options) as conn, conn.start_sftp_client() as sftp:
            yield sftp


@asynccontextmanager
async def live_manifold(services: Services, root: Path) -> AsyncIterator[Live]:
    """``services`` served over HTTP and SFTP, with ``TREE`` mounted at ``/local``, a
    hide rule for dot files in ``/local/docs`` and a password on ``/local/locked``."""
    disk = make_tree(root, TREE)
    addition = json.dumps({"root_folder_path": str(disk)})
    await services.storages.create(Storage(0, "/local", "Local", addition=addition))
    await services.metas.create(Meta(0, "/local/docs", password="", hide="^\\."))
    await services.metas.create(Meta(0, "/local/locked", password="door", p_sub=True))
    services.config.address = "127.0.0.1"
    reuse_host_keys(services.config.data_dir / "ssh")
    async with serving(services) as url:
        server = await start_sftp(
            services.ops, services.credentials, services.settings, services.config, port=0
        )
        keep_host_keys(services.config.data_dir / "ssh")
        try:
            yield Live(services, url, server.port, disk)
        finally:
            await server.stop()


# Host keys made by the first server of the session, copied to the later ones: a 4096
# bit RSA key takes seconds to make.
_HOST_KEYS: list[Path] = []


def reuse_host_keys(folder: Path) -> None:
    """Copy the session's host keys into ``folder`` (once a server has made them)."""
    if _HOST_KEYS and not folder.exists():
        shutil.copytree(_HOST_KEYS[0], folder)


def keep_host_keys(folder: Path) -> None:
    if not _HOST_KEYS:
        kept = Path(tempfile.mkdtemp(prefix="manifold-hostkeys-")) / "ssh"
        shutil.copytree(folder, kept)
        _HOST_KEYS.append(kept)


@asynccontextmanager
async def over_limited_sftp(
    services: Services, sshd: SshServer, disk: Path, name: str, slots: int, idle: float
) -> AsyncIterator[Live]:
    """Manifold's SFTP server with a user ``sam`` and the sshd's ``served`` folder at
    ``/remote``, on a storage (driver ``name``) of ``slots`` upload slots that gives an
    idle one up after ``idle`` seconds."""

    config = dataclasses.replace(CONFIG, name=name, max_concurrency=slots, idle_timeout=idle)
    services.registry.register(name, SftpDriver, Addition, config)
    await add_user(services, "sam")
    async with live_manifold(services, disk) as started:
        addition = {
            "address": sshd.address,
            "username": "root",
            "private_key": sshd.private_key,
            "root_folder_path": str(sshd.folder / "served"),
            "host_key_fingerprint": sshd.host_fingerprint,
        }
        storage = Storage(0, "/remote", name, addition=json.dumps(addition))
        await services.storages.create(storage)
        yield started


async def add_user(services: Services, name: str, permission: int = WRITER, **fields: Any) -> None:
    await services.users.create(UserInput(name, f"{name}-pw", permission=permission, **fields))


async def enable_guest(services: Services, permission: int) -> None:
    guest = await services.users.guest()
    data = UserInput(guest.username, "", guest.base_path, Role.GUEST, False, permission)
    await services.users.update(guest.id, data)


async def register_key(live: Live, name: str, folder: Path) -> Path:
    """A new Ed25519 key pair in ``folder``, its public half added by ``name`` through
    ``/api/me/sshkey/add``; the private key's path."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    private = folder / f"{name}_ed25519"
    private.write_bytes(key.export_private_key())
    private.chmod(0o600)
    async with httpx.AsyncClient(base_url=live.url) as client:
        login = await client.post(
            "/api/auth/login", json={"username": name, "password": f"{name}-pw"}
        )
        token = login.json()["data"]["token"]
        added = await client.post(
            "/api/me/sshkey/add",
            json={"title": "laptop", "key": key.export_public_key().decode()},
            headers={"Authorization": token},
        )
    assert added.json()["code"] == 200, added.text
    return private


@dataclass
class Run:
    code: int
    raw: bytes  # what it wrote to stdout
    err: str

    @property
    def out(self) -> str:
        return self.raw.decode(errors="replace")


async def run(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> Run:
    """A client program run without holding up the event loop the servers run on."""
    process = await asyncio.create_subprocess_exec(
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(stdin), 120)
    assert process.returncode is not None
    return Run(process.returncode, out, err.decode(errors="replace"))
