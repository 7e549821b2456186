"""Passkeys through the API with a software authenticator: AList's routes and shapes,
and the checks AList leaves out (a challenge kept on the server for one use, bound to
its user; the signature counter; passkeys that survive an update without a password)."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.db.passkey_repo import ChallengeRepo, PasskeyRepo
from manifold.models import Challenge
from tests.conftest import Api, open_api
from tests.fixtures.authenticator import SoftAuthenticator, b64url
from tests.state.conftest import instances

ORIGIN = "http://manifold.test"
EXPIRED = "passkey request expired or already used, please try again"
AUTHN = "/api/authn/"


async def enable(api: Api, on: bool = True) -> None:
    admin = await api.login()
    body = [{"key": "webauthn_login_enabled", "value": "true" if on else "false"}]
    assert (await api.post("/api/admin/setting/save", body, token=admin))["code"] == 200


async def register(api: Api, token: str, device: SoftAuthenticator) -> dict[str, Any]:
    begun = await api.get(AUTHN + "webauthn_begin_registration", token=token)
    assert begun["code"] == 200, begun
    answer = device.create(begun["data"]["options"])
    session = begun["data"]["session"]
    return await finish_registration(api, token, session, answer)


async def finish_registration(
    api: Api, token: str, session: str, answer: dict[str, Any]
) -> dict[str, Any]:
    path = AUTHN + "webauthn_finish_registration"
    return await api.post(path, answer, token=token, headers={"session": session})


async def begin_login(api: Api, username: str = "") -> dict[str, Any]:
    body = await api.get(AUTHN + "webauthn_begin_login", params={"username": username}, token="")
    assert body["code"] == 200, body
    data: dict[str, Any] = body["data"]
    return data


async def finish_login(
    api: Api, session: str, answer: dict[str, Any], username: str = ""
) -> dict[str, Any]:
    return await api.post(
        AUTHN + "webauthn_finish_login",
        answer,
        params={"username": username},
        headers={"session": session},
        token="",
    )


async def passkey_login(
    api: Api, device: SoftAuthenticator, username: str = "", counter_step: int = 1
) -> dict[str, Any]:
    begun = await begin_login(api, username)
    answer = device.get(begun["options"], counter_step=counter_step)
    return await finish_login(api, begun["session"], answer, username)


async def whoami(api: Api, token: str) -> str:
    body = await api.get("/api/me", token=token)
    assert body["code"] == 200, body
    return str(body["data"]["username"])


@pytest.fixture
async def alice(api: Api) -> tuple[str, SoftAuthenticator]:
    """Passkeys turned on, and a user ``alice`` with one passkey; her token."""
    await enable(api)
    await api.make_user("alice", "alice-pw", base_path="/", permission=0)
    token = await api.login("alice", "alice-pw")
    device = SoftAuthenticator(ORIGIN)
    assert await register(api, token, device) == {
        "code": 200, "message": "success", "data": "Registered Successfully",
    }  # fmt: skip
    return token, device


async def test_everything_is_refused_until_the_setting_turns_passkeys_on(api: Api) -> None:
    token = await api.login()
    for answer in (
        await api.get(AUTHN + "webauthn_begin_registration", token=token),
        await api.post(AUTHN + "webauthn_finish_registration", {}, token=token),
        await api.get(AUTHN + "webauthn_begin_login", token=""),
        await api.post(AUTHN + "webauthn_finish_login", {}, token=""),
    ):
        assert (answer["code"], answer["message"]) == (403, "WebAuthn is not enabled")


async def test_register_then_log_in_by_name_and_without_one(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    _, device = alice
    begun = await begin_login(api, "alice")
    public = begun["options"]["publicKey"]
    assert public["rpId"] == "manifold.test"
    assert [c["id"] for c in public["allowCredentials"]] == [b64url(device.credentials[0].id)]
    answer = await finish_login(api, begun["session"], device.get(begun["options"]), "alice")
    assert answer["code"] == 200, answer
    assert await whoami(api, answer["data"]["token"]) == "alice"
    # A discoverable login: the authenticator says whose passkey it is.
    answer = await passkey_login(api, device)
    assert answer["code"] == 200, answer
    assert await whoami(api, answer["data"]["token"]) == "alice"


async def test_registration_options_name_the_site_and_the_user(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    token, device = alice
    begun = await api.get(AUTHN + "webauthn_begin_registration", token=token)
    public = begun["data"]["options"]["publicKey"]
    assert public["rp"] == {"id": "manifold.test", "name": "Manifold"}
    user_id = (await api.get("/api/me", token=token))["data"]["id"]
    # AList's user handle: the id as 8 little-endian bytes.
    assert public["user"]["id"] == b64url(user_id.to_bytes(8, "little"))
    assert public["user"]["name"] == "alice"
    # The passkey she has is excluded, so an authenticator does not make a second one.
    assert [c["id"] for c in public["excludeCredentials"]] == [b64url(device.credentials[0].id)]


async def test_a_host_that_is_no_host_name_is_a_bad_request(api: Api) -> None:
    await enable(api)
    token = await api.login()
    for route in ("webauthn_begin_registration", "webauthn_begin_login"):
        answer = await api.get(AUTHN + route, token=token, headers={"Host": "[]"})
        assert (answer["code"], answer["message"]) == (400, "invalid host"), route


async def test_site_url_names_the_relying_party(api: Api) -> None:
    api.services.config.site_url = "https://files.example.com/manifold"
    await enable(api)
    token = await api.login()
    device = SoftAuthenticator("https://files.example.com")
    assert (await register(api, token, device))["code"] == 200
    assert device.credentials[0].rp_id == "files.example.com"
    answer = await passkey_login(api, device, "admin")
    assert answer["code"] == 200, answer


async def test_credentials_are_listed_as_alist_lists_them_and_deleted_by_id(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    token, device = alice
    listed = await api.get(AUTHN + "getcredentials", token=token)
    credential_id = base64.b64encode(device.credentials[0].id).decode()
    fingerprint = "6F 3A 1B 2C 0D 4E 4F 50 8A 6B 7C 8D 9E 0F 1A 2B"
    assert listed["data"] == [{"id": credential_id, "fingerprint": fingerprint}]
    # Another user can neither see nor delete it.
    admin = await api.login()
    assert (await api.get(AUTHN + "getcredentials", token=admin))["data"] == []
    refused = await api.post(AUTHN + "delete_authn", {"id": credential_id}, token=admin)
    assert (refused["code"], refused["message"]) == (400, "passkey not found")
    bad = await api.post(AUTHN + "delete_authn", {"id": "not base64!"}, token=token)
    assert (bad["code"], bad["message"]) == (400, "invalid passkey id")
    deleted = await api.post(AUTHN + "delete_authn", {"id": credential_id}, token=token)
    assert deleted["data"] == "Deleted Successfully"
    assert (await api.get(AUTHN + "getcredentials", token=token))["data"] == []
    # Gone for logging in too, with or without a name.
    begun = await begin_login(api, "alice")
    assert [c["id"] for c in begun["options"]["publicKey"]["allowCredentials"]] != [
        b64url(device.credentials[0].id)
    ]
    begun["options"]["publicKey"]["allowCredentials"] = []
    answer = await finish_login(api, begun["session"], device.get(begun["options"]), "alice")
    assert (answer["code"], answer["message"]) == (400, "passkey not found")
    answer = await passkey_login(api, device)
    assert (answer["code"], answer["message"]) == (400, "passkey not found")


async def test_a_session_is_used_once(api: Api, alice: tuple[str, SoftAuthenticator]) -> None:
    _, device = alice
    begun = await begin_login(api, "alice")
    first = device.get(begun["options"])
    assert (await finish_login(api, begun["session"], first, "alice"))["code"] == 200
    again = await finish_login(api, begun["session"], device.get(begun["options"]), "alice")
    assert (again["code"], again["message"]) == (400, EXPIRED)
    made_up = await finish_login(api, "bm90IGEgc2Vzc2lvbg==", first, "alice")
    assert (made_up["code"], made_up["message"]) == (400, EXPIRED)
    missing = await finish_login(api, "", first, "alice")
    assert (missing["code"], missing["message"]) == (400, EXPIRED)


async def test_an_old_answer_does_not_sign_a_new_challenge(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    _, device = alice
    old = await begin_login(api)
    replayed = device.get(old["options"])
    fresh = await begin_login(api)
    answer = await finish_login(api, fresh["session"], replayed)
    assert answer["code"] == 400
    assert "challenge" in answer["message"]


async def test_a_signature_counter_that_does_not_grow_is_refused(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    _, device = alice
    assert (await passkey_login(api, device, counter_step=5))["code"] == 200
    # A clone of the authenticator, one use behind.
    begun = await begin_login(api)
    answer = await finish_login(
        api, begun["session"], device.get(begun["options"], counter_step=-2)
    )
    assert answer["code"] == 400
    assert "sign count" in answer["message"]
    assert (await passkey_login(api, device, counter_step=3))["code"] == 200


async def test_answers_from_another_origin_or_for_another_purpose_are_refused(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    token, device = alice
    begun = await begin_login(api)
    answer = await finish_login(
        api, begun["session"], device.get(begun["options"], origin="http://evil.test")
    )
    assert answer["code"] == 400
    assert "origin" in answer["message"]
    # A login's session does not finish a registration.
    begun = await begin_login(api)
    other = SoftAuthenticator(ORIGIN)
    options = (await api.get(AUTHN + "webauthn_begin_registration", token=token))["data"]
    answer = await finish_registration(
        api, token, begun["session"], other.create(options["options"])
    )
    assert (answer["code"], answer["message"]) == (400, EXPIRED)


async def test_a_registration_is_finished_only_by_the_user_who_began_it(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    token, _ = alice
    begun = (await api.get(AUTHN + "webauthn_begin_registration", token=token))["data"]
    answer = SoftAuthenticator(ORIGIN).create(begun["options"])
    admin = await api.login()
    stolen = await finish_registration(api, admin, begun["session"], answer)
    assert (stolen["code"], stolen["message"]) == (400, EXPIRED)
    assert (await api.get(AUTHN + "getcredentials", token=admin))["data"] == []


async def test_a_passkey_logs_in_only_its_owner(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    _, device = alice
    admin_device = SoftAuthenticator(ORIGIN)
    assert (await register(api, await api.login(), admin_device))["code"] == 200
    # Options for alice, answered with the admin's passkey.
    begun = await begin_login(api, "alice")
    begun["options"]["publicKey"]["allowCredentials"] = []
    answer = await finish_login(api, begun["session"], admin_device.get(begun["options"]), "alice")
    assert (answer["code"], answer["message"]) == (400, "passkey not found")
    # Alice's passkey with a user handle that names the admin.
    begun = await begin_login(api)
    forged = device.get(begun["options"])
    forged["response"]["userHandle"] = b64url((1).to_bytes(8, "little"))
    answer = await finish_login(api, begun["session"], forged)
    assert (answer["code"], answer["message"]) == (400, "passkey does not belong to this user")


async def test_garbage_answers_get_a_clear_error(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    token, _ = alice
    for answer in ({}, {"id": "x", "rawId": "x", "response": {}}, [1, 2]):
        begun = await begin_login(api)
        result = await finish_login(api, begun["session"], answer)  # type: ignore[arg-type]
        assert result["code"] == 400
        assert result["message"].startswith("passkey login failed"), result
        begun = (await api.get(AUTHN + "webauthn_begin_registration", token=token))["data"]
        result = await finish_registration(api, token, begun["session"], answer)  # type: ignore[arg-type]
        assert result["code"] == 400
        assert result["message"].startswith("passkey registration failed"), result


async def test_an_update_without_a_password_keeps_the_passkeys(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    token, device = alice
    admin = await api.login()
    user_id = (await api.get("/api/me", token=token))["data"]["id"]
    body = {"id": user_id, "username": "alice", "password": "", "base_path": "/docs",
            "role": 0, "permission": 0, "disabled": False}  # fmt: skip
    assert (await api.post("/api/admin/user/update", body, token=admin))["code"] == 200
    profile = {"username": "alice", "password": "", "sso_id": ""}
    assert (await api.post("/api/me/update", profile, token=token))["code"] == 200
    assert len((await api.get(AUTHN + "getcredentials", token=token))["data"]) == 1
    assert (await passkey_login(api, device, "alice"))["code"] == 200


async def test_a_disabled_user_cannot_log_in_with_a_passkey(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    token, device = alice
    admin = await api.login()
    user_id = (await api.get("/api/me", token=token))["data"]["id"]
    body = {"id": user_id, "username": "alice", "base_path": "/", "role": 0, "permission": 0,
            "disabled": True}  # fmt: skip
    assert (await api.post("/api/admin/user/update", body, token=admin))["code"] == 200
    answer = await passkey_login(api, device)
    assert (answer["code"], answer["message"]) == (403, "Current user is disabled, replace please")


async def test_a_deleted_users_passkeys_go_with_it(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    token, device = alice
    admin = await api.login()
    user_id = (await api.get("/api/me", token=token))["data"]["id"]
    deleted = await api.post("/api/admin/user/delete", params={"id": user_id}, token=admin)
    assert deleted["code"] == 200
    assert await PasskeyRepo(api.services.engine).for_user(user_id) == []
    answer = await passkey_login(api, device)
    assert (answer["code"], answer["message"]) == (400, "passkey not found")


async def test_guests_and_strangers_cannot_register(api: Api) -> None:
    await enable(api)
    answer = await api.get(AUTHN + "webauthn_begin_registration", token="")
    assert (answer["code"], answer["message"]) == (401, "Guest user is disabled, login please")


def shape(value: Any) -> Any:
    """``value`` with every string, number and flag replaced by its type's name."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


