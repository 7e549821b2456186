"""The rclone remotes the Rclone driver is tested on, each on a real server that runs
here: ``local`` (a folder), ``sftp`` (the SFTP tests' sshd), ``s3`` (moto), ``webdav``
(wsgidav) and ``crypt`` over ``local``.

A remote is a ``Remote``: the ``config`` section a user would paste, and the
``root_folder_path`` below it. Adding a backend is adding a function here and its
name to ``REMOTES`` (Azure Blob on Azurite: ``azureblob`` with ``account``, ``key``
and ``endpoint`` set to the emulator's, the root a container).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manifold.drivers.base import Driver, Resources
from manifold.drivers.rclone.driver import RcloneDriver
from manifold.drivers.rclone.meta import CONFIG, Addition
from manifold.models import Storage
from manifold.vfs.layers import wrap
from tests.drivers.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.drivers.sftp_server import SshServer
from tests.drivers.webdav_server import DavServer

# The remotes the conformance suite runs on, by name.
REMOTES = ["local", "sftp", "s3", "webdav", "crypt"]
# The crypt remote's passwords, given plain (rclone obscures them itself).
CRYPT_PASSWORD = "crypt-Pa55-do-not-show"
CRYPT_SALT = "crypt-salt-do-not-show"


@dataclass(frozen=True, slots=True)
class Remote:
    """A remote as a storage's options give it."""

    name: str
    config: str
    root: str

    def options(self, **changes: Any) -> Addition:
        fields: dict[str, Any] = {"config": self.config, "root_folder_path": self.root}
        return Addition(**(fields | changes))


def section(kind: str, **values: str) -> str:
    """A section as ``rclone config show`` prints it, with a [name] line."""
    lines = [f"[{kind}-remote]", f"type = {kind}"]
    return "\n".join(lines + [f"{key} = {value}" for key, value in values.items()]) + "\n"


def local(folder: Path) -> Remote:
    folder.mkdir(parents=True, exist_ok=True)
    return Remote("local", section("local"), str(folder))


def sftp(server: SshServer, folder: Path) -> Remote:
    folder.mkdir(parents=True, exist_ok=True)
    host, port = server.address.split(":")
    config = section("sftp", host=host, port=port, user="root", key_file=str(server.client_key))
    return Remote("sftp", config, str(folder))


def s3(server: S3Server, bucket: str) -> Remote:
    config = section(
        "s3",
        provider="Other",
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        endpoint=server.endpoint,
        region=REGION,
        force_path_style="true",
        # Folders are kept as marker objects, so an empty folder exists.
        directory_markers="true",
        # The bucket is there: rclone would otherwise try to make it on each write.
        no_check_bucket="true",
    )
    return Remote("s3", config, bucket)


def webdav(server: DavServer) -> Remote:
    config = section(
        "webdav", url=server.url, vendor="other", user=server.username, **{"pass": server.password}
    )
    root = f"rclone-{secrets.token_hex(4)}"
    (server.root / root).mkdir()
    return Remote("webdav", config, root)


def crypt(folder: Path) -> Remote:
    folder.mkdir(parents=True, exist_ok=True)
    config = section("crypt", remote=str(folder), password=CRYPT_PASSWORD, password2=CRYPT_SALT)
    return Remote("crypt", config, "")


async def rclone_driver(
    remote: Remote, resources: Resources, storage_id: int = 1, **changes: Any
) -> RcloneDriver:
    """An initialised driver on ``remote``, sharing ``resources`` (one rclone)."""
    storage = Storage(id=storage_id, mount_path="/rclone", driver="Rclone")
    driver = RcloneDriver(storage, remote.options(**changes))
    driver.resources = resources
    await driver.init()
    return driver


async def mounted(remote: Remote, resources: Resources, **changes: Any) -> Driver[Any]:
    """The driver wrapped in its layers, as the server mounts it."""
    return wrap(await rclone_driver(remote, resources, **changes), CONFIG)
