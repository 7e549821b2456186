"""The page-load endpoints answered before routing: the same answers as their routes."""

from __future__ import annotations

import pytest

from tests.conftest import Api

ORIGIN = {"Origin": "http://elsewhere.example"}


@pytest.mark.parametrize("path", ["/api/me", "/api/public/settings"])
async def test_the_fast_answer_is_the_routed_answer(api: Api, path: str) -> None:
    token = await api.login()
    fast = await api.client.get(path, headers={"Authorization": token})
    routed = await api.client.get(path, headers={"Authorization": token, **ORIGIN})
    assert fast.status_code == routed.status_code == 200
    assert fast.json() == routed.json()
    assert fast.headers["x-content-type-options"] == "nosniff"
    assert fast.headers["content-type"] == routed.headers["content-type"]


async def test_me_errors_and_other_methods_take_the_route(api: Api) -> None:
    bad = await api.client.get("/api/me", headers={"Authorization": "not-a-token"})
    assert bad.json()["code"] == 401
    assert bad.json()["message"] == "token is invalidated"
    guest = await api.client.get("/api/me")
    assert guest.json()["code"] == 401  # the guest is disabled by default
    token = await api.login()
    posted = await api.client.post("/api/me", headers={"Authorization": token})
    assert posted.json()["code"] == 405 or posted.status_code == 405


async def test_a_logged_out_token_is_refused_on_the_fast_path(api: Api) -> None:
    token = await api.login(fresh=True)
    assert (await api.get("/api/me", token=token))["data"]["username"] == "admin"
    await api.get("/api/auth/logout", token=token)
    refused = await api.get("/api/me", token=token)
    assert refused["code"] == 401
