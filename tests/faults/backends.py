"""Every remote back end on its real server, each reached through a ``FaultProxy``.

``Backend`` is what a fault test needs of one: the storage it mounts (driver and
addition, pointing at the proxy), the proxy to break, and the back end's own view of
its files, read around the proxy (from the server's folder on disk, or from moto
directly), to see what a failed call really left there.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from manifold.drivers.sftp.driver import SftpDriver
from manifold.drivers.smb.driver import SMBDriver
from tests.drivers import alist_v3_server, ftp_server, s3_server, smb_server, webdav_server
from tests.drivers.azurite_server import Azurite, start_azurite
from tests.drivers.sftp_server import SshServer
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.processes import Daemon

BUCKET = "faults"
# The drivers' own time limits in these tests, kept short so a fault shows soon.
CALL_SECONDS = 2.0
IDLE_SECONDS = 2.0
INIT_SECONDS = 15.0


class QuickSMBDriver(SMBDriver):
    """SMB's watchdog follows the short limits too (it reads its own, not the layers')."""

    CALL_SECONDS: ClassVar[float] = CALL_SECONDS
    BLOCK_SECONDS: ClassVar[float] = IDLE_SECONDS


class QuickSftpDriver(SftpDriver):
    """A silent SSH connection is given up within a few seconds, not a minute."""

    KEEPALIVE_SECONDS: ClassVar[float] = 1.0


@dataclass
class Backend:
    """One remote storage's server behind its proxy."""

    name: str  # also its mount path, /<name>
    driver: str
    proxy: FaultProxy
    addition: dict[str, Any]
    files: Callable[[str], Awaitable[dict[str, int]]]  # folder -> {relative path: size}
    # The server's own process, for the tests that kill it and start it again (None:
    # a back end not run that way here).
    server: Daemon | None = None
    # Seconds the server may hold what it was told before it writes it to disk: a kill
    # sooner loses it (Azurite saves its metadata every 5 s; Azure itself never loses it).
    saves_within: float = 0.0

    @property
    def mount(self) -> str:
        return f"/{self.name}"

    def storage_body(self) -> dict[str, Any]:
        addition = json.dumps(self.addition)
        return {
            "mount_path": self.mount,
            "driver": self.driver,
            "addition": addition,
            "web_proxy": True,
        }


def on_disk(root: Path) -> Callable[[str], Awaitable[dict[str, int]]]:
    """The files under ``root/<folder>`` as the server's own disk has them."""

    async def files(folder: str) -> dict[str, int]:
        top = root / folder.strip("/")
        if not top.is_dir():
            return {}
        found = (p for p in top.rglob("*") if p.is_file())
        return {str(p.relative_to(top)): p.stat().st_size for p in found}

    return files


def in_bucket(s3: s3_server.S3Server) -> Callable[[str], Awaitable[dict[str, int]]]:
    """The keys under ``<folder>/`` as moto has them (asked directly, not through the
    proxy)."""

    async def files(folder: str) -> dict[str, int]:
        prefix = folder.strip("/") + "/"
        found: dict[str, int] = {}
        paginator = s3.client.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=BUCKET, Prefix=prefix):
            for item in page.get("Contents") or ():
                name = item["Key"].removeprefix(prefix)
                if name and not name.endswith("/"):
                    found[name] = item["Size"]
        return found

    return files


def in_container(azurite: Azurite) -> Callable[[str], Awaitable[dict[str, int]]]:
    """The blobs under ``<folder>/`` as Azurite has them (asked directly, not through
    the proxy; committed blobs only, which is what a reader can see)."""

    async def files(folder: str) -> dict[str, int]:
        prefix = folder.strip("/") + "/"
        async with azurite.client() as service:
            blobs = service.get_container_client(BUCKET).list_blobs(name_starts_with=prefix)
            found = {blob.name.removeprefix(prefix): blob.size async for blob in blobs}
        return {name: size for name, size in found.items() if name and not name.endswith("/")}

    return files


def proxied(port: int, *, ftp: bool = False) -> FaultProxy:
    return FaultProxy("127.0.0.1", port, ftp=ftp).start()


