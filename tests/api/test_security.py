"""Access control over the whole route table, and secrets kept out of answers and logs."""

from __future__ import annotations

import logging

import httpx
import pytest
from fastapi import FastAPI
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute

from manifold import app as app_module
from manifold.app import ROUTES, Route, create_app
from manifold.container import Services
from tests.conftest import ADMIN_PASSWORD, Api

ADMIN_ROUTES = tuple(route for route in ROUTES if route.admin)
OPEN_ROUTES = tuple(route for route in ROUTES if not route.admin)
NOT_ADMIN = (403, "You are not an admin")
USER_PASSWORD = "alice-pw-4417"


async def answers(api: Api, routes: tuple[Route, ...], token: str) -> dict[str, tuple[int, str]]:
    """Call each route with its first method, no body and no query: code and message."""
    found = {}
    for route in routes:
        body = await api.call(route.methods[0], route.path, token=token)
        found[route.path] = (body["code"], body["message"])
    return found


async def enable_guest(api: Api) -> None:
    admin = await api.login()
    users = (await api.get("/api/admin/user/list", token=admin))["data"]["content"]
    guest = next(user for user in users if user["role"] == 1)
    guest["disabled"] = False
    body = await api.post("/api/admin/user/update", guest, token=admin)
    assert body["code"] == 200, body


async def user_token(api: Api) -> str:
    if await api.services.users.by_name("alice") is None:
        await api.make_user("alice", USER_PASSWORD, permission=0xFFFF)
    return await api.login("alice", USER_PASSWORD)


def served_routes(routes: list[BaseRoute]) -> set[tuple[str, str]]:
    served = set()
    for route in routes:
        path = getattr(route, "path", "")
        for method in getattr(route, "methods", None) or ():
            served.add((method, path))
    return served


def listed_routes() -> set[tuple[str, str]]:
    return {(method, route.path) for route in ROUTES for method in route.methods}


