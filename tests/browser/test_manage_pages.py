"""The manage pages in a real browser: two-factor login, storages, users with a base
path, folder passwords and the guest's prompt, the search index, and the tasks page."""

from __future__ import annotations

import re
import secrets
from typing import Any

import pyotp
from playwright.async_api import TimeoutError as PlaywrightTimeout
from playwright.async_api import expect

from tests.browser.conftest import ADMIN_PASSWORD, STEP, Flow, Site, log_in

USER_PASSWORD = "browser-user-pw"


def make_user(site: Site, username: str, base_path: str = "/", permission: int = 0) -> None:
    body = {"username": username, "password": USER_PASSWORD, "base_path": base_path,
            "role": 0, "permission": permission, "disabled": False}  # fmt: skip
    site.api("/api/admin/user/create", body)


async def choose_folder(page: Any, field: str, names: list[str]) -> None:
    """Pick a folder in the page's folder chooser: open each folder down to the last name."""
    await page.locator(field).click()
    dialog = page.get_by_role("dialog")

    def label(name: str) -> Any:
        return dialog.get_by_text(name, exact=True)

    for name, child in zip(["root", *names[:-1]], names, strict=True):
        arrow = label(name).locator("xpath=preceding-sibling::*[1]")
        for _ in range(3):  # a click while the tree redraws can be lost: open it again
            await arrow.click()
            try:
                await label(child).wait_for(timeout=5000)
                break
            except PlaywrightTimeout:
                continue
    await label(names[-1]).click()
    await dialog.get_by_role("button", name="Confirm").click()


async def test_turn_on_two_factor_and_log_in_with_a_code(page: Any, site: Site, flow: Flow) -> None:
    username = f"otp-{secrets.token_hex(3)}"
    make_user(site, username)
    await log_in(page, site, username, USER_PASSWORD)
    await page.goto(site.base + "/@manage")
    await page.get_by_text("Enable 2FA").click()
    await page.get_by_placeholder("Input the code from your 2FA app").wait_for()
    text = await page.locator("body").inner_text()
    found = re.search(r"\b([A-Z2-7]{16,})\b", text)
    assert found, text
    secret = found.group(1)
    await page.get_by_placeholder("Input the code from your 2FA app").fill(pyotp.TOTP(secret).now())
    # Wait for the answer itself: the page may drop its input before the answer is recorded.
    async with page.expect_response(lambda r: r.url.endswith("/api/auth/2fa/verify")) as info:
        await page.get_by_role("button", name="Verify").click()
    verified = await info.value
    assert (verified.request.method, verified.status) == ("POST", 200)
    assert (await verified.json())["code"] == 200
    await page.wait_for_function(
        "() => !document.querySelector('input[placeholder=\"Input the code from your 2FA app\"]')"
    )

    # A fresh visit: the password alone is not enough, the code is asked for.
    await page.evaluate("() => localStorage.clear()")
    flow.expect("/api/auth/login/hash", 402)
    await page.goto(site.base + "/@login")
    await page.fill("input[name=username]", username)
    await page.fill("input[name=password]", USER_PASSWORD)
    async with page.expect_response(lambda r: r.url.endswith("/api/auth/login/hash")) as info:
        await page.get_by_role("button", name="Login").click()
    assert (await (await info.value).json())["code"] == 402
    await page.locator("#totp").wait_for()
    await page.locator("#totp").fill(pyotp.TOTP(secret).now())
    await page.get_by_role("button", name="Login").click()
    await page.wait_for_url(lambda url: "@login" not in url)
    await page.goto(site.base + "/@manage")
    await page.get_by_text("Update Profile").wait_for()
    assert await page.locator("input").first.input_value() == username
    assert await page.get_by_text("Enable 2FA").count() == 0  # it is on


async def test_add_a_local_storage_through_the_manage_page(page: Any, site: Site) -> None:
    root = site.files / f"added-{secrets.token_hex(3)}"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the new storage")
    mount = f"/{root.name}"
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + "/@manage/storages")
    await page.get_by_role("button", name="Add").first.click()
    await page.locator("#driver-trigger").click()
    await page.get_by_role("option", name="Local", exact=True).click()
    await page.locator("#mount_path").fill(mount)
    await page.locator("#root_folder_path").fill(str(root))
    await page.get_by_role("button", name="Add").last.click()
    await page.wait_for_url(lambda url: url.rstrip("/").endswith("/@manage/storages"))
    listed = site.api("/api/admin/storage/list")["data"]["content"]
    (made,) = [s for s in listed if s["mount_path"] == mount]
    assert (made["driver"], made["status"]) == ("Local", "work")
    await page.goto(site.base + mount)
    await page.get_by_text("hello.txt", exact=True).wait_for()


