"""What the storages page says when a storage cannot be saved as typed."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import ADMIN_PASSWORD, Flow, Site, log_in


async def add_local(page: Any, site: Site, mount_path: str, root: str) -> None:
    """Fill the Add form for a Local storage and press Add."""
    await page.goto(site.base + "/@manage/storages")
    await page.get_by_role("button", name="Add").first.click()
    await page.locator("#driver-trigger").click()
    await page.get_by_role("option", name="Local", exact=True).click()
    await page.locator("#mount_path").fill(mount_path)
    await page.locator("#root_folder_path").fill(root)
    await page.get_by_role("button", name="Add").last.click()


async def test_a_mount_path_the_server_answers_is_refused_by_name(
    page: Any, site: Site, flow: Flow
) -> None:
    flow.expect("/api/admin/storage/create", 400)
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await add_local(page, site, "/dav", str(site.files))
    shown = page.get_by_text("is answered by the server itself", exact=False)
    await shown.first.wait_for()
    text = await shown.first.inner_text()
    assert "/dav" in text and "/api" in text and "/s3" in text
    listed = site.api("/api/admin/storage/list")["data"]["content"]
    assert [s for s in listed if s["mount_path"] == "/dav"] == []
