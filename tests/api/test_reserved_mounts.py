"""Mount paths the server answers itself (its routes, WebDAV, the page's own addresses)
are refused when a storage is saved: the page could never open such a storage."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from manifold.app import reserved_prefixes
from tests.api.fs_helpers import (
    create_local,
    fs_list,
    mount_local,
    names,
    storage_by_mount,
    store,
)
from tests.conftest import Api

REFUSED = ["/s3", "/dav", "/dav/x", "dav/", "//dav/./x", "/d", "/p", "/api", "/@s",
           "/@manage/x", "/assets", "/dav.balance1", "/sd", "/ping"]  # fmt: skip
TREE: dict[str, bytes | str] = {"a.txt": "alpha", "sub/b.txt": "beta"}
# The router matches by case, so only the exact spelling is the server's.
ACCEPTED = ["/DAV", "/davx", "/data", "/docs/dav", "/s3x", "/x@s"]


@pytest.mark.parametrize("mount_path", REFUSED)
async def test_a_path_the_server_answers_is_refused(api: Api, root: Path, mount_path: str) -> None:
    body = await create_local(api, mount_path, root)
    assert body["code"] == 400, body
    for prefix in ("/s3", "/dav", "/d", "/p", "/api", "/@"):
        assert prefix in body["message"]
    listing = await api.get("/api/admin/storage/list", token=await api.login())
    assert listing["data"]["total"] == 0


@pytest.mark.parametrize("mount_path", ACCEPTED)
async def test_a_path_beside_them_is_accepted(api: Api, root: Path, mount_path: str) -> None:
    await mount_local(api, mount_path, root)
    assert set(names(await fs_list(api, mount_path, await api.login()))) == {"a.txt", "sub"}


async def test_an_edit_onto_a_reserved_path_is_refused(api: Api, root: Path) -> None:
    await mount_local(api, "/local", root)
    shown = await storage_by_mount(api, "/local")
    body = await api.post(
        "/api/admin/storage/update", {**shown, "mount_path": "/dav/local"}, token=await api.login()
    )
    assert body["code"] == 400, body
    assert (await storage_by_mount(api, "/local"))["status"] == "work"


async def test_every_route_s_first_segment_is_reserved(api: Api) -> None:
    for route in api.app.routes:
        first = "/" + str(getattr(route, "path", "/")).split("/")[1]
        assert first == "/" or first in reserved_prefixes(), first


async def test_an_older_storage_at_such_a_path_loads_with_a_warning(
    api: Api, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await store(api.services, "/dav", "Local", {"root_folder_path": str(root)})
    with caplog.at_level(logging.WARNING, logger="manifold.storages"):
        loaded = await api.post("/api/admin/storage/load_all", token=await api.login())
        assert loaded["code"] == 200
        await api.services.storages.started()
    assert (await storage_by_mount(api, "/dav"))["status"] == "work"
    assert set(names(await fs_list(api, "/dav", await api.login()))) == {"a.txt", "sub"}
    assert any("/dav" in r.getMessage() and "edit" in r.getMessage() for r in caplog.records)
