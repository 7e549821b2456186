"""Single sign-on against a real OpenID Connect provider: sign-in and auto-registration,
binding an identity from the profile, and the flow's defences (state bound to the
browser, one use, a binding only through this browser's own ticket)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from manifold.services.auth.sso import BIND_COOKIE, FLOW_COOKIE
from tests.conftest import Api, open_api, start_services
from tests.fixtures.oidcprovider import CLIENT_ID, CLIENT_SECRET, Provider, sign_in, start_provider
from tests.state.conftest import instances

SITE = "http://manifold.test"
BAD_STATE = "incorrect or expired state parameter"
REBIND = (
    "the account of this name was connected to single sign-on by name only: sign in "
    "with its password (an admin can set one) and connect it again from the profile"
)
CALLBACK = SITE + "/api/auth/sso_callback?method="


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    uris = [CALLBACK + "sso_get_token", CALLBACK + "get_sso_id", SITE + "/api/auth/sso_get_token"]
    started = start_provider(tmp_path_factory.mktemp("oidc"), uris)
    yield started
    started.daemon.stop()


@pytest.fixture
async def sso(tmp_path: Path, provider: Provider) -> AsyncIterator[Api]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.json").write_text(json.dumps({"site_url": SITE}))
    services = await start_services(data)
    try:
        async with open_api(services) as api:
            await api.as_admin()
            await configure(api, provider, sso_auto_register="true", sso_default_dir="/team")
            yield api
    finally:
        await services.stop()


@pytest.fixture
async def two(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[Api]]:
    """Two instances on one database, as behind a load balancer."""
    async with AsyncExitStack() as stack:
        site = {"MANIFOLD_SITE_URL": SITE}
        made = await stack.enter_async_context(instances(request, tmp_path, site))
        yield [await stack.enter_async_context(open_api(services)) for services in made]


async def configure(api: Api, provider: Provider, **extra: str) -> None:
    values = {
        "sso_login_enabled": "true",
        "sso_login_platform": "OIDC",
        "sso_client_id": CLIENT_ID,
        "sso_client_secret": CLIENT_SECRET,
        "sso_endpoint_name": provider.issuer,
        "sso_default_permission": "1",
        **extra,
    }
    body = [{"key": k, "value": v} for k, v in values.items()]
    assert (await api.post("/api/admin/setting/save", body))["code"] == 200


async def start_flow(api: Api, method: str) -> tuple[str, str]:
    """The provider URL the browser is sent to, and the flow cookie it is given."""
    response = await api.client.get("/api/auth/sso", params={"method": method})
    assert response.status_code == 302, response.text
    return response.headers["location"], response.cookies[FLOW_COOKIE]


async def come_back(api: Api, back: str, flow: str) -> tuple[int, str, dict[str, str]]:
    """The callback as the browser makes it: status, body, cookies set."""
    path = back.removeprefix(SITE)
    api.client.cookies.clear()
    headers = {"Cookie": f"{FLOW_COOKIE}={flow}"} if flow else {}
    response = await api.client.get(path, headers=headers)
    return response.status_code, response.text, dict(response.cookies)


def posted(page: str) -> tuple[dict[str, str], str]:
    """What the popup's page posts to its opener, and to which origin."""
    found = re.search(r"postMessage\((\{.*?\}), (\"[^\"]*\")\)", page)
    assert found, page
    return json.loads(found.group(1)), json.loads(found.group(2))


async def sso_token(api: Api, login: str) -> str:
    url, flow = await start_flow(api, "sso_get_token")
    status, page, _ = await come_back(api, sign_in(url, login, SITE), flow)
    assert status == 200, page
    message, origin = posted(page)
    assert origin == SITE
    return message["token"]


async def test_authorize_request_carries_state_nonce_and_pkce(sso: Api, provider: Provider) -> None:
    url, _ = await start_flow(sso, "sso_get_token")
    query = parse_qs(urlsplit(url).query)
    assert url.startswith(provider.issuer + "/auth?")
    assert query["redirect_uri"] == [CALLBACK + "sso_get_token"]
    assert query["code_challenge_method"] == ["S256"]
    assert set(query) >= {"state", "nonce", "code_challenge", "client_id", "scope"}
    assert query["scope"] == ["openid profile"]


async def test_sign_in_registers_a_new_user_with_the_defaults(sso: Api) -> None:
    token = await sso_token(sso, "alice")
    me = (await sso.get("/api/me", token=token))["data"]
    # The account is bound to the provider's subject; the name claim only named it.
    assert (me["username"], me["sso_id"], me["base_path"], me["permission"]) == (
        "alice",
        "alice",
        "/team",
        1,
    )
    # A second sign-in finds the same user rather than making another.
    again = await sso_token(sso, "alice")
    assert (await sso.get("/api/me", token=again))["data"]["id"] == me["id"]


