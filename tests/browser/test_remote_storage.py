"""A remote storage added through the storages page: its form is drawn from the driver's
options, and the bucket it mounts is browsed like any folder."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ADMIN_PASSWORD, Site, log_in
from tests.drivers.s3_server import ACCESS_KEY, SECRET_KEY, S3Server, started
from tests.drivers.webdav_server import DavServer, wsgidav
from tests.fixtures.processes import running

BUCKET = "through-the-page"


@pytest.fixture(scope="module")
async def s3(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[S3Server]:
    logs: Path = tmp_path_factory.mktemp("s3-page")
    async for server in started(logs):
        await server.bucket(BUCKET)
        await server.put(BUCKET, "reports/q3.txt", b"third quarter")
        yield server


async def test_add_an_s3_storage_through_the_page_and_browse_it(
    page: Any, site: Site, s3: S3Server
) -> None:
    mount = f"/bucket-{secrets.token_hex(3)}"
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + "/@manage/storages")
    await page.get_by_role("button", name="Add").first.click()
    await page.locator("#driver-trigger").click()
    await page.get_by_role("option", name="S3", exact=True).click()
    await page.locator("#mount_path").fill(mount)
    await page.locator("#bucket").fill(BUCKET)
    await page.locator("#endpoint").fill(s3.endpoint)
    await page.locator("#access_key_id").fill(ACCESS_KEY)
    await page.locator("#secret_access_key").fill(SECRET_KEY)
    await page.locator("label.hope-switch[for=force_path_style]").click()  # the switch
    await page.get_by_role("button", name="Add").last.click()
    await page.wait_for_url(lambda url: url.rstrip("/").endswith("/@manage/storages"))
    listed = site.api("/api/admin/storage/list")["data"]["content"]
    (made,) = [s for s in listed if s["mount_path"] == mount]
    assert (made["driver"], made["status"]) == ("S3", "work")
    await page.goto(site.base + mount)
    await page.get_by_text("reports", exact=True).click()
    await page.get_by_text("q3.txt", exact=True).wait_for()


@pytest.fixture(scope="module")
def dav(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DavServer]:
    with running(wsgidav(tmp_path_factory.mktemp("dav-page"), "basic")) as server:
        yield server


async def test_download_from_a_webdav_storage_saves_the_file(
    page: Any, site: Site, dav: DavServer, tmp_path: Path
) -> None:
    # Streamed through the server (``/d``), so the answer must say "attachment" itself:
    # without it Chromium shows a text file in a tab instead of saving it.
    folder = f"page-{secrets.token_hex(3)}"
    (dav.root / folder).mkdir()
    (dav.root / folder / "minutes.txt").write_text("kept on the WebDAV server\n")
    fields = {"address": dav.url, "username": dav.username, "password": dav.password,
              "root_folder_path": f"/{folder}"}  # fmt: skip
    mount = f"/{folder}"
    body = {"mount_path": mount, "driver": "WebDav", "addition": json.dumps(fields)}
    site.api("/api/admin/storage/create", body)
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + mount)
    await page.locator('p.name[title="minutes.txt"]').click(button="right")
    async with page.expect_download() as waiting:
        await page.get_by_text("Download", exact=True).click()
    got = await waiting.value
    assert got.suggested_filename == "minutes.txt"
    saved = tmp_path / "saved.txt"
    await got.save_as(saved)
    assert saved.read_text() == "kept on the WebDAV server\n"
