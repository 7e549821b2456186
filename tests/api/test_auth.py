"""Login, lockout, tokens, 2FA and the profile endpoints, as a client sees them."""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jwt
import orjson
import pyotp
import pytest

import manifold.services.auth.users as users_module
from manifold.container import Services
from manifold.services.auth.passwords import static_hash
from tests.conftest import ADMIN_PASSWORD, Api, open_api, start_services

LOCKED = (
    "Too many unsuccessful sign-in attempts have been made using an incorrect "
    "username or password, Try again later."
)
DISABLED = "Current user is disabled, replace please"


async def login(api: Api, username: str, password: str, **extra: Any) -> dict[str, Any]:
    return await api.post(
        "/api/auth/login", {"username": username, "password": password, **extra}, token=""
    )


async def fail_logins(api: Api, times: int, headers: dict[str, str] | None = None) -> None:
    for _ in range(times):
        body = await api.post(
            "/api/auth/login", {"username": "nobody", "password": "x"}, token="", headers=headers
        )
        assert body["code"] == 400, body


async def me(api: Api, token: str) -> dict[str, Any]:
    return await api.get("/api/me", token=token)


async def guest_json(api: Api, admin: str) -> dict[str, Any]:
    listing = await api.get("/api/admin/user/list", token=admin)
    guest: dict[str, Any] = next(u for u in listing["data"]["content"] if u["role"] == 1)
    return guest


async def enable_guest(api: Api) -> None:
    admin = await api.login()
    guest = await guest_json(api, admin)
    body = await api.post("/api/admin/user/update", {**guest, "disabled": False}, token=admin)
    assert body["code"] == 200, body


def wrong_code(secret: str) -> str:
    """A six-digit code that is not valid for ``secret`` in the accepted window."""
    totp = pyotp.TOTP(secret)
    now = time.time()
    valid = {totp.at(now + step * 30) for step in (-2, -1, 0, 1, 2)}
    return next(c for c in (f"{n:06d}" for n in range(1_000_000)) if c not in valid)


# --- static hash and login ---------------------------------------------------------


def test_static_hash_matches_alist_vector() -> None:
    expected = "6fcb57cd10b2c11d765dcf16148d99130afd895082af83725ee8bb181b1d2b0f"
    assert static_hash("admin") == expected


async def test_login_returns_a_working_token(api: Api) -> None:
    body = await login(api, "admin", ADMIN_PASSWORD)
    assert body["code"] == 200
    assert body["message"] == "success"
    assert set(body["data"]) == {"token"}
    assert (await me(api, body["data"]["token"]))["data"]["username"] == "admin"


async def test_login_hash_accepts_the_static_hash(api: Api) -> None:
    body = await api.post(
        "/api/auth/login/hash",
        {"username": "admin", "password": static_hash(ADMIN_PASSWORD)},
    )
    assert body["code"] == 200
    assert (await me(api, body["data"]["token"]))["data"]["username"] == "admin"


async def test_login_hash_refuses_the_plain_password(api: Api) -> None:
    body = await api.post("/api/auth/login/hash", {"username": "admin", "password": ADMIN_PASSWORD})
    assert (body["code"], body["message"]) == (400, "password is incorrect")


async def test_login_hash_refuses_an_upper_case_hash(api: Api) -> None:
    hashed = static_hash(ADMIN_PASSWORD).upper()
    body = await api.post("/api/auth/login/hash", {"username": "admin", "password": hashed})
    assert (body["code"], body["message"]) == (400, "password is incorrect")


async def test_login_unknown_user(api: Api) -> None:
    body = await login(api, "nobody", "whatever")
    assert body == {"code": 400, "message": "failed find user: record not found", "data": None}


async def test_login_wrong_password(api: Api) -> None:
    body = await login(api, "admin", "not-the-password")
    assert body == {"code": 400, "message": "password is incorrect", "data": None}


async def test_login_empty_username(api: Api) -> None:
    body = await login(api, "", ADMIN_PASSWORD)
    assert (body["code"], body["message"]) == (400, "username is empty")


async def test_login_hash_with_empty_password(api: Api) -> None:
    body = await api.post("/api/auth/login/hash", {"username": "admin", "password": ""})
    assert (body["code"], body["message"]) == (400, "password is empty")


