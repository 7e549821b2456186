"""The storage form in a real browser: the help and "Unsafe" warnings the server gives
Manifold's own options (which AList's language pack has no text for) are shown, and no
form shows a raw ``-tips`` key."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from tests.browser.conftest import ADMIN_PASSWORD, SCREENSHOTS, Site, log_in

RAW_KEY = "-tips"


async def open_form(page: Any, site: Site, driver: str) -> None:
    """The Add Storage form with ``driver`` chosen."""
    await page.goto(site.base + "/@manage/storages/add")
    await page.locator("#driver-trigger").click()
    await page.get_by_role("option", name=driver, exact=True).click()
    await page.locator("#mount_path").wait_for()


def help_of(site: Site, driver: str) -> dict[str, str]:
    """The help the server gives each of ``driver``'s own options."""
    info = site.api(f"/api/admin/driver/info?driver={driver}")["data"]
    return {item["name"]: item["help"] for item in info["additional"] or [] if item["help"]}


def has_dark_text(png: bytes) -> bool:
    """Whether a screenshot of a text shows it: enough pixels darker than the page."""
    image = Image.open(io.BytesIO(png)).convert("L")
    return sum(image.histogram()[:160]) > 50


async def test_sftp_and_ftp_forms_show_the_help_and_the_warnings(page: Any, site: Site) -> None:
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await open_form(page, site, "SFTP")
    fingerprint = help_of(site, "SFTP")["host_key_fingerprint"]
    shown = page.get_by_text(fingerprint, exact=True)
    await shown.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / "sftp-form.png"), full_page=True)
    assert await shown.is_visible()
    assert has_dark_text(await shown.screenshot())
    assert (
        "Host key fingerprint" in await page.locator("label[for=host_key_fingerprint]").inner_text()
    )

    await open_form(page, site, "FTP")
    warning = page.get_by_text(help_of(site, "FTP")["tls_insecure_skip_verify"], exact=True)
    await warning.scroll_into_view_if_needed()
    assert (await warning.inner_text()).startswith("Unsafe:")
    assert has_dark_text(await warning.screenshot())
    assert "TLS insecure skip verify" in await page.locator("body").inner_text()


async def test_no_drivers_form_shows_a_raw_tips_key(page: Any, site: Site) -> None:
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    drivers = sorted(site.api("/api/admin/driver/names")["data"])
    assert "SFTP" in drivers
    raw: dict[str, list[str]] = {}
    for driver in drivers:
        await open_form(page, site, driver)
        text = await page.locator("body").inner_text()
        lines = [line for line in text.splitlines() if RAW_KEY in line]
        if lines:
            raw[driver] = lines
    assert raw == {}
