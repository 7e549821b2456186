"""The guest and the admin are found without the database, and changes show at once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from manifold.container import Services
from tests.conftest import Api

GUEST = 1


@contextmanager
def user_queries(services: Services) -> Iterator[list[str]]:
    """The statements that read the users table while the block runs."""
    seen: list[str] = []

    def record(*args: Any) -> None:
        statement = str(args[2])
        if statement.lstrip().upper().startswith("SELECT") and "FROM users" in statement:
            seen.append(statement)

    engine = services.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def guest_json(api: Api, admin: str) -> dict[str, Any]:
    listing = await api.get("/api/admin/user/list", token=admin)
    return next(u for u in listing["data"]["content"] if u["role"] == GUEST)


async def update_guest(api: Api, **changes: Any) -> None:
    admin = await api.login()
    guest = await guest_json(api, admin)
    body = await api.post("/api/admin/user/update", {**guest, **changes}, token=admin)
    assert body["code"] == 200, body


async def test_guest_requests_read_no_user_after_the_first(api: Api, services: Services) -> None:
    await update_guest(api, disabled=False)
    assert (await api.get("/api/me", token=""))["data"]["username"] == "guest"
    with user_queries(services) as seen:
        for _ in range(5):
            assert (await api.get("/api/me", token=""))["data"]["username"] == "guest"
    assert seen == []


async def test_admin_token_requests_read_no_user_after_the_first(
    api: Api, services: Services
) -> None:
    permanent = services.settings.get("token")
    assert (await api.get("/api/me", token=permanent))["data"]["username"] == "admin"
    with user_queries(services) as seen:
        for _ in range(5):
            assert (await api.get("/api/me", token=permanent))["data"]["username"] == "admin"
    assert seen == []


async def test_a_change_to_the_guest_shows_on_its_next_request(api: Api) -> None:
    await update_guest(api, disabled=False, permission=0, base_path="/")
    assert (await api.get("/api/me", token=""))["data"]["permission"] == 0
    await update_guest(api, permission=1, base_path="/pub")
    me = (await api.get("/api/me", token=""))["data"]
    assert (me["permission"], me["base_path"]) == (1, "/pub")
    await update_guest(api, disabled=True)
    refused = await api.get("/api/me", token="")
    assert (refused["code"], refused["message"]) == (401, "Guest user is disabled, login please")


async def test_a_change_to_the_admin_shows_on_its_next_token_request(
    api: Api, services: Services
) -> None:
    permanent = services.settings.get("token")
    assert (await api.get("/api/me", token=permanent))["data"]["base_path"] == "/"
    admin = await api.login()
    me = (await api.get("/api/me", token=admin))["data"]
    body = await api.post("/api/me/update", {"username": "root", "password": ""}, token=admin)
    assert body["code"] == 200, (body, me)
    assert (await api.get("/api/me", token=permanent))["data"]["username"] == "root"
