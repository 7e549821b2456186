"""GET over /dav follows the storage's ``webdav_policy`` as AList's does: a redirect
to the driver's URL (``302_redirect``, an S3 bucket on moto), to the download proxy
(``use_proxy_url`` with a ``down_proxy_url``), or the bytes streamed by the server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

from manifold.container import Services
from manifold.models import Storage
from tests.drivers import s3_server
from tests.protocols.dav_helpers import Dav

PROXY = "https://proxy.example/dl"
NO_CACHE = "no-cache"


async def local(services: Services, root: Path, policy: str, proxy: str = "") -> None:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a b.txt").write_bytes(b"hello world")
    addition = json.dumps({"root_folder_path": str(root)})
    storage = Storage(
        0, "/pol", "Local", addition=addition, webdav_policy=policy, down_proxy_url=proxy
    )
    await services.storages.create(storage)


@pytest.fixture
async def s3(tmp_path: Path) -> AsyncIterator[s3_server.S3Server]:
    async for server in s3_server.started(tmp_path):
        yield server


@pytest.mark.parametrize(
    ("policy", "proxy"),
    [("native_proxy", ""), ("use_proxy_url", ""), ("302_redirect", ""), ("native_proxy", PROXY)],
)
async def test_the_server_streams_unless_a_policy_sends_the_client_away(
    dav: Dav, services: Services, tmp_path: Path, policy: str, proxy: str
) -> None:
    # 302_redirect on Local: its link is a file here, no URL to send anyone to.
    await local(services, tmp_path / "pol", policy, proxy)
    answer = await dav("GET", "/pol/docs/a%20b.txt", Range="bytes=6-")
    assert (answer.status_code, answer.content) == (206, b"world")


async def test_use_proxy_url_redirects_to_the_signed_proxy_url(
    dav: Dav, services: Services, tmp_path: Path
) -> None:
    await local(services, tmp_path / "pol", "use_proxy_url", PROXY + "\nignored line")
    answer = await dav("GET", "/pol/docs/a%20b.txt")
    assert answer.status_code == 302
    assert NO_CACHE in answer.headers["cache-control"]
    location = urlsplit(answer.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == (
        PROXY + quote("/pol/docs/a b.txt")
    )
    # The proxy fetches the file from /p with the sign it was given (``d``: the proxy
    # itself asks, so /p streams instead of sending it to itself).
    path = location.path.removeprefix("/dl")
    fetched = await dav.client.get(f"/p{path}?{location.query}&d")
    assert (fetched.status_code, fetched.content) == (200, b"hello world")
    head = await dav("HEAD", "/pol/docs/a%20b.txt")
    assert (head.status_code, head.headers["content-length"]) == (200, "11")


async def test_302_redirect_sends_the_client_to_the_drivers_url(
    dav: Dav, services: Services, s3: s3_server.S3Server
) -> None:
    await s3.bucket("pol")
    await s3.put("pol", "docs/a b.txt", b"hello world")
    addition: dict[str, Any] = s3.options("pol").model_dump()
    storage = Storage(
        0, "/bucket", "S3", addition=json.dumps(addition), webdav_policy="302_redirect"
    )
    await services.storages.create(storage)
    answer = await dav("GET", "/bucket/docs/a%20b.txt")
    assert answer.status_code == 302
    assert NO_CACHE in answer.headers["cache-control"]
    location = answer.headers["location"]
    assert location.startswith(s3.endpoint + "/")
    async with httpx.AsyncClient() as client:
        assert (await client.get(location)).content == b"hello world"
    # HEAD is answered here: a presigned URL is signed for GET alone.
    head = await dav("HEAD", "/bucket/docs/a%20b.txt")
    assert (head.status_code, head.headers["content-length"]) == (200, "11")
    assert (await dav("GET", "/bucket/docs")).status_code == 405
