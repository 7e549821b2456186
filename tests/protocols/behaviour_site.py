"""The live server of the behaviour table: one Local storage at ``/local``, its users, the
S3 buckets, FTPS, and a fresh small tree on disk for every case.

Each case gets a folder of its own: ``cases/<case>`` for the users whose root is ``/``,
``home/<case>`` for ``based`` (root ``/local/home``), whose folder also holds a link
``out`` to ``other/<case>``, outside that root. S3 acts on the bucket ``tree``
(``/local``), and in ``based``'s rows on ``home`` (``/local/home``), which the link
leaves the same way.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from manifold.container import Services
from manifold.models import Perm, Storage
from manifold.services.auth.users import UserInput
from tests.api.fs_helpers import make_tree
from tests.conftest import start_services
from tests.fixtures.certs import self_signed
from tests.protocols.ftp_helpers import trusting
from tests.protocols.perm_clients import S3_KEY_ID, S3_SECRET, Ports, listening

PROTOCOL_BITS = Perm.WEBDAV_READ | Perm.WEBDAV_MANAGE | Perm.FTP_READ | Perm.FTP_MANAGE
KEEPING_BITS = Perm.WRITE | Perm.RENAME | Perm.MOVE | Perm.COPY  # every file bit but remove
USERS: dict[str, tuple[int, str]] = {  # name: (permission, base path)
    "plain": (int(PROTOCOL_BITS | KEEPING_BITS | Perm.REMOVE), "/"),
    "keeper": (int(PROTOCOL_BITS | KEEPING_BITS), "/"),  # no remove bit
    "based": (int(PROTOCOL_BITS | KEEPING_BITS | Perm.REMOVE), "/local/home"),
}
BUCKETS = [{"name": "tree", "path": "/local"}, {"name": "home", "path": "/local/home"}]
CASE_TREE: dict[str, bytes | str] = {
    "f.txt": "file f",
    "other.txt": "other file",
    "zero.txt": "",
    "empty/": "",
    "sub/f.txt": "sub's f",
    "sub/sub": "a file named as its folder",
    "sub/deeper/h.txt": "file h",
    "zeros/f.txt": "",
    "box/f.txt/": "",  # an empty folder named as the file f.txt
    "crate/f.txt/in.txt": "in a folder named f.txt",
}
OUTSIDE_TREE: dict[str, bytes | str] = {"secret.txt": "outside the root"}

# A path relative to the disk -> a file's bytes, None for a folder, "-> target" for a link.
Snapshot = dict[str, bytes | str | None]


@dataclass
class Site:
    services: Services
    ports: Ports
    disk: Path
    tls: ssl.SSLContext  # trusts the FTPS server's certificate

    def lay_out(self, name: str, who: str) -> str:
        """A fresh case folder (its path relative to the disk)."""
        folder = f"home/{name}" if who == "based" else f"cases/{name}"
        make_tree(self.disk / folder, CASE_TREE)
        if who == "based":
            make_tree(self.disk / "other" / name, OUTSIDE_TREE)
            (self.disk / folder / "out").symlink_to(f"../../other/{name}")
        return folder

    def snapshot(self) -> Snapshot:
        found: Snapshot = {}
        for here, folders, files in os.walk(self.disk):
            for name in folders + files:
                path = Path(here) / name
                rel = str(path.relative_to(self.disk))
                if path.is_symlink():
                    found[rel] = "-> " + os.readlink(path)
                else:
                    found[rel] = None if path.is_dir() else path.read_bytes()
        return found


def where(protocol: str, who: str, folder: str, rel: str) -> str:
    """What a client of ``protocol`` calls ``rel`` of the case folder ``folder``: a path
    from the user's root, or for S3 a key of the bucket (``tree`` at ``/local``, or
    ``home`` at ``/local/home`` for ``based``)."""
    inside = f"{folder.removeprefix('home/') if who == 'based' else folder}/{rel}".rstrip("/")
    if protocol == "s3":
        return inside
    return f"/{inside}" if who == "based" else f"/local/{inside}"


def bucket_of(who: str) -> str:
    return "home" if who == "based" else "tree"


@asynccontextmanager
async def live_site(folder: Path) -> AsyncIterator[Site]:
    services = await start_services(folder / "data")
    disk = folder / "disk"
    for part in ("cases", "home", "other"):
        (disk / part).mkdir(parents=True)
    try:
        cert, key = self_signed(folder)
        await _fill(services, disk, cert, key)
        async with listening(services) as ports:
            yield Site(services, ports, disk, trusting(cert))
    finally:
        await services.stop()


async def _fill(services: Services, disk: Path, cert: Path, key: Path) -> None:
    # No listing cache: every case's tree is written on disk while the server runs.
    addition = json.dumps({"root_folder_path": str(disk)})
    await services.storages.create(
        Storage(0, "/local", "Local", cache_expiration=0, addition=addition)
    )
    for name, (permission, base) in USERS.items():
        await services.users.create(UserInput(name, f"{name}-pw", base, permission=permission))
    await services.settings.save(
        [
            ("s3_buckets", json.dumps(BUCKETS)),
            ("s3_access_key_id", S3_KEY_ID),
            ("s3_secret_access_key", S3_SECRET),
            ("ftp_tls_public_cert_path", str(cert)),
            ("ftp_tls_private_key_path", str(key)),
        ]
    )