async def test_login_without_username_field(api: Api) -> None:
    # Go leaves a missing key at its zero value: the handler sees an empty name.
    body = await api.post("/api/auth/login", {"password": ADMIN_PASSWORD})
    assert (body["code"], body["message"]) == (400, "username is empty")


async def test_login_with_numeric_username(api: Api) -> None:
    body = await api.post("/api/auth/login", {"username": 1, "password": ADMIN_PASSWORD})
    assert (body["code"], body["message"]) == (400, "username: Input should be a valid string")


async def test_login_ignores_unknown_fields(api: Api) -> None:
    body = await login(api, "admin", ADMIN_PASSWORD, remember=True, captcha="x")
    assert body["code"] == 200


async def disable(api: Api, user_id: int) -> None:
    admin = await api.login()
    user = (await api.get("/api/admin/user/get", params={"id": user_id}, token=admin))["data"]
    body = await api.post("/api/admin/user/update", {**user, "disabled": True}, token=admin)
    assert body["code"] == 200, body


async def default_guest(api: Api) -> tuple[str, str]:
    return "guest", "guest"


async def created_disabled(api: Api) -> tuple[str, str]:
    await api.make_user("bob", "bob-pw", disabled=True)
    return "bob", "bob-pw"


async def disabled_later(api: Api) -> tuple[str, str]:
    bob_id = await api.make_user("bob", "bob-pw")
    assert (await login(api, "bob", "bob-pw"))["code"] == 200
    await disable(api, bob_id)
    return "bob", "bob-pw"


DISABLED_USERS = {
    "the default guest": default_guest,
    "created disabled": created_disabled,
    "disabled after a login": disabled_later,
}
LOGIN_FORMS = {
    "plain": lambda name, pw: ("/api/auth/login", {"username": name, "password": pw}),
    "hashed": lambda name, pw: (
        "/api/auth/login/hash",
        {"username": name, "password": static_hash(pw)},
    ),
}


@pytest.mark.parametrize("form", LOGIN_FORMS.values(), ids=LOGIN_FORMS.keys())
@pytest.mark.parametrize("make", DISABLED_USERS.values(), ids=DISABLED_USERS.keys())
async def test_a_disabled_user_gets_no_token(
    api: Api,
    make: Callable[[Api], Awaitable[tuple[str, str]]],
    form: Callable[[str, str], tuple[str, dict[str, str]]],
) -> None:
    path, credentials = form(*await make(api))
    body = await api.post(path, credentials, token="")
    assert body == {
        "code": 403,
        "message": "Current user is disabled, replace please",
        "data": None,
    }


async def test_a_disabled_users_wrong_password_is_just_wrong(api: Api) -> None:
    body = await login(api, "guest", "not-guest")
    assert body == {"code": 400, "message": "password is incorrect", "data": None}


# --- lockout -----------------------------------------------------------------------


async def test_sixth_attempt_is_locked_even_with_the_right_password(api: Api) -> None:
    for _ in range(5):
        assert (await login(api, "admin", "wrong"))["code"] == 400
    body = await login(api, "admin", ADMIN_PASSWORD)
    assert body == {"code": 429, "message": LOCKED, "data": None}


async def test_four_failures_do_not_lock(api: Api) -> None:
    await fail_logins(api, 4)
    assert (await login(api, "admin", ADMIN_PASSWORD))["code"] == 200


async def test_login_hash_shares_the_lock(api: Api) -> None:
    await fail_logins(api, 5)
    hashed = static_hash(ADMIN_PASSWORD)
    body = await api.post("/api/auth/login/hash", {"username": "admin", "password": hashed})
    assert (body["code"], body["message"]) == (429, LOCKED)


async def test_lock_is_per_client_address(api: Api, services: Services) -> None:
    await fail_logins(api, 5)
    async with open_api(services, "198.51.100.9") as other:
        assert (await login(other, "admin", ADMIN_PASSWORD))["code"] == 200
    assert (await login(api, "admin", ADMIN_PASSWORD))["code"] == 429


async def test_forwarded_for_from_untrusted_peer_is_ignored(api: Api) -> None:
    await fail_logins(api, 5, headers={"X-Forwarded-For": "192.0.2.1"})
    spoofed = {"X-Forwarded-For": "192.0.2.99"}
    body = await api.post(
        "/api/auth/login",
        {"username": "admin", "password": ADMIN_PASSWORD},
        headers=spoofed,
    )
    assert (body["code"], body["message"]) == (429, LOCKED)


