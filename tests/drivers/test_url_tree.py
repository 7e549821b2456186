"""UrlTree over files nginx serves: the read-only conformance checks, AList's text format
(and the mistakes refused with their line), sizes asked with HEAD through the server's
link pool and its redirect rule, and /d and /p through the API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from manifold.container import Services
from manifold.drivers.base import LinkArgs
from manifold.drivers.url_tree.driver import UrlTreeDriver
from manifold.drivers.url_tree.meta import Addition
from manifold.errors import InvalidRequest, NotAFolder, ObjectNotFound
from manifold.models import Storage
from manifold.testing.conformance import DriverConformance, DriverFactory, read_obj
from tests.conftest import Api
from tests.drivers.nginx_server import nginx

FILES = {"a.txt": b"alpha " * 100, "b c.bin": bytes(range(256)) * 50, "d/e.txt": b"echo"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("url-tree-files")
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    with nginx(root, tmp_path_factory.mktemp("url-tree-nginx")) as url:
        yield url


async def url_tree(text: str, services: Services | None = None, **options: Any) -> UrlTreeDriver:
    driver = UrlTreeDriver(
        Storage(9995, "/urls", "UrlTree"), Addition(url_structure=text, **options)
    )
    if services is not None:
        driver.resources = services.storages.resources
    await driver.init()
    return driver


def structure(site: str) -> str:
    return (
        f"{site}/a.txt\n"
        f"folder:\n"
        f"  bytes.bin:12800:1700000000:{site}/b%20c.bin\n"
        f"  inner:\n"
        f"    {site}/d/e.txt\n"
        f"top.txt:{site}/d/e.txt\n"
    )


class TestUrlTreeConformance(DriverConformance):
    @pytest.fixture
    async def driver_factory(self, site: str) -> DriverFactory:
        async def build() -> UrlTreeDriver:
            return await url_tree(structure(site), head_size=True)

        return build


async def test_the_text_becomes_a_tree(site: str) -> None:
    tree = await url_tree(structure(site))
    root = {o.name: o for o in await tree.list(await tree.root_obj())}
    assert sorted(root) == ["a.txt", "folder", "top.txt"]
    assert (root["a.txt"].size, root["folder"].is_dir, root["folder"].size) == (0, True, 12800)
    inside = {o.name: o for o in await tree.list(root["folder"])}
    assert sorted(inside) == ["bytes.bin", "inner"]
    assert int(inside["bytes.bin"].modified.timestamp()) == 1700000000
    assert await read_obj(tree, inside["bytes.bin"]) == FILES["b c.bin"]
    named = await tree.get("/folder/inner/e.txt")  # named after its URL's last segment
    assert await read_obj(tree, named) == b"echo"
    link = await tree.link(named, LinkArgs())
    assert link.url == f"{site}/d/e.txt"
    with pytest.raises(ObjectNotFound):
        await tree.get("/folder/nothing")
    with pytest.raises(NotAFolder):
        await tree.list(root["a.txt"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("f:\n   http://h/x", "line 2: an indent of 3 spaces"),
        ("f:\n\thttp://h/x", "line 2: indent with spaces"),
        ("just a name", "line 1: a file needs an http"),
        ("x:big:http://h/x", "line 1: the size 'big' is not a whole number"),
        ("a b http://h/x", "line 1: what comes before the URL must end with a colon"),
        ("http://h/x\nx:http://h/y", "line 2: a second entry named 'x'"),
        ("..:http://h/x", "line 1:"),
    ],
)
async def test_mistakes_are_refused_with_their_line(text: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        await url_tree(text)


async def test_head_size_follows_the_servers_redirect_rule(services: Services, site: str) -> None:
    text = (
        f"given:7:{site}/a.txt\n"
        f"asked:{site}/a.txt\n"
        f"moved:{site}/moved/a.txt\n"
        f"elsewhere:{site}/other-host/a.txt\n"
        f"missing:{site}/nothing.txt\n"
    )
    tree = await url_tree(text, services, head_size=True)
    sizes = {o.name: o.size for o in await tree.list(await tree.root_obj())}
    size = len(FILES["a.txt"])
    # A redirect to another host is followed only to a public one (127.0.0.2 is not).
    assert sizes == {"given": 7, "asked": size, "moved": size, "elsewhere": 0, "missing": 0}


async def test_downloads_through_the_api(api: Api, site: str) -> None:
    await api.as_admin()
    addition = json.dumps({"url_structure": structure(site)})
    body = {"mount_path": "/urls", "driver": "UrlTree", "addition": addition}
    created = await api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created
    found = await api.post("/api/fs/get", {"path": "/urls/top.txt"})
    url = found["data"]["raw_url"].split("manifold.test")[1]
    redirected = await api.client.get(url)
    assert (redirected.status_code, redirected.headers["location"]) == (302, f"{site}/d/e.txt")
    proxied = await api.client.get(url.replace("/d/", "/p/", 1), headers={"Range": "bytes=1-2"})
    assert (proxied.status_code, proxied.content) == (206, b"ch")
    bad = {**body, "mount_path": "/bad", "addition": json.dumps({"url_structure": "x"})}
    refused = await api.post("/api/admin/storage/create", bad)
    assert "url_structure line 1" in refused["message"]
