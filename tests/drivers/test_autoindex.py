"""AutoIndex over a real nginx with ``autoindex on``: the read-only conformance checks,
names, sizes and times as the page shows them (long and awkward names included), rough
sizes made exact on lookup, an Apache page, and reads with ranges through the API."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from manifold.drivers.autoindex.driver import AutoIndexDriver
from manifold.drivers.autoindex.meta import Addition
from manifold.errors import InvalidRequest, ObjectNotFound
from manifold.models import Storage
from manifold.testing.conformance import DriverConformance, DriverFactory, read_obj
from tests.conftest import Api
from tests.drivers.nginx_server import nginx

WHEN = datetime(2024, 3, 5, 7, 9, tzinfo=UTC)
LONG = "a long name that nginx shortens in the text of its link " * 2 + ".txt"
FILES = {
    "plain.txt": b"plain bytes",
    "with space & sign+.bin": bytes(range(256)) * 40,
    "ünïcode 文件.txt": "ünï".encode(),
    LONG: b"long",
    "empty": b"",
    "big.bin": b"b" * 20000,
    "sub/inner.txt": b"inner",
}
APACHE_PAGE = """<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN">
<html><head><title>Index of /apache</title></head><body><h1>Index of /apache</h1>
<table>
<tr><th valign="top"><img src="/icons/blank.gif" alt="[ICO]"></th>
<th><a href="?C=N;O=D">Name</a></th><th><a href="?C=M;O=A">Last modified</a></th>
<th><a href="?C=S;O=A">Size</a></th><th><a href="?C=D;O=A">Description</a></th></tr>
<tr><th colspan="5"><hr></th></tr>
<tr><td valign="top"><img src="/icons/back.gif" alt="[PARENTDIR]"></td>
<td><a href="/">Parent Directory</a></td><td>&nbsp;</td><td align="right">  - </td></tr>
<tr><td valign="top"><a href="docs/"><img src="/icons/folder.gif" alt="[DIR]"></a></td>
<td><a href="docs/">docs/</a></td><td align="right">2023-11-02 18:04  </td>
<td align="right">  - </td><td>&nbsp;</td></tr>
<tr><td valign="top"><a href="file%201.txt"><img src="/icons/text.gif" alt="[TXT]"></a></td>
<td><a href="file%201.txt">file 1.txt</a></td><td align="right">2023-11-02 18:05  </td>
<td align="right"> 12 </td><td>&nbsp;</td></tr>
<tr><td valign="top"><img src="/icons/unknown.gif" alt="[   ]"></td>
<td><a href="rough.bin">rough.bin</a></td><td align="right">2021-01-31 23:59  </td>
<td align="right">2.0K</td><td>&nbsp;</td></tr>
<tr><th colspan="5"><hr></th></tr>
</table></body></html>
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("autoindex-files")
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
        os.utime(root / name, (WHEN.timestamp(), WHEN.timestamp()))
    apache = root / "apache"
    (apache / "docs").mkdir(parents=True)
    (apache / "index.html").write_text(APACHE_PAGE)
    (apache / "file 1.txt").write_bytes(b"apache bytes")
    (apache / "rough.bin").write_bytes(b"r" * 2100)
    return root