async def test_forwarded_for_from_trusted_proxy_is_the_key(api: Api, services: Services) -> None:
    services.config.trusted_proxies = ["203.0.113.0/24"]
    await fail_logins(api, 5, headers={"X-Forwarded-For": "192.0.2.1"})
    credentials = {"username": "admin", "password": ADMIN_PASSWORD}
    locked = await api.post(
        "/api/auth/login", credentials, headers={"X-Forwarded-For": "192.0.2.1"}
    )
    assert locked["code"] == 429
    other = await api.post("/api/auth/login", credentials, headers={"X-Forwarded-For": "192.0.2.2"})
    assert other["code"] == 200
    proxy_itself = await api.post("/api/auth/login", credentials)
    assert proxy_itself["code"] == 200


async def test_every_forwarded_for_line_counts_not_only_the_first(
    api: Api, services: Services
) -> None:
    # A proxy that adds its own X-Forwarded-For line below the client's (HAProxy's
    # ``option forwardfor``) must not let the client's line choose the address.
    services.config.trusted_proxies = ["203.0.113.0/24"]
    for n in range(5):
        # Other names each time: only the address can be locked.
        wrong = orjson.dumps({"username": f"name-{n}", "password": "wrong"})
        headers = [
            ("Content-Type", "application/json"),
            ("X-Forwarded-For", f"198.51.100.{n}"),  # the client's own, rotated
            ("X-Forwarded-For", "192.0.2.1"),  # the proxy's: the real client
        ]
        response = await api.client.post("/api/auth/login", content=wrong, headers=headers)
        assert response.json()["code"] == 400
    credentials = {"username": "admin", "password": ADMIN_PASSWORD}
    real = await api.post("/api/auth/login", credentials, headers={"X-Forwarded-For": "192.0.2.1"})
    assert real["code"] == 429


async def test_success_resets_its_own_failure_count(api: Api) -> None:
    for _ in range(2):
        for _ in range(4):
            assert (await login(api, "admin", "wrong"))["code"] == 400
        assert (await login(api, "admin", ADMIN_PASSWORD))["code"] == 200


async def test_concurrent_attempts_cannot_exceed_the_limit(api: Api) -> None:
    wrong = {"username": "admin", "password": "wrong"}
    results = await asyncio.gather(*(api.post("/api/auth/login", wrong) for _ in range(10)))
    assert sorted(r["code"] for r in results) == [400] * 5 + [429] * 5


# --- tokens ------------------------------------------------------------------------


async def test_token_with_and_without_bearer(api: Api) -> None:
    token = await api.login()
    assert (await me(api, token))["data"]["username"] == "admin"
    assert (await me(api, f"Bearer {token}"))["data"]["username"] == "admin"


async def test_garbage_token(api: Api) -> None:
    body = await me(api, "not-a-token")
    assert body == {"code": 401, "message": "token is invalidated", "data": None}


async def issued_claims(api: Api) -> dict[str, Any]:
    """The claims of a real login token, as a template for forged ones."""
    claims: dict[str, Any] = jwt.decode(await api.login(), options={"verify_signature": False})
    return claims


async def test_token_signed_with_another_secret(api: Api) -> None:
    claims = {**await issued_claims(api), "jti": "forged"}
    forged = jwt.encode(claims, "another-secret-of-enough-length-32", algorithm="HS256")
    body = await me(api, forged)
    assert (body["code"], body["message"]) == (401, "token is invalidated")


async def test_expired_token(api: Api, services: Services) -> None:
    past = int(time.time()) - 7200
    claims = {**await issued_claims(api), "exp": past + 3600, "nbf": past, "iat": past}
    token = jwt.encode(claims, services.config.jwt_secret.reveal(), algorithm="HS256")
    body = await me(api, token)
    assert body == {"code": 401, "message": "token is expired", "data": None}


async def test_token_without_jti_is_refused(api: Api, services: Services) -> None:
    claims = await issued_claims(api)
    del claims["jti"]
    token = jwt.encode(claims, services.config.jwt_secret.reveal(), algorithm="HS256")
    body = await me(api, token)
    assert (body["code"], body["message"]) == (401, "token is invalidated")


