"""Archives through the web interface: open a zip's contents, and extract it."""

from __future__ import annotations

import asyncio
import io
import zipfile
from typing import Any

from tests.browser.conftest import ADMIN_PASSWORD, Site, log_in
from tests.browser.test_files import _menu, _open, entry


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


FILES = {"notes.txt": b"first notes\n", "inner/deep.md": b"# deep\n"}


async def test_open_a_zip_and_extract_it(page: Any, site: Site) -> None:
    root = site.mount("zips")
    (root / "bundle.zip").write_bytes(_zip(FILES))
    await log_in(page, site, "admin", ADMIN_PASSWORD)

    await page.goto(site.base + "/zips/bundle.zip")
    await page.get_by_text("Archive Previewer").wait_for()
    await page.get_by_text("notes.txt", exact=True).wait_for()
    await page.get_by_text("inner", exact=True).click()
    await page.get_by_text("deep.md", exact=True).wait_for()
    assert await page.get_by_text("notes.txt", exact=True).count() == 0

    await _open(page, site, "/zips", "bundle.zip")
    await _menu(page, "bundle.zip", "Decompress")
    dialog = page.locator("[role=dialog]")
    new_folder = dialog.get_by_role("checkbox", name="Decompress into a new sub-folder")
    if not await new_folder.is_checked():
        await dialog.get_by_text("Decompress into a new sub-folder").click()
    await dialog.get_by_text("zips", exact=True).click()  # the folder itself
    await dialog.get_by_role("button", name="OK").click()
    for _ in range(300):
        if (root / "bundle/inner/deep.md").exists():
            break
        await asyncio.sleep(0.1)
    assert (root / "bundle/notes.txt").read_bytes() == FILES["notes.txt"]
    assert (root / "bundle/inner/deep.md").read_bytes() == FILES["inner/deep.md"]
    await _open(page, site, "/zips/bundle", "notes.txt")
    await entry(page, "inner").wait_for()
