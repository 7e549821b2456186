"""``POST /api/auth/login/ldap`` against a real OpenLDAP slapd: logins, the account
made for a new directory user, refusals, filter injection, the shared lock-out, and
LDAPS and StartTLS with the certificate verified."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyotp
import pytest

from manifold.services.auth.ldap import user_filter
from tests.conftest import Api
from tests.fixtures import ldapserver
from tests.fixtures.ldapserver import GROUP_DN, MANAGER_PASSWORD, USERS, LdapServer
from tests.fixtures.processes import free_port

pytestmark = pytest.mark.skipif(not ldapserver.available(), reason="slapd is not installed")

DISABLED = "Current user is disabled, replace please"
NOT_FOUND = "failed find user in LDAP: no entry matches the username"
SPELLING = "failed find user in LDAP: give the username as the directory spells it"
LOCKED = (
    "Too many unsuccessful sign-in attempts have been made using an incorrect "
    "username or password, Try again later."
)


@pytest.fixture(scope="module")
def slapd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LdapServer]:
    server = ldapserver.start(tmp_path_factory.mktemp("slapd"))
    yield server
    server.stop()


async def configure(api: Api, slapd: LdapServer, **changes: str) -> None:
    admin = await api.login()
    body = await api.post("/api/admin/setting/save", slapd.settings(**changes), token=admin)
    assert body["code"] == 200, body


async def ldap_login(api: Api, username: str, password: str, **extra: Any) -> dict[str, Any]:
    body = {"username": username, "password": password, **extra}
    return await api.post("/api/auth/login/ldap", body, token="")


async def users(api: Api) -> dict[str, dict[str, Any]]:
    listing = await api.get("/api/admin/user/list", token=await api.login())
    return {user["username"]: user for user in listing["data"]["content"]}


async def test_off_by_default(api: Api, slapd: LdapServer) -> None:
    body = await ldap_login(api, "alice", USERS["alice"])
    assert body == {"code": 403, "message": "ldap is not enabled", "data": None}


async def test_a_new_directory_user_gets_an_account_with_the_defaults(
    api: Api, slapd: LdapServer
) -> None:
    await configure(api, slapd, ldap_default_dir="/teams/alice", ldap_default_permission="3")
    body = await ldap_login(api, "alice", USERS["alice"])
    assert body["code"] == 200, body
    me = (await api.get("/api/me", token=body["data"]["token"]))["data"]
    assert (me["username"], me["base_path"], me["permission"], me["role"]) == (
        "alice", "/teams/alice", 3, 0
    )  # fmt: skip
    made = (await users(api))["alice"]
    # The second login is the same account, not another.
    again = await ldap_login(api, "alice", USERS["alice"])
    assert again["code"] == 200
    assert (await api.get("/api/me", token=again["data"]["token"]))["data"]["id"] == made["id"]
    # Its random password is nobody's: the password login does not open it.
    assert (await api.post("/api/auth/login", {"username": "alice", "password": ""}))["code"] == 400


async def test_an_existing_local_user_logs_in_as_themself(api: Api, slapd: LdapServer) -> None:
    await configure(api, slapd, ldap_default_dir="/elsewhere")
    user_id = await api.make_user("bob", "local-pw", base_path="/bob", permission=8)
    body = await ldap_login(api, "bob", USERS["bob"])
    assert body["code"] == 200, body
    me = (await api.get("/api/me", token=body["data"]["token"]))["data"]
    assert (me["id"], me["base_path"], me["permission"]) == (user_id, "/bob", 8)


async def test_wrong_empty_and_unknown_are_refused_and_make_no_account(
    api: Api, slapd: LdapServer
) -> None:
    await configure(api, slapd)
    wrong = await ldap_login(api, "carol", "not-carols")
    assert wrong == {"code": 400, "message": "password is incorrect", "data": None}
    # An empty password would be an anonymous bind, which slapd accepts.
    empty = await ldap_login(api, "carol", "")
    assert empty == {"code": 400, "message": "password is empty", "data": None}
    unknown = await ldap_login(api, "mallory", "x")
    assert unknown == {"code": 400, "message": NOT_FOUND, "data": None}
    nameless = await ldap_login(api, "", "x")
    assert (nameless["code"], nameless["message"]) == (400, "username is empty")
    assert not {"carol", "mallory", ""} & set(await users(api))


@pytest.mark.parametrize(
    "username",
    ["*", "a*", "*)(uid=*", "alice)(uid=*", ")(", "(", "\\", "alice\\", "alice\x00",
     "\x00", "*)(|(objectClass=*", "twin)(ou=people"],
)  # fmt: skip
async def test_filter_characters_in_a_username_are_matched_literally(
    api: Api, slapd: LdapServer, username: str
) -> None:
    await configure(api, slapd)
    for password in ("x", USERS["alice"], MANAGER_PASSWORD):
        body = await ldap_login(api, username, password)
        assert (body["code"], body["message"]) == (400, NOT_FOUND), (username, body)


def test_the_filter_value_is_escaped_as_rfc_4515_says() -> None:
    template = "(&(objectClass=person)(|(uid=%s)(mail=%s)))"
    assert user_filter(template, "a*b(c)\\\x00") == (
        "(&(objectClass=person)(|(uid=a\\2ab\\28c\\29\\5c\\00)(mail=a\\2ab\\28c\\29\\5c\\00)))"
    )


async def test_a_name_with_a_filter_character_logs_in(api: Api, slapd: LdapServer) -> None:
    await configure(api, slapd)
    body = await ldap_login(api, "o*brien", USERS["o*brien"])
    assert body["code"] == 200, body
    assert "o*brien" in await users(api)


@pytest.mark.parametrize("username", ["CAROL", "Carol", " carol", "carol "])
async def test_a_name_the_directory_matches_loosely_is_refused(
    api: Api, slapd: LdapServer, username: str
) -> None:
    await configure(api, slapd)
    # A local account of that spelling is someone else's, whom carol must not reach.
    await api.make_user(username, "local-pw")
    body = await ldap_login(api, username, USERS["carol"])
    assert (body["code"], body["message"]) == (400, SPELLING), body


async def test_a_value_of_another_attribute_is_no_login_name(api: Api, slapd: LdapServer) -> None:
    """dave's entry has ``cn: Dave``; the filter compares ``uid`` only, so ``Dave`` is
    no spelling of his login name, and the local ``Dave`` stays out of his reach."""
    await configure(api, slapd)
    await api.make_user("Dave", "local-pw")
    body = await ldap_login(api, "Dave", USERS["dave"])
    assert (body["code"], body["message"]) == (400, SPELLING), body
    # Where the filter compares cn as well, Dave is a name the entry holds.
    await configure(api, slapd, ldap_user_search_filter="(|(uid=%s)(cn=%s))")
    body = await ldap_login(api, "Dave", USERS["dave"])
    assert body["code"] == 200, body
    # A filter that never compares the username leaves no login name to check.
    await configure(api, slapd, ldap_user_search_filter="(uid=dave)")
    body = await ldap_login(api, "dave", USERS["dave"])
    assert body["code"] == 500
    assert body["message"].startswith("ldap_user_search_filter must compare"), body


async def test_a_name_found_twice_answers_a_clear_error(api: Api, slapd: LdapServer) -> None:
    await configure(api, slapd)
    body = await ldap_login(api, "twin", USERS["twin"])
    assert body == {
        "code": 500,
        "message": "LDAP search found 2 entries for this username; "
        "ldap_user_search_filter must match exactly one",
        "data": None,
    }
    # A search base that holds one of them finds one.
    await configure(api, slapd, ldap_user_search_base=ldapserver.PEOPLE)
    assert (await ldap_login(api, "twin", USERS["twin"]))["code"] == 200


async def test_a_group_filter_lets_members_in_only(api: Api, slapd: LdapServer) -> None:
    await configure(api, slapd, ldap_user_search_filter=f"(&(uid=%s)(memberOf={GROUP_DN}))")
    assert (await ldap_login(api, "carol", USERS["carol"]))["code"] == 200
    outsider = await ldap_login(api, "bob", USERS["bob"])
    assert (outsider["code"], outsider["message"]) == (400, NOT_FOUND)


async def test_the_local_admin_and_guest_are_not_reached(api: Api, slapd: LdapServer) -> None:
    await configure(api, slapd)
    body = await ldap_login(api, "admin", USERS["admin"])
    assert body == {"code": 403, "message": "login via ldap is not allowed", "data": None}


async def test_disabled_and_two_factor_users_are_held_as_at_the_password_login(
    api: Api, slapd: LdapServer
) -> None:
    await configure(api, slapd)
    await api.make_user("bob", "local-pw", disabled=True)
    refused = await ldap_login(api, "bob", USERS["bob"])
    assert (refused["code"], refused["message"]) == (
        403,
        "Current user is disabled, replace please",
    )
    await api.make_user("carol", "local-pw")
    carol = await api.login("carol", "local-pw")
    secret = pyotp.random_base32(32)
    verify = {"code": pyotp.TOTP(secret).now(), "secret": secret}
    assert (await api.post("/api/auth/2fa/verify", verify, token=carol))["code"] == 200
    assert (await ldap_login(api, "carol", USERS["carol"]))["code"] == 402
    coded = await ldap_login(api, "carol", USERS["carol"], otp_code=pyotp.TOTP(secret).now())
    assert coded["code"] == 200


async def test_ldap_failures_count_towards_the_shared_lock(api: Api, slapd: LdapServer) -> None:
    await configure(api, slapd)
    for _ in range(5):
        assert (await ldap_login(api, "carol", "wrong"))["code"] == 400
    body = await ldap_login(api, "carol", USERS["carol"])
    assert body == {"code": 429, "message": LOCKED, "data": None}
    # The same lock holds the password login, and the other way round.
    password = await api.post("/api/auth/login", {"username": "carol", "password": "x"})
    assert password["code"] == 429


async def test_password_login_failures_lock_the_ldap_login(api: Api, slapd: LdapServer) -> None:
    await configure(api, slapd)
    for _ in range(5):
        await api.post("/api/auth/login", {"username": "nobody", "password": "x"}, token="")
    assert (await ldap_login(api, "alice", USERS["alice"]))["code"] == 429


async def test_a_refused_manager_or_a_dead_server_says_so_without_secrets(
    api: Api, slapd: LdapServer
) -> None:
    await configure(api, slapd, ldap_manager_password="not-the-managers")
    body = await ldap_login(api, "alice", USERS["alice"])
    assert body == {"code": 500, "message": "failed to bind to LDAP as the manager", "data": None}
    await configure(api, slapd, ldap_server=f"ldap://127.0.0.1:{free_port()}")
    body = await ldap_login(api, "alice", USERS["alice"])
    assert body == {"code": 500, "message": "failed to connect to LDAP", "data": None}


async def test_a_bad_search_filter_setting_is_named(api: Api, slapd: LdapServer) -> None:
    await configure(api, slapd, ldap_user_search_filter="(uid=%s")
    body = await ldap_login(api, "alice", USERS["alice"])
    assert (body["code"], body["message"]) == (
        500, "ldap_user_search_filter is not a valid LDAP filter"
    )  # fmt: skip


UNTRUSTED = "failed to connect to LDAP: certificate verify failed"


@pytest.mark.parametrize("mode", ["ldaps", "starttls"])
async def test_tls_verifies_the_certificate_by_default(
    api: Api, slapd: LdapServer, mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def settings(host: str) -> dict[str, str]:
        if mode == "ldaps":
            return {"ldap_server": slapd.tls_url.replace("127.0.0.1", host)}
        return {"ldap_server": slapd.url.replace("127.0.0.1", host), "ldap_start_tls": "true"}

    # A certificate no authority of this system signed is refused.
    await configure(api, slapd, **settings("127.0.0.1"))
    refused = await ldap_login(api, "alice", USERS["alice"])
    assert (refused["code"], refused["message"]) == (500, UNTRUSTED)
    # Trusted, it is used.
    monkeypatch.setenv("SSL_CERT_FILE", str(slapd.cert))
    body = await ldap_login(api, "alice", USERS["alice"])
    assert body["code"] == 200, body
    # Trusted, but for another name than the one dialled (the certificate is 127.0.0.1's).
    await configure(api, slapd, **settings("localhost"))
    mismatch = await ldap_login(api, "alice", USERS["alice"])
    assert (mismatch["code"], mismatch["message"]) == (500, UNTRUSTED)
