"""Logging in, browsing folders and previewing files through the web interface."""

from __future__ import annotations

from typing import Any

from PIL import Image

from tests.browser.conftest import ADMIN_PASSWORD, Flow, Site, log_in


async def test_log_in_through_the_login_page(page: Any, site: Site, flow: Flow) -> None:
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    assert flow.saw("/api/auth/login/hash")
    await page.goto(site.base + "/@manage")
    await page.get_by_text("Update Profile").wait_for()
    assert await page.locator("input").first.input_value() == "admin"


async def test_a_wrong_password_is_told_and_nothing_else(page: Any, site: Site, flow: Flow) -> None:
    flow.expect("/api/auth/login/hash", 400)
    await page.goto(site.base + "/@login")
    await page.fill("input[name=username]", "admin")
    await page.fill("input[name=password]", "not-the-password")
    await page.get_by_role("button", name="Login").click()
    await page.get_by_text("password is incorrect").wait_for()
    assert "@login" in page.url


async def test_browse_folders(page: Any, site: Site) -> None:
    root = site.mount("browse")
    (root / "projects" / "alpha").mkdir(parents=True)
    (root / "projects" / "alpha" / "plan.txt").write_text("the plan")
    (root / "projects" / "beta").mkdir()
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + "/")
    await page.get_by_text("browse", exact=True).click()
    await page.get_by_text("projects", exact=True).click()
    await page.get_by_text("beta", exact=True).wait_for()
    await page.get_by_text("alpha", exact=True).click()
    await page.get_by_text("plan.txt", exact=True).wait_for()
    assert page.url.endswith("/browse/projects/alpha")
    await page.go_back()
    await page.get_by_text("beta", exact=True).wait_for()


async def test_previews_of_text_markdown_and_image(page: Any, site: Site) -> None:
    root = site.mount("previews")
    (root / "notes.txt").write_text("plain words here")
    (root / "guide.md").write_text("# Guide Title\n\nSome *emphasis* here.\n")
    Image.new("RGB", (40, 30), (200, 30, 30)).save(root / "red.png")
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + "/previews")
    await page.get_by_text("notes.txt", exact=True).click()
    await page.get_by_text("plain words here").wait_for()

    await page.goto(site.base + "/previews/guide.md")
    heading = page.get_by_role("heading", name="Guide Title")
    await heading.wait_for()
    assert await page.locator("em", has_text="emphasis").count() == 1

    await page.goto(site.base + "/previews/red.png")
    image = page.locator("img[src*='/d/previews/red.png']")
    await image.wait_for()
    size = await image.evaluate("img => img.complete && [img.naturalWidth, img.naturalHeight]")
    assert size == [40, 30]
