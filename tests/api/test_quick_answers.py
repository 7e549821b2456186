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
from tests.api.live_server import STUCK, serving
from tests.conftest import Api, open_api, start_services

SCRAPE = "scrape-token-51c2"


@pytest.fixture
async def live(services: Services) -> AsyncIterator[str]:
    async with serving(services) as url:
        yield url


class Connection:
    """One kept-alive HTTP/1.1 connection, a request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def get(self, path: str, headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
        lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        async with asyncio.timeout(STUCK):
            head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            status, *fields = head.strip().split("\r\n")
            assert status.startswith("HTTP/1.1 200"), status
            answer = {k.lower(): v for k, v in (f.split(": ", 1) for f in fields)}
            body = await self.reader.readexactly(int(answer["content-length"]))
        answer.pop("date")
        return answer, body


@pytest.fixture
async def connection(live: str) -> AsyncIterator[Connection]:
    host, port = live.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        yield Connection(reader, writer)
    finally:
        writer.close()


def envelope(body: bytes) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(body)
    return shown


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
    for _ in range(2):
        _, body = await connection.get("/api/me", {"Authorization": token})
        assert envelope(body)["data"]["username"] == "admin"
    changed = await api.post(
        "/api/me/update", {"username": "admin", "password": "brand-new-pw"}, token=token
    )
    assert changed["code"] == 200
    _, body = await connection.get("/api/me", {"Authorization": token})
    assert envelope(body)["code"] == 401
    assert envelope(body)["message"] == "Password has been changed, login please"


async def test_a_logged_out_token_is_refused_on_a_kept_connection(
    api: Api, connection: Connection
) -> None:
    token = await api.login()
    await connection.get("/api/me", {"Authorization": token})
    await api.get("/api/auth/logout", token=token)
    _, body = await connection.get("/api/me", {"Authorization": token})
    assert (envelope(body)["code"], envelope(body)["message"]) == (401, "token is invalidated")


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
            host, port = url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            kept = Connection(reader, writer)
            token = {"Authorization": await api.login()}
            for _ in range(5):
                await kept.get("/api/me", token)
            writer.close()
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