async def test_another_account_of_the_same_name_is_not_the_first(sso: Api) -> None:
    """alice and alice~2 are two accounts at the provider, both with the name claim
    alice: the second is not signed in as the first."""
    first = (await sso.get("/api/me", token=await sso_token(sso, "alice")))["data"]
    second = (await sso.get("/api/me", token=await sso_token(sso, "alice~2")))["data"]
    assert second["id"] != first["id"]
    assert (second["username"], second["sso_id"]) == ("alice_alice~2", "alice~2")
    # Each keeps its own account.
    again = (await sso.get("/api/me", token=await sso_token(sso, "alice")))["data"]
    assert again["id"] == first["id"]


async def test_a_name_twin_of_the_admins_identity_is_not_the_admin(
    sso: Api, provider: Provider
) -> None:
    await configure(sso, provider, sso_auto_register="false")
    admin = await sso.login()
    url, flow = await start_flow(sso, "get_sso_id")
    _, page, cookies = await come_back(sso, sign_in(url, "boss", SITE), flow)
    body = {"username": "admin", "password": "", "sso_id": posted(page)[0]["sso_id"]}
    done = await sso.post("/api/me/update", body, token=admin, headers=_cookie(cookies))
    assert done["code"] == 200, done
    assert (await sso.get("/api/me", token=await sso_token(sso, "boss")))["data"]["id"] == 1
    # boss~other carries the name claim boss too: no account of theirs, no way in.
    url, flow = await start_flow(sso, "sso_get_token")
    _, page, _ = await come_back(sso, sign_in(url, "boss~other", SITE), flow)
    assert json.loads(page) == {
        "code": 400, "message": "failed find user: record not found", "data": None,
    }  # fmt: skip


async def test_a_binding_made_by_name_is_refused_until_connected_again(sso: Api) -> None:
    """An ``sso_id`` stored before bindings had a subject (here set by the admin, as an
    older version or an import from AList leaves it) holds a name claim: whoever
    signs in with that name is refused, the account's owner too, and no account is
    made, until the owner connects the account from the profile."""
    user_id = await sso.make_user("olga", "pw-olga-1")
    old = {"id": user_id, "username": "olga", "password": "", "base_path": "/", "role": 0,
           "permission": 0, "disabled": False, "sso_id": "olga"}  # fmt: skip
    assert (await sso.post("/api/admin/user/update", old))["code"] == 200
    for login in ("olga", "olga~stranger"):
        url, flow = await start_flow(sso, "sso_get_token")
        _, page, _ = await come_back(sso, sign_in(url, login, SITE), flow)
        assert json.loads(page) == {"code": 400, "message": REBIND, "data": None}, login
    listing = await sso.get("/api/admin/user/list")
    assert sorted(u["username"] for u in listing["data"]["content"]) == ["admin", "guest", "olga"]
    # Connected again from the profile, the owner's subject opens the account.
    olga = await sso.login("olga", "pw-olga-1")
    url, flow = await start_flow(sso, "get_sso_id")
    _, page, cookies = await come_back(sso, sign_in(url, "olga", SITE), flow)
    body = {"username": "olga", "password": "", "sso_id": posted(page)[0]["sso_id"]}
    assert (await sso.post("/api/me/update", body, token=olga, headers=_cookie(cookies)))[
        "code"
    ] == 200
    assert (await sso.get("/api/me", token=await sso_token(sso, "olga")))["data"]["id"] == user_id


async def test_a_taken_name_gets_the_identity_appended(sso: Api) -> None:
    await sso.make_user("erin", "pw-erin-1")
    token = await sso_token(sso, "erin")
    assert (await sso.get("/api/me", token=token))["data"]["username"] == "erin_erin"


async def test_unknown_identity_without_auto_register_is_refused(
    sso: Api, provider: Provider
) -> None:
    await configure(sso, provider, sso_auto_register="false")
    url, flow = await start_flow(sso, "sso_get_token")
    status, page, _ = await come_back(sso, sign_in(url, "mallory", SITE), flow)
    assert (status, json.loads(page)["message"]) == (200, "failed find user: record not found")


