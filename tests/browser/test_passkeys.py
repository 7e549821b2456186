"""Passkeys in Chromium with a virtual authenticator (the DevTools protocol's WebAuthn
domain): register one from the profile page, sign out, sign in with it from the login
page, and delete it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from tests.browser.conftest import Flow, Site, log_in

USER_PASSWORD = "browser-passkey-pw"
FINISH_LOGIN = "/api/authn/webauthn_finish_login"
# What a browser without passkey autofill (conditional mediation) answers.
NO_AUTOFILL = "PublicKeyCredential.isConditionalMediationAvailable = async () => false"


@pytest.fixture
def site(site: Site) -> Iterator[Site]:
    """The site as ``localhost`` with passkeys on: a relying party id must be a domain
    name, never an address, and localhost counts as a secure origin over plain HTTP."""
    site.api("/api/admin/setting/save", [{"key": "webauthn_login_enabled", "value": "true"}])
    yield replace(site, base=site.base.replace("127.0.0.1", "localhost"))
    site.api("/api/admin/setting/save", [{"key": "webauthn_login_enabled", "value": "false"}])


async def add_authenticator(page: Any) -> tuple[Any, str]:
    """A platform authenticator that holds resident keys and verifies its user at once."""
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable")
    options = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
               "hasUserVerification": True, "isUserVerified": True,
               "automaticPresenceSimulation": True}  # fmt: skip
    added = await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})
    return cdp, str(added["authenticatorId"])


async def sign_out(page: Any, site: Site) -> None:
    await page.goto(site.base + "/@manage")
    async with page.expect_response(lambda r: r.url.endswith("/api/auth/logout")):
        await page.get_by_role("button", name="logout").click()
    await page.wait_for_url(lambda url: "@login" in url)
    await page.evaluate("() => localStorage.clear()")


async def whoami(page: Any) -> str:
    """The user the page's stored token belongs to."""
    script = """async () => {
        const headers = {Authorization: localStorage.getItem('token') || ''};
        return (await (await fetch('/api/me', {headers})).json()).data.username;
    }"""
    return str(await page.evaluate(script))


async def test_register_sign_in_and_delete_a_passkey(page: Any, site: Site, flow: Flow) -> None:
    username = f"pk-{secrets.token_hex(3)}"
    body = {"username": username, "password": USER_PASSWORD, "base_path": "/", "role": 0,
            "permission": 0, "disabled": False}  # fmt: skip
    site.api("/api/admin/user/create", body)
    cdp, authenticator = await add_authenticator(page)
    await log_in(page, site, username, USER_PASSWORD)

    # Register from the profile page.
    await page.goto(site.base + "/@manage")
    finished = "/api/authn/webauthn_finish_registration"
    async with page.expect_response(lambda r: r.url.endswith(finished)) as info:
        await page.get_by_role("button", name="Add a WebAuthn credential").click()
    assert (await (await info.value).json())["data"] == "Registered Successfully"
    held = await cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})
    assert len(held["credentials"]) == 1
    await page.reload()
    await page.get_by_text("Fingerprint:").wait_for()

    # Sign out; the login page offers the passkey at once (Chromium's passkey autofill,
    # which the virtual authenticator answers by itself).
    await sign_out(page, site)
    async with page.expect_response(lambda r: FINISH_LOGIN in r.url) as info:
        await page.goto(site.base + "/@login")
    # The page moves on at once: the body may be gone; who is logged in tells.
    assert (await info.value).status == 200
    await page.wait_for_url(lambda url: "@login" not in url)
    assert await whoami(page) == username

    # A browser without passkey autofill: the fingerprint icon swaps the password field
    # for the authenticator, and Login asks it for this user's passkey.
    await sign_out(page, site)
    await page.add_init_script(NO_AUTOFILL)
    await page.goto(site.base + "/@login")
    await page.fill("input[name=username]", username)
    row = page.get_by_role("button", name="Browse as a guest").locator(
        "xpath=following-sibling::div[1]"
    )
    await row.locator("xpath=./*[last()]").click()
    await page.locator("input[name=password]").wait_for(state="detached")
    async with page.expect_response(lambda r: FINISH_LOGIN in r.url) as info:
        await page.get_by_role("button", name="Login").click()
    assert f"username={username}" in (await info.value).url
    assert (await info.value).status == 200
    await page.wait_for_url(lambda url: "@login" not in url)
    assert await whoami(page) == username

    # Delete it from the profile page: it is gone from the list, and from the server.
    await page.goto(site.base + "/@manage")
    await page.get_by_text("Fingerprint:").wait_for()
    async with page.expect_response(lambda r: r.url.endswith("/api/authn/delete_authn")) as info:
        await page.get_by_role("button", name="Delete").click()
    assert (await (await info.value).json())["data"] == "Deleted Successfully"
    await page.get_by_text("Fingerprint:").wait_for(state="detached")
    await page.reload()
    await page.get_by_role("button", name="Add a WebAuthn credential").wait_for()
    assert await page.get_by_text("Fingerprint:").count() == 0
    token = site.login(username, USER_PASSWORD)
    assert site.api("/api/authn/getcredentials", token=token)["data"] == []