async def recreate(api: Api, user_id: int) -> set[str]:
    admin = await api.login()
    body = await api.post("/api/admin/user/delete", params={"id": user_id}, token=admin)
    assert body["code"] == 200, body
    await api.make_user("bob", "bob-pw")
    # SQLite may give the new account the old id; its generation still differs.
    return {"failed find user: record not found", "Password has been changed, login please"}


async def admin_sets_password(api: Api, user_id: int) -> set[str]:
    admin = await api.login()
    user = (await api.get("/api/admin/user/get", params={"id": user_id}, token=admin))["data"]
    body = await api.post("/api/admin/user/update", {**user, "password": "bob-pw"}, token=admin)
    assert body["code"] == 200, body
    return {"Password has been changed, login please"}


async def own_password_change(api: Api, user_id: int) -> set[str]:
    token = await api.login("bob", "bob-pw")
    body = await api.post("/api/me/update", {"username": "bob", "password": "bob-pw"}, token=token)
    assert body["code"] == 200, body
    return {"Password has been changed, login please"}


IDENTITY_CHANGES = {
    "deleted and made again under the same name": recreate,
    "password set again by an admin": admin_sets_password,
    "password set again by the user": own_password_change,
}


@pytest.mark.parametrize("change", IDENTITY_CHANGES.values(), ids=IDENTITY_CHANGES.keys())
async def test_a_token_dies_with_its_user_within_the_same_second(
    api: Api,
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[Api, int], Awaitable[set[str]]],
) -> None:
    # Every account change happens at one frozen instant, as a fast script would see it.
    monkeypatch.setattr(users_module, "time", SimpleNamespace(time=lambda: 1_700_000_000.0))
    bob_id = await api.make_user("bob", "bob-pw")
    token = await api.login("bob", "bob-pw")
    messages = await change(api, bob_id)
    refused = await me(api, token)
    assert refused["code"] == 401
    assert refused["message"] in messages
    assert (await me(api, await api.login("bob", "bob-pw")))["data"]["username"] == "bob"


async def test_logout_invalidates_the_token(api: Api) -> None:
    token = await api.login()
    assert (await api.get("/api/auth/logout", token=token))["code"] == 200
    body = await me(api, token)
    assert (body["code"], body["message"]) == (401, "token is invalidated")


async def test_logout_leaves_other_tokens_working(api: Api) -> None:
    first = await api.login(fresh=True)
    second = await api.login(fresh=True)
    await api.get("/api/auth/logout", token=f"Bearer {first}")
    assert (await me(api, first))["code"] == 401
    assert (await me(api, second))["code"] == 200


async def test_tokens_survive_a_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = await start_services(data_dir)
    try:
        async with open_api(first, "203.0.113.7") as api:
            kept = await api.login(fresh=True)
            dropped = await api.login(fresh=True)
            assert (await api.get("/api/auth/logout", token=dropped))["code"] == 200
    finally:
        await first.stop()
    second = await start_services(data_dir)
    try:
        async with open_api(second, "203.0.113.7") as api:
            assert (await me(api, kept))["data"]["username"] == "admin"
            refused = await me(api, dropped)
            assert (refused["code"], refused["message"]) == (401, "token is invalidated")
    finally:
        await second.stop()


async def test_own_password_change_invalidates_earlier_tokens(api: Api) -> None:
    token = await api.login()
    body = await api.post(
        "/api/me/update", {"username": "admin", "password": "brand-new-pw"}, token=token
    )
    assert body["code"] == 200
    refused = await me(api, token)
    assert refused == {
        "code": 401,
        "message": "Password has been changed, login please",
        "data": None,
    }
    assert (await login(api, "admin", ADMIN_PASSWORD))["code"] == 400
    assert (await login(api, "admin", "brand-new-pw"))["code"] == 200


async def test_admin_setting_a_password_invalidates_the_users_tokens(api: Api) -> None:
    bob_id = await api.make_user("bob", "bob-pw")
    bob = (await login(api, "bob", "bob-pw"))["data"]["token"]
    admin = await api.login()
    user = (await api.get("/api/admin/user/get", params={"id": bob_id}, token=admin))["data"]
    body = await api.post("/api/admin/user/update", {**user, "password": "new-pw"}, token=admin)
    assert body["code"] == 200
    refused = await me(api, bob)
    assert (refused["code"], refused["message"]) == (401, "Password has been changed, login please")