async def test_callback_in_another_browser_is_refused(sso: Api) -> None:
    url, _ = await start_flow(sso, "sso_get_token")
    back = sign_in(url, "alice", SITE)
    # The callback URL alone (sent to someone else, or forged) carries no flow.
    _, page, _ = await come_back(sso, back, "")
    assert json.loads(page) == {
        "code": 400,
        "message": "incorrect or expired state parameter",
        "data": None,
    }
    # Nor does another flow's cookie.
    _, other = await start_flow(sso, "sso_get_token")
    _, page, _ = await come_back(sso, back, other)
    assert json.loads(page)["message"] == "incorrect or expired state parameter"


async def test_callback_clears_the_flow_and_a_code_works_once(sso: Api) -> None:
    url, flow = await start_flow(sso, "sso_get_token")
    back = sign_in(url, "alice", SITE)
    path = back.removeprefix(SITE)
    sso.client.cookies.clear()
    response = await sso.client.get(path, headers={"Cookie": f"{FLOW_COOKIE}={flow}"})
    assert posted(response.text)[0]["token"]
    assert FLOW_COOKIE in response.headers["set-cookie"] and "Max-Age=0" in response.headers[
        "set-cookie"
    ].replace("max-age", "Max-Age")
    # Replaying the same callback with the old cookie: this server knows the flow is used.
    _, page, _ = await come_back(sso, back, flow)
    assert json.loads(page) == {"code": 400, "message": BAD_STATE, "data": None}


async def test_a_flow_is_used_once_even_with_a_fresh_code(sso: Api) -> None:
    """The provider gives a second code for the same authorization request (same state);
    with a copy of the flow cookie it would be a second sign-in."""
    url, flow = await start_flow(sso, "sso_get_token")
    status, page, _ = await come_back(sso, sign_in(url, "alice", SITE), flow)
    assert status == 200 and posted(page)[0]["token"]
    again = sign_in(url, "alice", SITE)
    _, page, _ = await come_back(sso, again, flow)
    assert json.loads(page) == {"code": 400, "message": BAD_STATE, "data": None}


async def test_a_flow_used_on_one_instance_is_refused_on_another(
    two: list[Api], provider: Provider
) -> None:
    one, other = two
    await configure(await one.as_admin(), provider, sso_auto_register="true")
    await other.services.settings.start()  # reload the settings rather than wait for the bus
    url, flow = await start_flow(one, "sso_get_token")
    back = sign_in(url, "alice", SITE)
    status, page, _ = await come_back(one, back, flow)
    assert status == 200 and posted(page)[0]["token"]
    # The same callback on the other instance, with a fresh code for the same state.
    _, page, _ = await come_back(other, sign_in(url, "alice", SITE), flow)
    assert json.loads(page) == {"code": 400, "message": BAD_STATE, "data": None}


async def test_method_must_match_the_flow(sso: Api) -> None:
    url, flow = await start_flow(sso, "get_sso_id")
    back = sign_in(url, "alice", SITE).replace("get_sso_id", "sso_get_token")
    _, page, _ = await come_back(sso, back, flow)
    assert json.loads(page)["message"] == "incorrect or expired state parameter"


async def test_bind_an_identity_from_the_profile(sso: Api) -> None:
    await sso.make_user("bob", "pw-bob-1")
    bob = await sso.login("bob", "pw-bob-1")
    url, flow = await start_flow(sso, "get_sso_id")
    status, page, cookies = await come_back(sso, sign_in(url, "carol", SITE), flow)
    assert status == 200, page
    ticket = posted(page)[0]["sso_id"]
    body = {"username": "bob", "password": "", "sso_id": ticket}
    sso.client.cookies.clear()
    # Without this browser's cookie the ticket binds nothing.
    refused = await sso.post("/api/me/update", body, token=bob)
    assert (refused["code"], refused["message"]) == (
        400,
        "the single sign-on connection was made in another browser",
    )
    done = await sso.post("/api/me/update", body, token=bob, headers=_cookie(cookies))
    assert done["code"] == 200, done
    assert (await sso.get("/api/me", token=bob))["data"]["sso_id"] == "carol"
    # Signing in as carol now opens bob's account.
    token = await sso_token(sso, "carol")
    assert (await sso.get("/api/me", token=token))["data"]["username"] == "bob"
    # Saving the profile again (the page sends what it holds) keeps the binding.
    kept = await sso.post("/api/me/update", body, token=bob)
    assert kept["code"] == 200
    assert (await sso.get("/api/me", token=bob))["data"]["sso_id"] == "carol"