@pytest.fixture(scope="module")
def site(files: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with nginx(files, tmp_path_factory.mktemp("autoindex-nginx")) as url:
        yield url


@pytest.fixture(scope="module")
def rough_site(files: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same files, nginx showing sizes rounded to units."""
    base = tmp_path_factory.mktemp("autoindex-rough")
    with nginx(files, base, "autoindex_exact_size off;") as url:
        yield url


async def autoindex(url: str, **options: Any) -> AutoIndexDriver:
    driver = AutoIndexDriver(Storage(9994, "/index", "AutoIndex"), Addition(url=url, **options))
    await driver.init()
    return driver


class TestAutoIndexConformance(DriverConformance):
    @pytest.fixture
    async def driver_factory(self, site: str) -> DriverFactory:
        async def build() -> AutoIndexDriver:
            return await autoindex(site)

        return build


async def test_names_sizes_and_times_as_the_page_shows_them(site: str) -> None:
    driver = await autoindex(site + "/")
    try:
        listed = {o.name: o for o in await driver.list(await driver.root_obj())}
        expected = {n: len(d) for n, d in FILES.items() if "/" not in n}
        assert {n: o.size for n, o in listed.items() if not o.is_dir} == expected
        assert sorted(n for n, o in listed.items() if o.is_dir) == ["apache", "sub"]
        assert {o.modified for n, o in listed.items() if n in expected} == {WHEN}
        awkward = listed["with space & sign+.bin"]
        assert await read_obj(driver, awkward, 300, 20) == FILES["with space & sign+.bin"][300:320]
        assert await read_obj(driver, listed[LONG]) == b"long"
        inner = await driver.get("/sub/inner.txt")
        assert (inner.size, await read_obj(driver, inner)) == (5, b"inner")
        with pytest.raises(ObjectNotFound):
            await driver.get("/sub/nothing.txt")
    finally:
        await driver.drop()


async def test_rough_sizes_are_made_exact_on_lookup(rough_site: str) -> None:
    driver = await autoindex(rough_site)
    try:
        listed = {o.name: o.size for o in await driver.list(await driver.root_obj())}
        assert listed["big.bin"] != 20000  # nginx shows "20K"
        assert abs(listed["big.bin"] - 20000) < 1024
        assert (await driver.get("/big.bin")).size == 20000
    finally:
        await driver.drop()


async def test_an_apache_page_is_read_too(site: str) -> None:
    driver = await autoindex(site + "/apache")
    try:
        listed = {o.name: o for o in await driver.list(await driver.root_obj())}
        assert sorted(listed) == ["docs", "file 1.txt", "rough.bin"]
        assert listed["docs"].is_dir
        assert (listed["file 1.txt"].size, listed["rough.bin"].size) == (12, 2048)
        assert listed["file 1.txt"].modified == datetime(2023, 11, 2, 18, 5, tzinfo=UTC)
        assert await read_obj(driver, listed["file 1.txt"]) == b"apache bytes"
        assert (await driver.get("/rough.bin")).size == 2100
    finally:
        await driver.drop()


async def test_ignored_names_are_left_out(site: str) -> None:
    driver = await autoindex(site, ignore_file_names="empty\nsub")
    try:
        names = {o.name for o in await driver.list(await driver.root_obj())}
        assert "empty" not in names and "sub" not in names and "plain.txt" in names
    finally:
        await driver.drop()


async def test_bad_addresses_are_refused(site: str) -> None:
    with pytest.raises(InvalidRequest, match="http:// or https://"):
        await autoindex("ftp://example.org/")
    with pytest.raises(ObjectNotFound):
        await autoindex(site + "/no-such-folder")


async def test_through_the_api(api: Api, site: str) -> None:
    await api.as_admin()
    body = {"mount_path": "/index", "driver": "AutoIndex", "addition": json.dumps({"url": site})}
    created = await api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created
    listing = await api.post("/api/fs/list", {"path": "/index/sub"})
    assert [o["name"] for o in listing["data"]["content"]] == ["inner.txt"]
    found = await api.post("/api/fs/get", {"path": "/index/big.bin"})
    url = found["data"]["raw_url"].split("manifold.test")[1]
    redirected = await api.client.get(url)
    assert (redirected.status_code, redirected.headers["location"]) == (302, f"{site}/big.bin")
    text = await api.post("/api/fs/get", {"path": "/index/plain.txt"})
    url = text["data"]["raw_url"].split("manifold.test")[1].replace("/d/", "/p/", 1)
    proxied = await api.client.get(url, headers={"Range": "bytes=6-10"})
    assert (proxied.status_code, proxied.content) == (206, b"bytes")