async def test_a_user_made_on_the_users_page_sees_only_their_base_path(
    page: Any, site: Site, browser: Any
) -> None:
    root = site.mount(f"team-{secrets.token_hex(3)}")
    (root / "alice" / "plans").mkdir(parents=True)
    (root / "alice" / "plans" / "alice-plan.txt").write_text("mine")
    (root / "bob-secret.txt").write_text("not for alice")
    username = f"alice-{secrets.token_hex(3)}"
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + "/@manage/users")
    await page.get_by_role("button", name="Add").first.click()
    await page.locator("#username").fill(username)
    await page.locator("#password").fill(USER_PASSWORD)
    await choose_folder(page, "#base_path", [root.name, "alice"])
    await page.get_by_role("button", name="Add").last.click()
    await page.wait_for_url(lambda url: url.rstrip("/").endswith("/@manage/users"))
    await page.get_by_text(username, exact=True).wait_for()

    context = await browser.new_context()
    try:
        theirs = await context.new_page()
        await log_in(theirs, site, username, USER_PASSWORD)
        await theirs.goto(site.base + "/")
        await theirs.get_by_text("plans", exact=True).click()
        await theirs.get_by_text("alice-plan.txt", exact=True).wait_for()
        assert await theirs.get_by_text("bob-secret.txt").count() == 0
        listed = site.api("/api/fs/list", {"path": "/"}, token=site.login(username, USER_PASSWORD))
        assert [o["name"] for o in listed["data"]["content"]] == ["plans"]
    finally:
        await context.close()


async def test_a_folder_password_set_on_the_metas_page_prompts_the_guest(
    page: Any, site: Site, browser: Any
) -> None:
    root = site.mount(f"vault-{secrets.token_hex(3)}")
    (root / "locked").mkdir()
    (root / "locked" / "treasure.txt").write_text("gold")
    guest = next(u for u in site.api("/api/admin/user/list")["data"]["content"] if u["role"] == 1)
    site.api("/api/admin/user/update", {**guest, "disabled": False})
    try:
        await log_in(page, site, "admin", ADMIN_PASSWORD)
        await page.goto(site.base + "/@manage/metas")
        await page.get_by_role("button", name="Add").first.click()
        await page.locator("#path").fill(f"/{root.name}/locked")
        await page.locator("#password").fill("open-sesame")
        await page.get_by_role("button", name="Add").last.click()
        await page.wait_for_url(lambda url: url.rstrip("/").endswith("/@manage/metas"))
        await page.get_by_text(f"/{root.name}/locked", exact=True).wait_for()

        context = await browser.new_context()
        try:
            visitor = await context.new_page()
            answers: list[tuple[str, int]] = []

            async def record(response: Any) -> None:
                path = response.url.split("?")[0]
                if path.endswith(("/api/fs/list", "/api/fs/get")):
                    answers.append((path.rsplit("/", 1)[1], (await response.json())["code"]))

            visitor.on("response", record)
            await visitor.goto(f"{site.base}/{root.name}/locked")
            prompt = visitor.locator("input[type=password]")
            await prompt.wait_for()
            assert await visitor.get_by_text("treasure.txt").count() == 0
            await prompt.fill("open-sesame")
            await visitor.get_by_role("button", name="OK").click()
            await visitor.get_by_text("treasure.txt", exact=True).wait_for()
            # Refused (403, "password is incorrect or you have no permission") until the
            # password is given; then the listing.
            assert answers[0][1] == 403, answers
            assert answers[-1] == ("list", 200), answers
        finally:
            await context.close()
    finally:
        site.api("/api/admin/user/update", {**guest, "disabled": True})


async def test_build_the_search_index_and_search(page: Any, site: Site, flow: Flow) -> None:
    root = site.mount(f"finds-{secrets.token_hex(3)}")
    word = f"zebra{secrets.token_hex(3)}"
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / f"{word}-notes.txt").write_text("striped")
    settings = {s["key"]: s for s in site.api("/api/admin/setting/list")["data"]}
    site.api("/api/admin/setting/save", [{**settings["search_index"], "value": "database"}])
    try:
        await log_in(page, site, "admin", ADMIN_PASSWORD)
        await page.goto(site.base + "/@manage/indexes")
        before = site.api("/api/admin/index/progress")["data"]["last_done_time"]
        await page.get_by_role("button", name=re.compile("Build indexes|Rebuild indexes")).click()
        for _ in range(600):
            progress = site.api("/api/admin/index/progress")["data"]
            if progress["is_done"] and progress["last_done_time"] != before:
                break
            await page.wait_for_timeout(100)
        assert progress["is_done"] and not progress["error"], progress
        await page.goto(site.base + "/")
        await page.get_by_text(root.name, exact=True).wait_for()
        await page.keyboard.press("Control+KeyK")  # the page's search box
        search = page.get_by_role("dialog").locator("input").first
        await search.fill(word)
        await search.press("Enter")
        await page.get_by_text(f"{word}-notes.txt").wait_for()
        assert flow.saw("/api/fs/search")
    finally:
        site.api("/api/admin/setting/save", [{**settings["search_index"], "value": "none"}])


async def test_a_copy_task_shows_on_the_tasks_page(page: Any, site: Site) -> None:
    first = site.mount(f"from-{secrets.token_hex(3)}")
    site.mount(f"to-{secrets.token_hex(3)}")
    (first / "big-copy.bin").write_bytes(b"c" * (1 << 20))
    target = next(
        s["mount_path"]
        for s in site.api("/api/admin/storage/list")["data"]["content"]
        if s["mount_path"].startswith("/to-")
    )
    body = {"src_dir": f"/{first.name}", "dst_dir": target, "names": ["big-copy.bin"]}
    site.api("/api/fs/copy", body)
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await page.goto(site.base + "/@manage/tasks/copy")
    await expect(page.get_by_text("big-copy.bin", exact=True)).to_be_visible(timeout=STEP)
    succeeded = page.get_by_text(re.compile("^succeeded$", re.IGNORECASE)).first
    await expect(succeeded).to_be_visible(timeout=STEP)
