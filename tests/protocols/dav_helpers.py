"""A WebDAV client of the in-process app, and the users and mounts the tests share."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx

from manifold.container import Services
from manifold.models import Perm, Storage
from manifold.services.auth.users import UserInput

ALL = 0x3FFF
DAV_BITS = int(Perm.WEBDAV_READ | Perm.WEBDAV_MANAGE)
FILE_BITS = 0xF8  # write, rename, move, copy, remove: no hidden files, no password pass


def basic(name: str, password: str) -> dict[str, str]:
    pair = base64.b64encode(f"{name}:{password}".encode()).decode()
    return {"Authorization": f"Basic {pair}"}


async def mount(services: Services, mount_path: str, root: Path) -> None:
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, mount_path, "Local", addition=addition))


async def user(services: Services, name: str, permission: int = ALL, **fields: Any) -> None:
    await services.users.create(UserInput(name, f"{name}-pw", permission=permission, **fields))


class Dav:
    """Requests to ``/dav`` as one user (or nobody)."""

    def __init__(self, client: httpx.AsyncClient, name: str = "", password: str = "") -> None:
        self.client = client
        self.auth = basic(name, password or f"{name}-pw") if name else {}

    async def __call__(
        self, method: str, path: str, body: bytes | str = b"", **headers: str
    ) -> httpx.Response:
        sent = {**self.auth, **{k.replace("_", "-"): v for k, v in headers.items()}}
        content = body.encode() if isinstance(body, str) else body
        return await self.client.request(method, "/dav" + path, content=content, headers=sent)

    def as_(self, name: str, password: str = "") -> Dav:
        return Dav(self.client, name, password)
