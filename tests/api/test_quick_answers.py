"""The answers the HTTP protocol gives without an ASGI call (``ManifoldApp.quick``), on a
real server: a kept-alive connection's later requests take that way, its first does not,
so comparing them shows both ways answer alike."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.services.auth.service import DISABLED
from tests.api.live_server import Connection, connected, serving
from tests.api.test_auth import enable_2fa
from tests.conftest import Api, open_api, start_services

SCRAPE = "scrape-token-51c2"


@pytest.fixture
async def live(services: Services) -> AsyncIterator[str]:
    async with serving(services) as url:
        yield url


@pytest.fixture
async def connection(live: str) -> AsyncIterator[Connection]:
    async with connected(live) as kept:
        yield kept


def envelope(body: bytes) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(body)
    return shown


async def me_on(connection: Connection, token: str) -> dict[str, Any]:
    """/api/me on ``connection``, asked three times: after a change the first may take
    the ASGI call (the user was dropped from the cache), the others are quick answers
    again; all three must agree."""
    answers = []
    for _ in range(3):
        _, body = await connection.get("/api/me", {"Authorization": token})
        answers.append(envelope(body))
    assert answers[1:] == answers[:-1]
    return answers[0]


async def kept_user(api: Api, connection: Connection, name: str) -> tuple[int, str]:
    """A new user, its token, and its /api/me answered quickly on ``connection``."""
    user_id = await api.make_user(name, f"{name}-pw", base_path="/", permission=0)
    token = await api.login(name, f"{name}-pw")
    assert (await me_on(connection, token))["data"]["username"] == name
    return user_id, token


async def edit_user(api: Api, user_id: int, name: str, **fields: Any) -> None:
    """The admin's edit of user ``user_id`` (``name``), ``fields`` over its settings."""
    user = {"id": user_id, "username": name, "password": "", "base_path": "/", "role": 0,
            "permission": 0, "disabled": False, **fields}  # fmt: skip
    body = await api.post("/api/admin/user/update", user, token=await api.login())
    assert body["code"] == 200, body


@pytest.mark.parametrize("path", ["/api/me", "/api/public/settings"])
async def test_later_requests_on_a_connection_answer_as_the_first(
    api: Api, connection: Connection, path: str
) -> None:
    token = {"Authorization": await api.login()}
    first = await connection.get(path, token)
    for _ in range(3):
        assert await connection.get(path, token) == first
    assert first[0]["x-content-type-options"] == "nosniff"
    assert envelope(first[1])["code"] == 200


async def test_a_password_change_refuses_the_token_on_a_kept_connection(
    api: Api, connection: Connection
) -> None:
    token = await api.login()
    assert (await me_on(connection, token))["data"]["username"] == "admin"
    changed = await api.post(
        "/api/me/update", {"username": "admin", "password": "brand-new-pw"}, token=token
    )
    assert changed["code"] == 200
    refused = await me_on(connection, token)
    assert (refused["code"], refused["message"]) == (401, "Password has been changed, login please")


async def test_a_logged_out_token_is_refused_on_a_kept_connection(
    api: Api, connection: Connection
) -> None:
    token = await api.login()
    await me_on(connection, token)
    await api.get("/api/auth/logout", token=token)
    refused = await me_on(connection, token)
    assert (refused["code"], refused["message"]) == (401, "token is invalidated")


async def test_a_user_edited_by_the_admin_shows_at_once_on_a_kept_connection(
    api: Api, connection: Connection
) -> None:
    user_id, token = await kept_user(api, connection, "gale")
    await edit_user(api, user_id, "gale", base_path="/docs", permission=1 << 3)
    shown = (await me_on(connection, token))["data"]
    assert (shown["base_path"], shown["permission"]) == ("/docs", 1 << 3)


async def test_a_disabled_user_is_refused_at_once_on_a_kept_connection(
    api: Api, connection: Connection
) -> None:
    user_id, token = await kept_user(api, connection, "hale")
    await edit_user(api, user_id, "hale", disabled=True)
    refused = await me_on(connection, token)
    assert (refused["code"], refused["message"]) == (401, DISABLED)


async def test_two_factor_turned_on_shows_at_once_on_a_kept_connection(
    api: Api, connection: Connection
) -> None:
    _, token = await kept_user(api, connection, "ivo")
    assert (await me_on(connection, token))["data"]["otp"] is False
    await enable_2fa(api, token)
    assert (await me_on(connection, token))["data"]["otp"] is True


async def test_an_idle_kept_connection_is_closed_after_the_keep_alive_timeout(
    services: Services,
) -> None:
    async with serving(services, timeout_keep_alive=1) as url, connected(url) as kept:
        for _ in range(3):
            await kept.get("/api/public/settings", {})
        assert await kept.closed_by_server()


async def test_a_connection_asked_more_often_than_the_timeout_stays_open(
    services: Services,
) -> None:
    async with serving(services, timeout_keep_alive=3) as url, connected(url) as kept:
        first = await kept.get("/api/public/settings", {})
        # Past the timeout in all, never more than a tenth of it idle.
        for _ in range(12):
            await asyncio.sleep(0.3)
            assert await kept.get("/api/public/settings", {}) == first


async def test_a_request_with_an_origin_still_gets_cors(api: Api, connection: Connection) -> None:
    token = {"Authorization": await api.login()}
    await connection.get("/api/me", token)
    answer, _ = await connection.get("/api/me", {**token, "Origin": "http://elsewhere.example"})
    assert "access-control-allow-origin" in answer


async def test_with_metrics_on_every_request_is_counted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "config.json").write_text(json.dumps({"metrics": SCRAPE}))
    services = await start_services(data)
    try:
        async with open_api(services) as api, serving(services) as url:
            token = {"Authorization": await api.login()}
            async with connected(url) as kept:
                for _ in range(5):
                    await kept.get("/api/me", token)
            scraped = await api.client.get(
                "/metrics", headers={"Authorization": f"Bearer {SCRAPE}"}
            )
    finally:
        await services.stop()
    counted = [
        line
        for line in scraped.text.splitlines()
        if line.startswith('manifold_http_requests_total{method="GET",route="/api/me"')
    ]
    assert [float(line.rsplit(" ", 1)[1]) for line in counted] == [5]
