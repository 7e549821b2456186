"""The cloud and overlay drivers added through the storages page, as a user does: a Crypt
over a Local storage (and an Rclone remote), then a file uploaded, previewed and
downloaded through each. What lands on the storage below is encrypted."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from tests.browser.conftest import ADMIN_PASSWORD, Site, log_in

HEADER = b"RCLONE\x00\x00"
WORDS = "words only the vault's users read\n" * 40


def entry(page: Any, name: str) -> Any:
    return page.locator(f'p.name[title="{name}"]')


async def add_storage(page: Any, site: Site, driver: str, fields: dict[str, str]) -> str:
    """Add a storage of ``driver`` through the page's form; its mount path."""
    mount = f"/{driver.lower()}-{secrets.token_hex(3)}"
    await page.goto(site.base + "/@manage/storages")
    await page.get_by_role("button", name="Add").first.click()
    await page.locator("#driver-trigger").click()
    await page.get_by_role("option", name=driver, exact=True).click()
    await page.locator("#mount_path").fill(mount)
    for field, value in fields.items():
        await page.locator(f"#{field}").fill(value)
    await page.get_by_role("button", name="Add").last.click()
    await page.wait_for_url(lambda url: url.rstrip("/").endswith("/@manage/storages"))
    listed = site.api("/api/admin/storage/list")["data"]["content"]
    (made,) = [s for s in listed if s["mount_path"] == mount]
    assert (made["driver"], made["status"]) == (driver, "work"), made
    return mount


async def upload_preview_download(page: Any, site: Site, mount: str, tmp_path: Path) -> None:
    """Upload ``notes.txt`` into ``mount`` through the upload dialog, preview it, download it."""
    picked = tmp_path / "notes.txt"
    picked.write_text(WORDS)
    await page.goto(site.base + mount)
    toggle = page.locator("svg.toolbar-toggle")
    if not await page.locator("svg[tips=upload]").is_visible():
        await toggle.click()
    await page.locator("svg[tips=upload]").click()
    await page.locator("input[type=file]:not([webkitdirectory])").set_input_files(str(picked))
    await page.get_by_text("Success", exact=True).first.wait_for()
    await page.goto(site.base + mount)
    await entry(page, "notes.txt").click()
    await page.get_by_text("words only the vault's users read").first.wait_for()
    await page.goto(site.base + mount)
    await entry(page, "notes.txt").click(button="right")
    async with page.expect_download() as waiting:
        await page.get_by_text("Download", exact=True).click()
    saved = tmp_path / "downloaded.txt"
    await (await waiting.value).save_as(saved)
    assert saved.read_text() == WORDS


async def test_a_crypt_over_a_local_storage_through_the_page(
    page: Any, site: Site, tmp_path: Path
) -> None:
    below = site.mount(f"vault-{secrets.token_hex(3)}")
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    fields = {"remote_path": "/" + below.name, "password": "a vault password"}
    mount = await add_storage(page, site, "Crypt", fields)
    await upload_preview_download(page, site, mount, tmp_path)
    (stored,) = below.iterdir()
    assert stored.name != "notes.txt"  # the default keeps names, with a suffix
    assert stored.read_bytes().startswith(HEADER)
    assert b"vault's users" not in stored.read_bytes()


async def test_an_rclone_remote_through_the_page(page: Any, site: Site, tmp_path: Path) -> None:
    # A remote of rclone's ``local`` backend over a folder of its own: the same steps a
    # user takes with a OneDrive section, without the cloud.
    folder = site.files / f"rclone-{secrets.token_hex(3)}"
    folder.mkdir()
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    config = "[disk]\ntype = local\n"
    mount = await add_storage(
        page, site, "Rclone", {"config": config, "root_folder_path": str(folder)}
    )
    await upload_preview_download(page, site, mount, tmp_path)
    assert (folder / "notes.txt").read_text() == WORDS
