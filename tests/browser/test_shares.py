"""Share links through the web interface: made from the file menu, opened by someone
with no account in a browser of their own, password entered, file downloaded."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from manifold.models import Perm
from tests.browser.conftest import ADMIN_PASSWORD, SCREENSHOTS, STEP, Flow, Site, log_in

SHARE_CODE = "open-sesame-42"
SHARER_PASSWORD = "sharer-password-1"


def entry(page: Any, name: str) -> Any:
    return page.locator(f'p.name[title="{name}"]')


async def _make_share(page: Any, site: Site, name: str) -> str:
    """Share ``name`` (in the open folder) with ``SHARE_CODE``; the link's share id."""
    await entry(page, name).click(button="right")
    await page.get_by_text("Share", exact=True).click()
    dialog = page.locator("section[role=dialog]")
    label = dialog.get_by_text("Share code", exact=True)
    await label.locator("xpath=following-sibling::*[1]").locator("input").fill(SHARE_CODE)
    await dialog.get_by_role("button", name="Confirm").click()
    summary = dialog.locator("textarea[readonly]")
    await summary.wait_for()
    text = await summary.input_value()
    found = re.search(r"/@s/([\w-]+)", text)
    assert found is not None, text
    assert SHARE_CODE in text
    return found.group(1)


async def test_share_from_the_file_menu_and_download_it_elsewhere(
    page: Any, site: Site, browser: Any, flow: Flow, tmp_path: Path
) -> None:
    root = site.mount("handout")
    (root / "notes.txt").write_text("for the visitor")
    (root / "other.txt").write_text("not shared")
    # The page offers "Share" to a user with permission bit 14, based in the folder.
    user = {"username": "sharer", "password": SHARER_PASSWORD, "base_path": "/handout"}
    site.api("/api/admin/user/create", {**user, "permission": int(Perm.SHARE)})
    await log_in(page, site, "sharer", SHARER_PASSWORD)
    await page.goto(site.base + "/")
    await entry(page, "notes.txt").wait_for()
    share_id = await _make_share(page, site, "notes.txt")
    shares = site.api("/api/share/list")["data"]["content"]
    assert [s["files"] for s in shares if s["id"] == share_id] == [["/handout/notes.txt"]]

    stranger = await browser.new_context(viewport={"width": 1280, "height": 800})
    stranger.set_default_timeout(STEP)
    visitor = await stranger.new_page()
    try:
        await visitor.goto(f"{site.base}/@s/{share_id}")
        code = visitor.locator("input[type=password]")
        await code.fill(SHARE_CODE)
        await code.press("Enter")
        await visitor.get_by_text("notes.txt").first.wait_for()
        async with visitor.expect_download() as waiting:
            await visitor.get_by_role("button", name="Download").first.click()
        got = await waiting.value
        saved = tmp_path / "got.txt"
        await got.save_as(saved)
        assert saved.read_text() == "for the visitor"
        assert "other.txt" not in await visitor.content()
    except Exception:
        SCREENSHOTS.mkdir(exist_ok=True)
        await visitor.screenshot(path=str(SCREENSHOTS / "share-visitor.png"))
        raise
    finally:
        await stranger.close()
    accessed = site.api("/api/share/get?id=" + share_id)["data"]["accessed"]
    assert accessed >= 1


async def test_a_new_admin_shares_without_ticking_share(page: Any, site: Site) -> None:
    root = site.mount("admins")
    (root / "report.txt").write_text("from the admin")
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + "/admins")
    await entry(page, "report.txt").wait_for()
    share_id = await _make_share(page, site, "report.txt")
    shares = site.api("/api/share/list")["data"]["content"]
    assert [s["files"] for s in shares if s["id"] == share_id] == [["/admins/report.txt"]]