async def test_saving_a_user_keeps_the_binding_unless_the_id_changes(sso: Api) -> None:
    token = await sso_token(sso, "ivan")
    me = (await sso.get("/api/me", token=token))["data"]
    # The user editor and the profile page send back the sso_id they were given.
    edited = {**me, "base_path": "/ivan", "password": ""}
    assert (await sso.post("/api/admin/user/update", edited))["code"] == 200
    profile = {"username": "ivan", "password": "", "sso_id": me["sso_id"]}
    assert (await sso.post("/api/me/update", profile, token=token))["code"] == 200
    again = await sso_token(sso, "ivan")
    assert (await sso.get("/api/me", token=again))["data"]["id"] == me["id"]
    # An sso_id the admin types is no provider's subject: it opens nothing.
    typed = {**edited, "sso_id": "ivan2"}
    assert (await sso.post("/api/admin/user/update", typed))["code"] == 200
    url, flow = await start_flow(sso, "sso_get_token")
    _, page, _ = await come_back(sso, sign_in(url, "ivan2", SITE), flow)
    assert json.loads(page) == {"code": 400, "message": REBIND, "data": None}


async def test_a_plain_sso_id_cannot_be_claimed(sso: Api) -> None:
    await sso.make_user("eve", "pw-eve-1")
    eve = await sso.login("eve", "pw-eve-1")
    answer = await sso.post(
        "/api/me/update", {"username": "eve", "password": "", "sso_id": "alice"}, token=eve
    )
    assert (answer["code"], answer["message"]) == (
        400,
        "sso_id can only be set by connecting through single sign-on",
    )
    # Clearing one's own binding needs nothing.
    cleared = await sso.post(
        "/api/me/update", {"username": "eve", "password": "", "sso_id": ""}, token=eve
    )
    assert cleared["code"] == 200


async def test_an_identity_bound_to_someone_else_is_not_taken(sso: Api) -> None:
    await sso_token(sso, "frank")  # registers frank, bound to "frank"
    await sso.make_user("gina", "pw-gina-1")
    gina = await sso.login("gina", "pw-gina-1")
    url, flow = await start_flow(sso, "get_sso_id")
    _, page, cookies = await come_back(sso, sign_in(url, "frank", SITE), flow)
    body = {"username": "gina", "password": "", "sso_id": posted(page)[0]["sso_id"]}
    answer = await sso.post("/api/me/update", body, token=gina, headers=_cookie(cookies))
    assert answer["message"] == "this single sign-on account is connected to another user"


async def test_disabled_user_gets_no_token(sso: Api) -> None:
    token = await sso_token(sso, "henry")
    me = (await sso.get("/api/me", token=token))["data"]
    update = {**me, "disabled": True, "password": ""}
    assert (await sso.post("/api/admin/user/update", update))["code"] == 200
    url, flow = await start_flow(sso, "sso_get_token")
    _, page, _ = await come_back(sso, sign_in(url, "henry", SITE), flow)
    assert json.loads(page)["code"] == 403


async def test_compatibility_mode_redirects_to_the_login_page(sso: Api, provider: Provider) -> None:
    await configure(sso, provider, sso_compatibility_mode="true")
    url, flow = await start_flow(sso, "sso_get_token")
    assert parse_qs(urlsplit(url).query)["redirect_uri"] == [SITE + "/api/auth/sso_get_token"]
    back = sign_in(url, "alice", SITE)
    sso.client.cookies.clear()
    cookie = {"Cookie": f"{FLOW_COOKIE}={flow}"}
    response = await sso.client.get(back.removeprefix(SITE), headers=cookie)
    assert response.status_code == 302
    assert response.headers["location"].startswith(SITE + "/@login?token=")


async def test_flow_refused_when_off_or_misconfigured(sso: Api, provider: Provider) -> None:
    answer = await sso.get("/api/auth/sso", params={"method": ""})
    assert (answer["code"], answer["message"]) == (400, "no method provided")
    await configure(sso, provider, sso_endpoint_name="http://127.0.0.1:1")
    answer = await sso.get("/api/auth/sso", params={"method": "sso_get_token"})
    assert answer["code"] == 400
    await configure(sso, provider, sso_login_enabled="false")
    answer = await sso.get("/api/auth/sso", params={"method": "sso_get_token"})
    assert (answer["code"], answer["message"]) == (403, "Single sign-on is not enabled")
    answer = await sso.get("/api/auth/sso_callback", params={"method": "sso_get_token"})
    assert (answer["code"], answer["message"]) == (500, "sso login is disabled")


async def test_no_site_url_no_flow(api: Api, provider: Provider) -> None:
    await api.as_admin()
    await configure(api, provider)
    answer = await api.get("/api/auth/sso", params={"method": "sso_get_token"})
    assert answer["code"] == 400
    assert "site_url" in answer["message"]


def _cookie(cookies: dict[str, str]) -> dict[str, str]:
    return {"Cookie": f"{BIND_COOKIE}={cookies[BIND_COOKIE]}"}
