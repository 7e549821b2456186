"""One lock-out for the API's login and WebDAV's credentials: guesses over one are
refused on the other, answered in each one's own way (envelope 429, HTTP 429)."""

from __future__ import annotations

import base64

from tests.conftest import Api, open_api

DAV_USER = {"permission": 0x3FFF}


def basic(name: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


async def test_dav_guesses_lock_the_api_login(api: Api) -> None:
    await api.make_user("dora", "dora-pw", **DAV_USER)
    for _ in range(api.services.config.max_login_failures):
        answer = await api.client.request("PROPFIND", "/dav/", headers=basic("dora", "guess"))
        assert answer.status_code == 401
    body = await api.post("/api/auth/login", {"username": "dora", "password": "dora-pw"})
    assert body["code"] == 429


async def test_api_guesses_lock_webdav(api: Api) -> None:
    await api.make_user("dora", "dora-pw", **DAV_USER)
    for _ in range(api.services.config.max_login_failures):
        body = await api.post("/api/auth/login", {"username": "dora", "password": "guess"})
        assert body["code"] == 400
    answer = await api.client.request(
        "PROPFIND", "/dav/", headers={**basic("dora", "dora-pw"), "Depth": "0"}
    )
    assert answer.status_code == 429


async def test_webdav_false_serves_no_dav(api: Api) -> None:
    await api.make_user("dora", "dora-pw", **DAV_USER)
    api.services.config.webdav = False
    async with open_api(api.services) as without:
        answer = await without.client.request(
            "PROPFIND", "/dav/", headers={**basic("dora", "dora-pw"), "Depth": "0"}
        )
    assert answer.status_code != 207
    assert "dav" not in answer.headers
