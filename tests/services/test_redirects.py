"""Where a protocol server sends a client for a file's bytes (``GuardedOps.redirect``).

The storage's ``webdav_policy`` decides, by the rules ``/d`` and ``/p`` follow:
``302_redirect`` → the driver's URL, ``use_proxy_url`` with a ``down_proxy_url`` →
that proxy with a sign, anything else → None (the server streams the bytes).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import BaseModel

from manifold.container import Services
from manifold.drivers.base import DriverConfig, LinkArgs
from manifold.errors import NotAFile, PermissionDenied
from manifold.models import Link, Obj, Perm, Storage
from tests.api.fs_helpers import make_tree
from tests.drivers.inert import InertDriver
from tests.services.test_file_ops import ALL_FILE_BITS, caller

URL = "https://files.example/data.bin?token=t"
PROXY = "https://proxy.example"


class NoOptions(BaseModel):
    pass


class UrlDriver(InertDriver[NoOptions]):
    """Test-only: one file linked by a URL (never fetched here) and one folder."""

    async def list(self, dir: Obj) -> list[Obj]:
        when = datetime(2024, 5, 1, tzinfo=UTC)
        return [Obj("data.bin", 3, False, when, path="/data.bin"),
                Obj("folder", 0, True, when, path="/folder")]  # fmt: skip

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link(url=URL)


async def mount(services: Services, policy: str, proxy: str = "") -> None:
    services.registry.register("UrlTest", UrlDriver, NoOptions, DriverConfig(name="UrlTest"))
    storage = Storage(0, "/u", "UrlTest", addition="{}", webdav_policy=policy)
    storage.down_proxy_url = proxy
    await services.storages.create(storage)


def signed(services: Services, path: str) -> str:
    return f"{PROXY}{path}?sign={services.signer.sign(path)}"


async def test_302_redirect_sends_the_client_to_the_drivers_url(services: Services) -> None:
    await mount(services, "302_redirect", PROXY)
    assert await services.ops.redirect(caller(), "/u/data.bin") == URL
    with pytest.raises(NotAFile):
        await services.ops.redirect(caller(), "/u/folder")


async def test_use_proxy_url_sends_the_client_to_the_download_proxy(
    services: Services,
) -> None:
    await mount(services, "use_proxy_url", PROXY + "\nhttps://second.example")
    assert await services.ops.redirect(caller(), "/u/data.bin") == signed(services, "/u/data.bin")


@pytest.mark.parametrize(("policy", "proxy"), [("use_proxy_url", ""), ("native_proxy", PROXY)])
async def test_other_policies_stream_through_the_server(
    services: Services, policy: str, proxy: str
) -> None:
    await mount(services, policy, proxy)
    assert await services.ops.redirect(caller(), "/u/data.bin") is None


@pytest.fixture
async def local(services: Services, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "a", {"f.txt": "hello"})
    addition = json.dumps({"root_folder_path": str(root)})
    storage = Storage(0, "/a", "Local", addition=addition, webdav_policy="302_redirect")
    await services.storages.create(storage)


async def test_a_file_without_a_url_is_streamed(services: Services, local: None) -> None:
    assert await services.ops.redirect(caller(), "/a/f.txt") is None
    storage = services.tree.place("/a").mounted.storage
    storage.webdav_policy, storage.down_proxy_url = "use_proxy_url", PROXY
    assert await services.ops.redirect(caller(), "/a/f.txt") == signed(services, "/a/f.txt")


async def test_the_caller_must_be_allowed_to_read(services: Services, local: None) -> None:
    with pytest.raises(PermissionDenied):
        await services.ops.redirect(caller(protocol="webdav"), "/a/f.txt")
    reader = caller(ALL_FILE_BITS | Perm.WEBDAV_READ, protocol="webdav")
    assert await services.ops.redirect(reader, "/a/f.txt") is None
