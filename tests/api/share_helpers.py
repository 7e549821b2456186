"""Helpers shared by the share link tests."""

from __future__ import annotations

from typing import Any

import httpx

from manifold.models import Perm
from tests.conftest import Api

PW = "share-user-password-1"
SHARER = int(Perm.SHARE)
INVALID = "the share has expired or is no longer valid"
MISSING = "the share does not exist"


async def create_share(api: Api, token: str, files: list[str], **fields: Any) -> dict[str, Any]:
    """POST ``/api/share/create``; the envelope, whatever its code."""
    return await api.post("/api/share/create", {"files": files, **fields}, token=token)


async def made_share(api: Api, token: str, files: list[str], **fields: Any) -> str:
    body = await create_share(api, token, files, **fields)
    assert body["code"] == 200, body
    share_id: str = body["data"]["id"]
    return share_id


async def visit_list(api: Api, path: str, password: str = "") -> dict[str, Any]:
    """``/api/fs/list`` of a share path, with no login."""
    return await api.post("/api/fs/list", {"path": path, "password": password}, token="")


async def visit_get(api: Api, path: str, password: str = "") -> dict[str, Any]:
    return await api.post("/api/fs/get", {"path": path, "password": password}, token="")


async def download(api: Api, url: str, **headers: str) -> httpx.Response:
    """GET a ``/sd`` URL (a full one from ``raw_url`` or a path), with no login."""
    return await api.client.get(url, headers=headers)


def listed(body: dict[str, Any]) -> list[str]:
    assert body["code"] == 200, body
    return sorted(o["name"] for o in body["data"]["content"])