async def test_admin_update_without_password_keeps_tokens(api: Api) -> None:
    bob_id = await api.make_user("bob", "bob-pw")
    bob = (await login(api, "bob", "bob-pw"))["data"]["token"]
    admin = await api.login()
    user = (await api.get("/api/admin/user/get", params={"id": bob_id}, token=admin))["data"]
    body = await api.post("/api/admin/user/update", {**user, "base_path": "/bob"}, token=admin)
    assert body["code"] == 200
    assert (await me(api, bob))["data"]["base_path"] == "/bob"


async def test_disabling_a_user_refuses_its_token(api: Api) -> None:
    bob_id = await api.make_user("bob", "bob-pw")
    bob = (await login(api, "bob", "bob-pw"))["data"]["token"]
    admin = await api.login()
    user = (await api.get("/api/admin/user/get", params={"id": bob_id}, token=admin))["data"]
    await api.post("/api/admin/user/update", {**user, "disabled": True}, token=admin)
    refused = await me(api, bob)
    assert refused == {
        "code": 401,
        "message": "Current user is disabled, replace please",
        "data": None,
    }


async def test_no_token_while_guest_is_disabled(api: Api) -> None:
    body = await me(api, "")
    assert body == {"code": 401, "message": "Guest user is disabled, login please", "data": None}


async def test_no_token_while_guest_is_enabled_is_the_guest(api: Api) -> None:
    await enable_guest(api)
    body = await me(api, "")
    assert (body["data"]["username"], body["data"]["role"]) == ("guest", 1)


async def test_permanent_admin_token(api: Api, services: Services) -> None:
    permanent = services.settings.get("token")
    assert permanent
    assert (await me(api, permanent))["data"]["username"] == "admin"
    assert (await me(api, f"Bearer {permanent}"))["data"]["username"] == "admin"


async def test_logout_does_not_revoke_the_permanent_token(api: Api, services: Services) -> None:
    permanent = services.settings.get("token")
    assert (await api.get("/api/auth/logout", token=permanent))["code"] == 200
    assert (await me(api, permanent))["data"]["username"] == "admin"


async def test_reset_token_replaces_the_permanent_token(api: Api, services: Services) -> None:
    old = services.settings.get("token")
    body = await api.post("/api/admin/setting/reset_token", token=await api.login())
    assert body["code"] == 200
    new = body["data"]
    assert isinstance(new, str)
    assert new != old
    refused = await me(api, old)
    assert (refused["code"], refused["message"]) == (401, "token is invalidated")
    assert (await me(api, new))["data"]["username"] == "admin"


# --- 2FA ---------------------------------------------------------------------------


async def enable_2fa(api: Api, token: str) -> str:
    generated = await api.post("/api/auth/2fa/generate", token=token)
    secret: str = generated["data"]["secret"]
    code = pyotp.TOTP(secret).now()
    body = await api.post("/api/auth/2fa/verify", {"code": code, "secret": secret}, token=token)
    assert body["code"] == 200, body
    return secret


async def test_2fa_generate_returns_a_png_qr_and_a_base32_secret(api: Api) -> None:
    body = await api.post("/api/auth/2fa/generate", token=await api.login())
    assert body["code"] == 200
    assert set(body["data"]) == {"qr", "secret"}
    qr: str = body["data"]["qr"]
    prefix = "data:image/png;base64,"
    assert qr.startswith(prefix)
    assert base64.b64decode(qr[len(prefix) :]).startswith(b"\x89PNG\r\n\x1a\n")
    assert re.fullmatch(r"[A-Z2-7]{32}", body["data"]["secret"])


async def test_2fa_generate_is_not_stored(api: Api) -> None:
    token = await api.login()
    await api.post("/api/auth/2fa/generate", token=token)
    assert (await me(api, token))["data"]["otp"] is False


async def test_2fa_verify_with_a_wrong_code(api: Api) -> None:
    token = await api.login()
    secret = (await api.post("/api/auth/2fa/generate", token=token))["data"]["secret"]
    body = await api.post(
        "/api/auth/2fa/verify", {"code": wrong_code(secret), "secret": secret}, token=token
    )
    assert body == {"code": 400, "message": "Invalid 2FA code", "data": None}
    assert (await me(api, token))["data"]["otp"] is False