@contextlib.asynccontextmanager
async def every_backend(base: Path) -> AsyncIterator[list[Backend]]:
    """All seven remote back ends started under ``base``, each behind a proxy of its own."""
    async with contextlib.AsyncExitStack() as stack:
        found = [
            _sftp(base, stack),
            _smb(base, stack),
            _webdav(base, stack),
            _ftp(base, stack),
            await _s3(base, stack),
            _azure(base, stack),
            await _alist(base, stack),
        ]
        for backend in found:
            stack.callback(backend.proxy.close)
        yield found


def _sftp(base: Path, stack: contextlib.AsyncExitStack) -> Backend:
    (base / "sshd").mkdir()
    sshd = SshServer(base / "sshd").start()
    stack.callback(sshd.stop)
    served = sshd.folder / "served"
    served.mkdir()
    proxy = proxied(sshd.port)
    addition = {
        "address": proxy.address,
        "username": "root",
        "private_key": sshd.private_key,
        "root_folder_path": str(served),
        "host_key_fingerprint": sshd.host_fingerprint,
    }
    return Backend("sftp", "SFTP", proxy, addition, on_disk(served))


def _smb(base: Path, stack: contextlib.AsyncExitStack) -> Backend:
    (base / "smb").mkdir()
    samba = smb_server.start(base / "smb")
    stack.callback(samba.daemon.stop)
    proxy = proxied(samba.port)
    addition = {
        "address": proxy.address,
        "username": smb_server.USER,
        "password": smb_server.PASSWORD,
        "share_name": smb_server.SHARE,
        "root_folder_path": ".",
    }
    return Backend("smb", "SMB", proxy, addition, on_disk(samba.folder))


def _webdav(base: Path, stack: contextlib.AsyncExitStack) -> Backend:
    dav = webdav_server.wsgidav(base / "dav")
    dav.daemon.start()
    stack.callback(dav.daemon.stop)
    port = int(dav.url.rsplit(":", 1)[1])
    proxy = proxied(port)
    addition = {
        "address": f"http://{proxy.address}",
        "username": dav.username,
        "password": dav.password,
        "root_folder_path": "/",
    }
    return Backend("webdav", "WebDav", proxy, addition, on_disk(dav.root))


def _ftp(base: Path, stack: contextlib.AsyncExitStack) -> Backend:
    ftp = ftp_server.pyftpdlib_server(base / "ftp")
    stack.callback(ftp.stop)
    proxy = proxied(ftp.port, ftp=True)
    addition = {
        "address": proxy.address,
        "username": ftp.user,
        "password": ftp.password,
        "root_folder_path": "/",
        "encoding": "",
    }
    return Backend("ftp", "FTP", proxy, addition, on_disk(ftp.root))


async def _s3(base: Path, stack: contextlib.AsyncExitStack) -> Backend:
    s3 = s3_server.S3Server(base)
    await s3.start()
    stack.push_async_callback(s3.stop)
    await s3.bucket(BUCKET)
    proxy = proxied(s3.port)
    addition = s3.options(BUCKET).model_dump() | {"endpoint": f"http://{proxy.address}"}
    return Backend("bucket", "S3", proxy, addition, in_bucket(s3))


async def _alist(base: Path, stack: contextlib.AsyncExitStack) -> Backend:
    remote = await stack.enter_async_context(alist_v3_server.in_process(base / "alist"))
    port = int(remote.url.rsplit(":", 1)[1])
    proxy = proxied(port)
    addition = {
        "url": f"http://{proxy.address}",
        "username": alist_v3_server.USER,
        "password": alist_v3_server.USER_PASSWORD,
        "root_folder_path": alist_v3_server.MOUNT,
    }
    return Backend("alist", "AList V3", proxy, addition, on_disk(remote.files))


def _azure(base: Path, stack: contextlib.AsyncExitStack) -> Backend:
    azurite = start_azurite(base / "azurite")
    stack.callback(azurite.daemon.stop)
    proxy = proxied(azurite.port)
    endpoint = azurite.endpoint.replace(f"127.0.0.1:{azurite.port}", proxy.address)
    addition = azurite.options(BUCKET).model_dump() | {"endpoint": endpoint}
    files = in_container(azurite)
    return Backend(
        "azure", "Azure Blob Storage", proxy, addition, files, azurite.daemon, saves_within=6.0
    )
