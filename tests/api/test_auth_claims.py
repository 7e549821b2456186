"""The claims of a login token, read by clients that decode it without the secret."""

from __future__ import annotations

from typing import Any

import jwt

from tests.conftest import Api


def decoded(token: str) -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return claims


async def test_a_login_token_carries_alists_claims_and_manifolds(api: Api) -> None:
    claims = decoded(await api.login(fresh=True))
    alist = {"username": str, "pwd_ts": int, "exp": int, "nbf": int, "iat": int}
    own = {"uid": int, "gen": str, "jti": str}
    assert {name: type(claims.get(name)) for name in alist | own} == alist | own
    assert list(claims)[:5] == list(alist)
    assert claims["username"] == "admin"
    assert claims["nbf"] == claims["iat"] < claims["exp"]


async def test_the_header_is_alists(api: Api) -> None:
    header = jwt.get_unverified_header(await api.login(fresh=True))
    assert header == {"alg": "HS256", "typ": "JWT"}


async def test_pwd_ts_changes_with_the_password(api: Api) -> None:
    token = await api.login(fresh=True)
    before = decoded(token)["pwd_ts"]
    body = await api.post(
        "/api/me/update", {"username": "admin", "password": "another-pw"}, token=token
    )
    assert body["code"] == 200, body
    after = decoded(await api.login("admin", "another-pw"))["pwd_ts"]
    assert after != before


async def test_pwd_ts_stays_while_the_password_stays(api: Api) -> None:
    bob_id = await api.make_user("bob", "bob-pw")
    before = decoded(await api.login("bob", "bob-pw", fresh=True))["pwd_ts"]
    admin = await api.login()
    user = (await api.get("/api/admin/user/get", params={"id": bob_id}, token=admin))["data"]
    body = await api.post("/api/admin/user/update", {**user, "base_path": "/bob"}, token=admin)
    assert body["code"] == 200, body
    assert decoded(await api.login("bob", "bob-pw", fresh=True))["pwd_ts"] == before
