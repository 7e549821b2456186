"""The Move tasks page in a real browser: a finished move names no step still under way,
and a failed one shows the progress it reached, not a full bar."""

from __future__ import annotations

import io
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

from PIL import Image
from playwright.async_api import expect

from tests.browser.conftest import ADMIN_PASSWORD, SCREENSHOTS, STEP, Site, log_in

STARTED_STEP = "getting src object"


def moved(site: Site, src: str, dst: str, name: str) -> None:
    site.api("/api/fs/move", {"src_dir": src, "dst_dir": dst, "names": [name]})


def wait_moves_done(site: Site, names: set[str]) -> None:
    """Wait (generously) until the move tasks of ``names`` have ended."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = site.api("/api/admin/task/move/done")["data"]
        if all(any(f"(/{name})" in task["name"] for task in done) for name in names):
            return
        time.sleep(0.2)
    raise AssertionError("the move tasks did not end")


def filled_share(png: bytes) -> float:
    """The share of a progress bar's middle line drawn in the bar's fill colour (a
    saturated blue; the empty track is a pale one)."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    y = image.height // 2
    line = [image.getpixel((x, y)) for x in range(image.width)]
    blue = [p for p in line if isinstance(p, tuple) and p[2] > 150 and p[2] - p[0] > 80]
    return len(blue) / len(line)


def move_one_well_and_one_into_a_locked_folder(
    site: Site, source: Path, target: Path, tag: str
) -> None:
    """Move fine-<tag>.txt into ``target`` and stuck-<tag>.txt into a folder of it that
    takes no new file, and wait until both tasks ended."""
    (target / "locked").mkdir()
    # An immutable folder refuses every new entry, root's included.
    subprocess.run(["chattr", "+i", str(target / "locked")], check=True)
    try:
        moved(site, f"/{source.name}", f"/{target.name}", f"fine-{tag}.txt")
        moved(site, f"/{source.name}", f"/{target.name}/locked", f"stuck-{tag}.txt")
        wait_moves_done(site, {f"fine-{tag}.txt", f"stuck-{tag}.txt"})
    finally:
        subprocess.run(["chattr", "-i", str(target / "locked")], check=True)


async def row_of(page: Any, name: str) -> Any:
    return page.get_by_text(name, exact=True).locator("xpath=ancestor::*[.//button][1]")


async def test_finished_moves_show_their_end_and_a_failed_one_what_it_reached(
    page: Any, site: Site
) -> None:
    tag = secrets.token_hex(3)
    source, target = site.mount(f"mfrom-{tag}"), site.mount(f"mto-{tag}")
    (source / f"fine-{tag}.txt").write_text("moved whole")
    (source / f"stuck-{tag}.txt").write_text("its folder takes no new file")
    move_one_well_and_one_into_a_locked_folder(site, source, target, tag)
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + "/@manage/tasks/move")
    fine, stuck = await row_of(page, f"fine-{tag}.txt"), await row_of(page, f"stuck-{tag}.txt")
    await expect(fine.get_by_text("Succeeded", exact=True)).to_be_visible(timeout=STEP)
    await expect(stuck.get_by_text("Failed", exact=True)).to_be_visible(timeout=STEP)
    await expect(stuck.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "0")
    SCREENSHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / "move-tasks.png"))
    assert filled_share(await fine.get_by_role("progressbar").screenshot()) > 0.9
    assert filled_share(await stuck.get_by_role("progressbar").screenshot()) < 0.05

    for row in (fine, stuck):
        await row.get_by_role("button", name="Expand").click()
    await expect(page.get_by_text("uploading", exact=True)).to_be_visible(timeout=STEP)
    await expect(page.get_by_text("permission denied", exact=False).first).to_be_visible()
    assert STARTED_STEP not in await page.locator("body").inner_text()
    assert (target / f"fine-{tag}.txt").read_text() == "moved whole"
    assert (source / f"stuck-{tag}.txt").read_text() == "its folder takes no new file"