def unlisted_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Routes the app serves that the ``ROUTES`` table does not declare."""
    return served_routes(app.routes) - listed_routes()


# -- the route table --------------------------------------------------------


async def test_the_admin_flag_alone_guards_a_route(
    api: Api, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unguarded() -> Response:
        return PlainTextResponse("open")

    flagged = Route(("POST",), "/api/admin/unguarded", unguarded, admin=True)
    monkeypatch.setattr(app_module, "ROUTES", (*ROUTES, flagged))
    app = create_app(services.config, services)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://manifold.test") as client:
        token = await user_token(api)
        refused = await client.post("/api/admin/unguarded", headers={"Authorization": token})
        assert refused.json() == {"code": 403, "message": "You are not an admin", "data": None}
        admin = await api.login()
        allowed = await client.post("/api/admin/unguarded", headers={"Authorization": admin})
        assert allowed.text == "open"


def test_every_admin_path_is_flagged_admin() -> None:
    unflagged = [r.path for r in ROUTES if r.path.startswith("/api/admin/") and not r.admin]
    assert unflagged == []


def test_paths_in_table_are_unique() -> None:
    paths = [route.path for route in ROUTES]
    assert len(paths) == len(set(paths))


async def test_app_serves_exactly_the_table(services: Services) -> None:
    app = create_app(services.config, services)
    assert unlisted_routes(app) == set()
    assert listed_routes() - served_routes(app.routes) == set()


# -- admin routes refuse everyone else --------------------------------------


async def test_admin_routes_without_token_and_guest_disabled(api: Api) -> None:
    found = await answers(api, ADMIN_ROUTES, token="")
    expected = (401, "Guest user is disabled, login please")
    assert found == {route.path: expected for route in ADMIN_ROUTES}


async def test_admin_routes_without_token_and_guest_enabled(api: Api) -> None:
    await enable_guest(api)
    assert (await api.get("/api/me", token=""))["data"]["username"] == "guest"
    found = await answers(api, ADMIN_ROUTES, token="")
    assert found == {route.path: NOT_ADMIN for route in ADMIN_ROUTES}


async def test_admin_routes_with_a_normal_user_token(api: Api) -> None:
    token = await user_token(api)
    assert (await api.get("/api/me", token=token))["data"]["username"] == "alice"
    found = await answers(api, ADMIN_ROUTES, token=token)
    assert found == {route.path: NOT_ADMIN for route in ADMIN_ROUTES}


async def test_admin_routes_with_a_forged_token(api: Api) -> None:
    found = await answers(api, ADMIN_ROUTES, token="not-a-real-token")
    expected = (401, "token is invalidated")
    assert found == {route.path: expected for route in ADMIN_ROUTES}


async def test_admin_routes_let_the_admin_through(api: Api) -> None:
    admin = await api.login()
    found = await answers(api, ADMIN_ROUTES, token=admin)
    refused = {path: answer for path, answer in found.items() if answer[0] in (401, 403)}
    assert refused == {}


# -- secrets never leave the server -----------------------------------------


def secrets_of(services: Services) -> list[str]:
    return [
        services.config.jwt_secret.reveal(),
        services.settings.get("token"),
        "$argon2",
    ]


def assert_no_secret(text: str, secrets: list[str]) -> None:
    assert all(secret for secret in secrets)
    leaked = [secret[:12] for secret in secrets if secret in text]
    assert leaked == []


LOGIN_BODY = {"username": "alice", "password": USER_PASSWORD}


async def test_open_routes_show_no_secret_to_a_user(api: Api) -> None:
    secrets = secrets_of(api.services)
    calls = 0
    for route in OPEN_ROUTES:
        for method in ("GET", "POST"):
            if method not in route.methods:
                continue
            for body in (None, LOGIN_BODY):
                token = await user_token(api)
                response = await api.client.request(
                    method, route.path, json=body, headers={"Authorization": token}
                )
                assert_no_secret(response.text, secrets)
                calls += 1
    assert calls >= 2 * len(OPEN_ROUTES)


async def test_me_shows_no_password_hash(api: Api) -> None:
    token = await user_token(api)
    response = await api.client.get("/api/me", headers={"Authorization": token})
    assert response.json()["data"]["password"] == ""
    assert_no_secret(response.text, secrets_of(api.services))


async def run_a_session(api: Api) -> list[str]:
    """Logins, failures and errors of every kind; returns the tokens handed out."""
    issued = [await api.login(), await user_token(api)]
    await api.post("/api/auth/login", {"username": "admin", "password": "wrong-password"})
    await api.post("/api/auth/login", {"username": "nobody", "password": ADMIN_PASSWORD})
    await api.post("/api/auth/login/hash", {"username": "admin", "password": ""})
    await api.get("/api/me", token="forged.token.value")
    await api.get("/api/me", token=api.services.settings.get("token"))
    await api.get("/api/admin/setting/list", token=issued[1])
    await api.post("/api/admin/setting/save", [{"key": "token", "value": "x"}], token=issued[0])
    await api.post("/api/admin/user/create", {"username": "alice"}, token=issued[0])
    await api.post("/api/admin/setting/reset_token", token=issued[0])
    await api.get("/api/nope")
    response = await api.client.post(
        "/api/auth/login", content=b"{broken", headers={"Content-Type": "application/json"}
    )
    assert response.json()["code"] == 400
    await api.get("/api/auth/logout", token=issued[1])
    return issued


def manifold_text(caplog: pytest.LogCaptureFixture) -> str:
    records = [r for r in caplog.records if not r.name.startswith("aiosqlite")]
    return "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in records)


async def test_log_of_a_session_holds_no_secret(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    issued = await run_a_session(api)
    assert any(record.name == "httpx" for record in caplog.records)
    secrets = [*secrets_of(api.services), ADMIN_PASSWORD, USER_PASSWORD, *issued]
    assert_no_secret(manifold_text(caplog), secrets)


async def test_debug_log_of_every_logger_holds_no_secret(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await run_a_session(api)
    everything = "\n".join(record.getMessage() for record in caplog.records)
    assert_no_secret(everything, secrets_of(api.services))


def test_each_admin_route_has_one_method() -> None:
    # answers() calls a route's first method only, so it must be the only one.
    assert all(len(route.methods) == 1 for route in ADMIN_ROUTES)