async def test_a_login_for_a_name_does_not_tell_whether_the_name_is_a_users(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    """alice has a passkey, the admin has none, nobody does not exist: the three
    answers look alike, and each ceremony, answered with alice's passkey, ends alike."""
    _, device = alice
    answers = {}
    for name in ("alice", "admin", "nobody"):
        answer = await api.get(AUTHN + "webauthn_begin_login", params={"username": name})
        assert (answer["code"], answer["message"]) == (200, "success"), name
        answers[name] = answer
    assert shape(answers["admin"]) == shape(answers["alice"])
    assert shape(answers["nobody"]) == shape(answers["alice"])
    # A name's decoy stays the same, as a real passkey's id does.
    again = await begin_login(api, "nobody")
    public = answers["nobody"]["data"]["options"]["publicKey"]
    assert again["options"]["publicKey"]["allowCredentials"] == public["allowCredentials"]
    ends = set()
    for name in ("admin", "nobody"):
        begun = await begin_login(api, name)
        begun["options"]["publicKey"]["allowCredentials"] = []
        answer = await finish_login(api, begun["session"], device.get(begun["options"]), name)
        ends.add((answer["code"], answer["message"]))
    assert ends == {(400, "passkey not found")}


async def test_one_clients_flood_of_logins_leaves_others_room(
    api: Api, alice: tuple[str, SoftAuthenticator]
) -> None:
    token, device = alice
    refused = None
    for _ in range(200):
        answer = await api.get(AUTHN + "webauthn_begin_login", token="")
        if answer["code"] != 200:
            refused = answer
            break
    assert refused is not None, "200 unfinished ceremonies from one address"
    assert refused["code"] == 429
    # The flooding address may still register a passkey once signed in.
    begun = await api.get(AUTHN + "webauthn_begin_registration", token=token)
    assert begun["code"] == 200, begun
    # Another address logs in.
    async with open_api(api.services, address="198.51.100.20") as other:
        answer = await passkey_login(other, device, "alice")
        assert answer["code"] == 200, answer
    # Behind a trusted proxy each forwarded client counts on its own.
    api.services.config.trusted_proxies = ["203.0.113.7"]
    forwarded = {"X-Forwarded-For": "192.0.2.55"}
    answer = await api.get(AUTHN + "webauthn_begin_login", token="", headers=forwarded)
    assert answer["code"] == 200, answer


async def test_a_challenge_expires(services: Services) -> None:
    store = ChallengeRepo(services.engine)
    now = time.time()
    challenge = Challenge("login", 0, b"c" * 32, "h", "http://h", now + 300, "addr:192.0.2.1")
    assert await store.put("s1", challenge, now, per_owner=2, per_pool=2)
    assert await store.take("s1", now + 301) is None
    assert await store.put("s2", challenge, now, per_owner=2, per_pool=2)
    taken = await store.take("s2", now + 1)
    assert taken is not None and taken.challenge == b"c" * 32
    assert await store.take("s2", now + 1) is None


async def test_unfinished_challenges_are_kept_up_to_a_limit(services: Services) -> None:
    store = ChallengeRepo(services.engine)
    now = time.time()
    anonymous = Challenge("login", 0, b"c" * 32, "h", "http://h", now + 300, "addr:192.0.2.1")
    limits = {"per_owner": 2, "per_pool": 3}
    assert await store.put("a", anonymous, now, **limits)
    assert await store.put("b", anonymous, now, **limits)
    # The owner has as many as allowed; another owner has room, until the pool is full.
    assert not await store.put("c", anonymous, now, **limits)
    assert await store.take("c", now) is None
    other = replace(anonymous, owner="addr:192.0.2.2")
    assert await store.put("d", other, now, **limits)
    assert not await store.put("e", replace(other, owner="addr:192.0.2.3"), now, **limits)
    # A full pool of logins that name nobody leaves room for those that name a user,
    # and for registrations.
    named = replace(anonymous, user_id=7, owner="addr:192.0.2.3")
    assert await store.put("f", named, now, **limits)
    assert await store.put("g", replace(named, purpose="register", owner="user:7"), now, **limits)
    # Expired ones make room.
    assert await store.put("h", anonymous, now + 301, **limits)


@pytest.fixture
async def two(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[Api]]:
    """Two instances on one database, as behind a load balancer."""
    async with AsyncExitStack() as stack:
        made = await stack.enter_async_context(instances(request, tmp_path))
        yield [await stack.enter_async_context(open_api(services)) for services in made]


async def test_a_ceremony_begun_on_one_instance_finishes_on_another(two: list[Api]) -> None:
    one, other = two
    await enable(one)
    await other.services.settings.start()  # reload the setting rather than wait for the bus
    token = await one.login()
    device = SoftAuthenticator(ORIGIN)
    begun = (await one.get(AUTHN + "webauthn_begin_registration", token=token))["data"]
    answer = device.create(begun["options"])
    assert (await finish_registration(other, token, begun["session"], answer))["code"] == 200
    begun_login = await begin_login(other)
    answer = await finish_login(one, begun_login["session"], device.get(begun_login["options"]))
    assert answer["code"] == 200, answer
    assert await whoami(other, answer["data"]["token"]) == "admin"
