from __future__ import annotations

from tests.conftest import Api


async def test_login_and_me(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/me")
    assert body["code"] == 200
    assert body["data"]["username"] == "admin"
    assert body["data"]["password"] == ""
    assert body["data"]["otp"] is False
