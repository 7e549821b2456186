"""What the page says when a storage cannot be saved as typed, or cannot do what was
asked: the mount path, the server the admin typed, the setting to change."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from tests.browser.conftest import ADMIN_PASSWORD, Flow, Site, free_port, log_in


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


async def test_a_closed_port_is_named_in_the_form_s_error(
    page: Any, site: Site, flow: Flow
) -> None:
    flow.expect("/api/admin/storage/create", 500)
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    port = free_port()
    await page.goto(site.base + "/@manage/storages")
    await page.get_by_role("button", name="Add").first.click()
    await page.locator("#driver-trigger").click()
    await page.get_by_role("option", name="SFTP", exact=True).click()
    await page.locator("#mount_path").fill(f"/closed-{port}")
    await page.locator("#address").fill(f"127.0.0.1:{port}")
    await page.locator("#username").fill("someone")
    await page.locator("#password").fill("a-password-1")
    await page.locator("#root_folder_path").fill("/")
    await page.get_by_role("button", name="Add").last.click()
    shown = page.get_by_text(f"127.0.0.1:{port}", exact=False)
    await shown.first.wait_for()
    assert "connection refused" in await shown.first.inner_text()


async def test_an_upload_into_a_read_only_alias_says_where_to_change_it(
    page: Any, site: Site, flow: Flow, tmp_path: Path
) -> None:
    below = site.mount(f"below-{secrets.token_hex(3)}")
    mount = f"/view-{secrets.token_hex(3)}"
    body = {
        "mount_path": mount,
        "driver": "Alias",
        "addition": json.dumps({"paths": f"/{below.name}"}),
    }
    site.api("/api/admin/storage/create", body)
    for path in ("/api/fs/put", "/api/fs/form"):
        flow.expect(path, 500)
    picked = tmp_path / "notes.txt"
    picked.write_text("not for a read-only view")
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + mount)
    if not await page.locator("svg[tips=upload]").is_visible():
        await page.locator("svg.toolbar-toggle").click()
    await page.locator("svg[tips=upload]").click()
    await page.locator("input[type=file]:not([webkitdirectory])").set_input_files(str(picked))
    shown = page.get_by_text(f"storage {mount} is not writable", exact=False)
    await shown.first.wait_for()
    text = await shown.first.inner_text()
    assert '"Writable"' in text and "Storages" in text, text
    assert not (below / "notes.txt").exists()