async def test_2fa_verify_turns_otp_on(api: Api) -> None:
    token = await api.login()
    await enable_2fa(api, token)
    assert (await me(api, token))["data"]["otp"] is True


async def test_login_with_2fa_needs_the_code(api: Api) -> None:
    secret = await enable_2fa(api, await api.login())
    missing = await login(api, "admin", ADMIN_PASSWORD)
    assert missing == {"code": 402, "message": "Invalid 2FA code", "data": None}
    wrong = await login(api, "admin", ADMIN_PASSWORD, otp_code=wrong_code(secret))
    assert (wrong["code"], wrong["message"]) == (402, "Invalid 2FA code")
    right = await login(api, "admin", ADMIN_PASSWORD, otp_code=pyotp.TOTP(secret).now())
    assert right["code"] == 200


async def test_login_hash_with_2fa_needs_the_code(api: Api) -> None:
    secret = await enable_2fa(api, await api.login())
    credentials = {"username": "admin", "password": static_hash(ADMIN_PASSWORD)}
    missing = await api.post("/api/auth/login/hash", credentials)
    assert (missing["code"], missing["message"]) == (402, "Invalid 2FA code")
    code = pyotp.TOTP(secret).now()
    right = await api.post("/api/auth/login/hash", {**credentials, "otp_code": code})
    assert right["code"] == 200


async def test_wrong_2fa_codes_count_towards_the_lock(api: Api) -> None:
    secret = await enable_2fa(api, await api.login())
    for _ in range(5):
        assert (await login(api, "admin", ADMIN_PASSWORD))["code"] == 402
    locked = await login(api, "admin", ADMIN_PASSWORD, otp_code=pyotp.TOTP(secret).now())
    assert (locked["code"], locked["message"]) == (429, LOCKED)


async def test_admin_cancel_2fa(api: Api, services: Services) -> None:
    admin = await api.login()
    await enable_2fa(api, admin)
    admin_user = await services.users.by_name("admin")
    assert admin_user is not None
    body = await api.post("/api/admin/user/cancel_2fa", params={"id": admin_user.id}, token=admin)
    assert body["code"] == 200
    assert (await me(api, admin))["data"]["otp"] is False
    assert (await login(api, "admin", ADMIN_PASSWORD))["code"] == 200


async def test_guest_cannot_generate_2fa(api: Api) -> None:
    await enable_guest(api)
    body = await api.post("/api/auth/2fa/generate", token="")
    assert body == {"code": 403, "message": "Guest user can not generate 2FA code", "data": None}


async def test_guest_cannot_verify_2fa(api: Api) -> None:
    await enable_guest(api)
    secret = pyotp.random_base32(32)
    payload = {"code": pyotp.TOTP(secret).now(), "secret": secret}
    body = await api.post("/api/auth/2fa/verify", payload, token="")
    assert (body["code"], body["message"]) == (403, "Guest user can not generate 2FA code")


# --- /api/me/update ----------------------------------------------------------------


async def test_guest_cannot_update_profile(api: Api) -> None:
    await enable_guest(api)
    body = await api.post("/api/me/update", {"username": "guest2"}, token="")
    assert body == {"code": 403, "message": "Guest user can not update profile", "data": None}


async def test_username_change(api: Api) -> None:
    await api.make_user("bob", "bob-pw")
    token = (await login(api, "bob", "bob-pw"))["data"]["token"]
    assert (await api.post("/api/me/update", {"username": "robert"}, token=token))["code"] == 200
    refused = await me(api, token)
    assert refused == {"code": 401, "message": "failed find user: record not found", "data": None}
    renamed = await login(api, "robert", "bob-pw")
    assert (await me(api, renamed["data"]["token"]))["data"]["username"] == "robert"
    old_name = await login(api, "bob", "bob-pw")
    assert (old_name["code"], old_name["message"]) == (400, "failed find user: record not found")


async def test_profile_update_with_no_username(api: Api) -> None:
    body = await api.post("/api/me/update", {"password": "x"}, token=await api.login())
    assert (body["code"], body["message"]) == (400, "username is empty")
