"""A storage's redirect is followed only to the storage's own host: a WebDAV back end
answering ``302`` to an internal service on another port must not make ``/d``, ``/p``
or a read of the link fetch it and hand its body over; a redirect to the same host
still works, and so does none at all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from manifold.errors import ServerError
from manifold.models import LinkArgs
from manifold.services.fs.streams import open_range
from tests.conftest import Api
from tests.drivers.plain_dav_server import (
    NEAR_BYTES,
    SECRET,
    PlainDav,
    addition,
    plain_dav,
    secret_server,
)
from tests.fixtures.processes import running


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlainDav]:
    with running(secret_server(tmp_path_factory.mktemp("secret"))) as server:
        yield server


@pytest.fixture(scope="module")
def dav(tmp_path_factory: pytest.TempPathFactory, secret: PlainDav) -> Iterator[PlainDav]:
    folder = tmp_path_factory.mktemp("redirecting-dav")
    with running(plain_dav(folder, 0, f"{secret.url}/secret")) as server:
        yield server


async def mount(api: Api, url: str) -> str:
    return await api.mount("WebDav", "/remote", addition(url))


async def fetch(api: Api, way: str, name: str) -> tuple[int, bytes]:
    path = f"/remote/{name}"
    sign = api.services.signer.sign(path)
    response = await api.client.get(f"/{way}{quote(path)}", params={"sign": sign})
    return response.status_code, response.content


@pytest.mark.parametrize("way", ["d", "p"])
async def test_a_redirect_to_another_host_is_not_followed(
    api: Api, dav: PlainDav, way: str
) -> None:
    await mount(api, dav.url)
    _, body = await fetch(api, way, "away.bin")
    assert SECRET not in body
    answer = json.loads(body)
    assert answer["code"] == 500
    assert "redirected the download to another host" in answer["message"]
    near = await fetch(api, way, "near.bin")
    assert near == (200, NEAR_BYTES), near


async def test_a_loopback_host_stays_refused_when_public_hosts_are_allowed(
    api: Api, dav: PlainDav
) -> None:
    admin = await mount(api, dav.url)
    saved = await api.post(
        "/api/admin/setting/save", [{"key": "link_redirect_public", "value": "true"}], token=admin
    )
    assert saved["code"] == 200, saved
    _, body = await fetch(api, "p", "away.bin")
    assert SECRET not in body
    assert "another host" in json.loads(body)["message"]
    _, link, _ = await api.services.tree.link("/remote/away.bin", LinkArgs())
    client = api.services.tree.pool_for(link)
    with pytest.raises(ServerError, match="another host"):
        [data async for data in open_range(link, client=client)]
    assert await fetch(api, "p", "near.bin") == (200, NEAR_BYTES)
