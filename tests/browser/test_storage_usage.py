"""The storages page in a real browser: a storage's usage as ``df`` counts its disk, the
space no writer may use any more shown as used."""

from __future__ import annotations

import re
import secrets
from typing import Any

from playwright.async_api import expect

from tests.browser.conftest import ADMIN_PASSWORD, STEP, Site, log_in
from tests.drivers.space_helpers import SLACK, df

GIB = 1 << 30
USAGE = re.compile(r"(\d+\.\d+) / (\d+\.\d+) G")


async def test_the_storages_page_shows_a_local_disks_usage_as_df(page: Any, site: Site) -> None:
    root = site.mount(f"usage-{secrets.token_hex(3)}")
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + "/@manage/storages")
    card = page.get_by_text(f"/{root.name}", exact=True).locator("xpath=../..")
    await expect(card.get_by_text(USAGE)).to_be_visible(timeout=STEP)
    found = USAGE.search(await card.get_by_text(USAGE).inner_text())
    assert found is not None
    used, total = float(found.group(1)), float(found.group(2))
    measured = df(root)
    assert abs(total - measured.size / GIB) < 0.01
    assert abs(used - (measured.size - measured.avail) / GIB) < SLACK / GIB
