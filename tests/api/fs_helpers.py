"""Helpers shared by the file-tree, storage, download and path-escape tests."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from manifold.container import Services
from manifold.db.repos import StorageRepo
from manifold.models import Storage
from tests.conftest import Api

CREATE = "/api/admin/storage/create"
NOT_FOUND_SUFFIX = "object not found"
PASSWORD_DENIED = "password is incorrect or you have no permission"
RELATIVE = "access using relative path is not allowed"


def local_body(mount_path: str, root: Path | str, **fields: Any) -> dict[str, Any]:
    addition = fields.pop("addition", None)
    if addition is None:
        addition = json.dumps({"root_folder_path": str(root)})
    return {"mount_path": mount_path, "driver": "Local", "addition": addition, **fields}


async def store(services: Services, mount_path: str, driver: str, addition: object) -> None:
    """Save a storage in the database only: it starts at the next start or ``load_all``."""
    storage = Storage(0, mount_path, driver, addition=json.dumps(addition))
    await StorageRepo(services.engine).create(storage)


async def create_local(
    api: Api, mount_path: str, root: Path | str, **fields: Any
) -> dict[str, Any]:
    """POST a Local storage as admin and return the envelope, whatever its code."""
    admin = await api.login()
    return await api.post(CREATE, local_body(mount_path, root, **fields), token=admin)


async def mount_local(api: Api, mount_path: str, root: Path | str, **fields: Any) -> int:
    """Create a working Local storage serving ``root`` at ``mount_path``; its id."""
    body = await create_local(api, mount_path, root, **fields)
    assert body["code"] == 200, body
    return int(body["data"]["id"])


async def storage_by_mount(api: Api, mount_path: str) -> dict[str, Any]:
    admin = await api.login()
    body = await api.get("/api/admin/storage/list", token=admin)
    assert body["code"] == 200, body
    return next(s for s in body["data"]["content"] if s["mount_path"] == mount_path)


async def add_meta(api: Api, path: str, **fields: Any) -> None:
    admin = await api.login()
    body = await api.post("/api/admin/meta/create", {"path": path, **fields}, token=admin)
    assert body["code"] == 200, body


async def save_settings(api: Api, **values: str) -> None:
    admin = await api.login()
    items = [{"key": k, "value": v} for k, v in values.items()]
    body = await api.post("/api/admin/setting/save", items, token=admin)
    assert body["code"] == 200, body


async def fs_list(api: Api, path: str, token: str | None = None, **fields: Any) -> dict[str, Any]:
    return await api.post("/api/fs/list", {"path": path, **fields}, token=token)


async def fs_get(api: Api, path: str, token: str | None = None, **fields: Any) -> dict[str, Any]:
    return await api.post("/api/fs/get", {"path": path, **fields}, token=token)


def names(body: dict[str, Any]) -> list[str]:
    assert body["code"] == 200, body
    return [o["name"] for o in body["data"]["content"] or []]


def make_tree(root: Path, files: dict[str, bytes | str]) -> Path:
    """Write ``files`` (relative path → content) below ``root``; a trailing / makes a folder."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        target = root / rel
        if rel.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        target.write_bytes(data)
    settle(root)
    return root


def settle(root: Path) -> None:
    """Date ``root``'s folders a minute back, as folders that were not just written are.

    A folder modified within the last second is rescanned on every listing (it could
    change again unseen within one time stamp); tests that count scans need old ones.
    """
    past = time.time() - 60
    for folder in [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]:
        os.utime(folder, (past, past))
