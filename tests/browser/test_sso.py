"""Single sign-on in a real browser against a real OpenID Connect provider: the login
page's SSO button (a popup that hands the token back to the page), and connecting an
identity from the profile page, then signing in with it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.async_api import Error as PlaywrightError

from tests.browser.conftest import STEP, Site, free_port, log_in, serve
from tests.fixtures.oidcprovider import CLIENT_ID, CLIENT_SECRET, Provider, start_provider

USER_PASSWORD = "browser-sso-pw"


@pytest.fixture(scope="module")
def sso_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, Provider]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    callback = base + "/api/auth/sso_callback?method="
    uris = [callback + "sso_get_token", callback + "get_sso_id"]
    provider = start_provider(tmp_path_factory.mktemp("oidc"), uris)
    try:
        with serve(tmp_path_factory, port, {"MANIFOLD_SITE_URL": base}) as started:
            values = {
                "sso_login_enabled": "true",
                "sso_login_platform": "OIDC",
                "sso_client_id": CLIENT_ID,
                "sso_client_secret": CLIENT_SECRET,
                "sso_endpoint_name": provider.issuer,
                "sso_auto_register": "true",
            }
            started.api(
                "/api/admin/setting/save", [{"key": k, "value": v} for k, v in values.items()]
            )
            yield started, provider
    finally:
        provider.daemon.stop()


@pytest.fixture(scope="module")
def site(sso_site: tuple[Site, Provider]) -> Site:
    """This module's site: the page fixture opens it."""
    return sso_site[0]


async def through_provider(popup: Any, login: str) -> None:
    """Sign in at the provider as ``login`` and consent, until the popup closes."""
    login_box = popup.locator("input[name=login]")
    go_on = popup.get_by_role("button", name="Continue")
    for _ in range(4):
        try:
            await login_box.or_(go_on).first.wait_for(timeout=STEP)
            if await login_box.count():
                await login_box.fill(login)
                await popup.locator("input[name=password]").fill("any")
                await popup.get_by_role("button", name="Sign-in").click()
            else:
                await go_on.click()
        except PlaywrightError:
            if popup.is_closed():
                return
            raise
    await popup.wait_for_event("close", timeout=STEP)


def me(site: Site, token: str) -> dict[str, Any]:
    answer = httpx.get(site.base + "/api/me", headers={"Authorization": token}, timeout=30).json()
    assert answer["code"] == 200, answer
    return dict(answer["data"])


async def sign_in_with_button(page: Any, site: Site, login: str) -> str:
    """Sign in through the login page's SSO button; the token the page keeps."""
    await page.goto(site.base + "/@login")
    # The generic platform's button: a "log in" arrow beside the theme switch.
    button = page.locator("svg.hope-icon").filter(has=page.locator("path[d='M15 12 3 12']"))
    async with page.expect_popup() as opened:
        await button.click()
    await through_provider(await opened.value, login)
    await page.wait_for_url(lambda url: "@login" not in url)
    return str(await page.evaluate("() => localStorage.getItem('token')"))


async def test_sign_in_with_the_login_pages_sso_button(page: Any, site: Site) -> None:
    login = f"sso-{secrets.token_hex(3)}"
    token = await sign_in_with_button(page, site, login)
    user = me(site, token)
    assert (user["username"], user["sso_id"]) == (login, login)


async def test_connect_sso_from_the_profile_then_sign_in_with_it(page: Any, site: Site) -> None:
    username = f"bind-{secrets.token_hex(3)}"
    identity = f"idp-{secrets.token_hex(3)}"
    body = {"username": username, "password": USER_PASSWORD, "base_path": "/", "role": 0,
            "permission": 0, "disabled": False}  # fmt: skip
    site.api("/api/admin/user/create", body)
    await log_in(page, site, username, USER_PASSWORD)
    await page.goto(site.base + "/@manage")
    async with page.expect_response(lambda r: r.url.endswith("/api/me/update")) as updated:
        async with page.expect_popup() as opened:
            await page.get_by_role("button", name="Connect to Single Sign-On Platform").click()
        await through_provider(await opened.value, identity)
    assert (await (await updated.value).json())["code"] == 200
    users = site.api("/api/admin/user/list")["data"]["content"]
    assert {u["username"]: u["sso_id"] for u in users}[username] == identity

    # Signed out, the same identity at the provider opens this account.
    await page.evaluate("() => localStorage.clear()")
    token = await sign_in_with_button(page, site, identity)
    assert me(site, token)["username"] == username
