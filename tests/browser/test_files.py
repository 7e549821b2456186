"""Changing files through the web interface: upload, new folder, rename, move, delete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.browser.conftest import ADMIN_PASSWORD, Site, log_in


def entry(page: Any, name: str) -> Any:
    """The entry called ``name`` in the folder listing."""
    return page.locator(f'p.name[title="{name}"]')


async def _open(page: Any, site: Site, path: str, shows: str) -> None:
    await page.goto(site.base + path)
    await entry(page, shows).wait_for()


async def _toolbar(page: Any, action: str) -> None:
    toggle = page.locator("svg.toolbar-toggle")
    if not await page.locator(f"svg[tips={action}]").is_visible():
        await toggle.click()
    await page.locator(f"svg[tips={action}]").click()


async def _expand(dialog: Any, folder: str) -> None:
    """Open ``folder`` in the folder chooser's tree (its arrow, not its name)."""
    await dialog.get_by_text(folder, exact=True).locator("xpath=../*[name()='svg']").click()


async def _menu(page: Any, name: str, action: str) -> None:
    await entry(page, name).click(button="right")
    await page.get_by_text(action, exact=True).click()


async def test_upload_through_the_upload_dialog(page: Any, site: Site, tmp_path: Path) -> None:
    root = site.mount("uploads")
    (root / "keep.txt").write_text("already here")
    picked = tmp_path / "report.csv"
    picked.write_bytes(b"a,b\n1,2\n" * 1000)
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await _open(page, site, "/uploads", "keep.txt")
    await _toolbar(page, "upload")
    files = page.locator("input[type=file]:not([webkitdirectory])")
    await files.set_input_files(str(picked))
    await page.get_by_text("Success", exact=True).first.wait_for()
    assert (root / "report.csv").read_bytes() == picked.read_bytes()
    await entry(page, "report.csv").wait_for()


async def test_make_rename_move_and_delete(page: Any, site: Site) -> None:
    root = site.mount("edits")
    (root / "draft.txt").write_text("words")
    (root / "archive").mkdir()
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await _open(page, site, "/edits", "draft.txt")

    await _toolbar(page, "mkdir")
    await page.locator("#modal-input").fill("fresh")
    await page.get_by_role("button", name="OK").click()
    await entry(page, "fresh").wait_for()
    assert (root / "fresh").is_dir()

    await _menu(page, "draft.txt", "Rename")
    field = page.locator("#modal-input")
    await page.wait_for_function("document.querySelector('#modal-input').value === 'draft.txt'")
    # The dialog selects the name's stem when it opens: replace all of it by hand.
    await field.press("Control+a")
    await field.press_sequentially("final.txt")
    await page.get_by_role("button", name="OK").click()
    await entry(page, "final.txt").wait_for()
    assert (root / "final.txt").read_text() == "words"
    assert not (root / "draft.txt").exists()

    await _menu(page, "final.txt", "Move")
    dialog = page.locator("[role=dialog]")
    await _expand(dialog, "edits")
    await dialog.get_by_text("archive", exact=True).click()
    await dialog.get_by_role("button", name="OK").click()
    await entry(page, "final.txt").wait_for(state="detached")
    assert (root / "archive" / "final.txt").read_text() == "words"

    await _menu(page, "fresh", "Delete")
    await page.locator("[role=dialog]").get_by_role("button", name="Confirm").click()
    await entry(page, "fresh").wait_for(state="detached")
    assert not (root / "fresh").exists()
