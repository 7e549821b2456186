"""The login page's LDAP login against a real slapd: a directory user signs in (and
gets an account), a wrong password is shown, and the page's own login still works
with the LDAP box unticked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import ADMIN_PASSWORD, Flow, Site
from tests.fixtures import ldapserver
from tests.fixtures.ldapserver import USERS, LdapServer

pytestmark = pytest.mark.skipif(not ldapserver.available(), reason="slapd is not installed")


@pytest.fixture(scope="module")
def slapd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LdapServer]:
    server = ldapserver.start(tmp_path_factory.mktemp("slapd"))
    yield server
    server.stop()


@pytest.fixture
def ldap_on(site: Site, slapd: LdapServer) -> Iterator[None]:
    """LDAP login on for one test: the other tests' logins expect the password form."""
    site.api("/api/admin/setting/save", slapd.settings(ldap_default_permission="0"))
    yield
    site.api("/api/admin/setting/save", [{"key": "ldap_login_enabled", "value": "false"}])


async def submit(page: Any, site: Site, username: str, password: str, path: str) -> dict[str, Any]:
    await page.fill("input[name=username]", username)
    await page.fill("input[name=password]", password)
    async with page.expect_response(lambda r: r.url.endswith(path)) as info:
        await page.get_by_role("button", name="Login").click()
    answer: dict[str, Any] = await (await info.value).json()
    return answer


@pytest.mark.usefixtures("ldap_on")
async def test_a_directory_user_signs_in_through_the_ldap_login(
    page: Any, site: Site, flow: Flow
) -> None:
    flow.expect("/api/auth/login/ldap", 400)
    await page.goto(site.base + "/@login")
    # The page ticks its LDAP box when the setting is on, labelled with the tips.
    box = page.get_by_text("login with ldap")
    await box.wait_for()

    wrong = await submit(page, site, "carol", "not-carols", "/api/auth/login/ldap")
    assert (wrong["code"], wrong["message"]) == (400, "password is incorrect")
    await page.get_by_text("password is incorrect").first.wait_for()
    assert "@login" in page.url

    right = await submit(page, site, "carol", USERS["carol"], "/api/auth/login/ldap")
    assert right["code"] == 200, right
    await page.wait_for_url(lambda url: "@login" not in url)
    me = site.api("/api/me", token=right["data"]["token"])["data"]
    assert (me["username"], me["role"]) == ("carol", 0)


@pytest.mark.usefixtures("ldap_on")
async def test_unticking_ldap_logs_in_with_the_local_password(
    page: Any, site: Site, flow: Flow
) -> None:
    await page.goto(site.base + "/@login")
    await page.get_by_text("login with ldap").click()
    answer = await submit(page, site, "admin", ADMIN_PASSWORD, "/api/auth/login/hash")
    assert answer["code"] == 200
    await page.wait_for_url(lambda url: "@login" not in url)
    assert not flow.saw("/api/auth/login/ldap")
