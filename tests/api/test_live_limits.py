"""Limits that only a real server can show: proxy headers, request heads, bodies, raw bytes.

The server is uvicorn started with ``manifold.server.uvicorn_config``, exactly as
``manifold server`` starts it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from manifold.container import Services
from tests.api.live_server import STUCK, exchange, serving
from tests.conftest import ADMIN_PASSWORD, Api

MiB = 1 << 20


@pytest.fixture
async def live(services: Services) -> AsyncIterator[str]:
    async with serving(services) as url:
        yield url


# --- X-Forwarded-For --------------------------------------------------------------


async def login(
    client: httpx.AsyncClient, password: str, forwarded: str = "", username: str = "admin"
) -> int:
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    body = {"username": username, "password": password}
    response = await client.post("/api/auth/login", json=body, headers=headers)
    code: int = response.json()["code"]
    return code


async def lock_out(client: httpx.AsyncClient, forwarded: str = "") -> None:
    """Lock the address out by guessing at a name that does not exist, so that only the
    address (failures also count per name) keeps the admin out afterwards."""
    for _ in range(5):
        assert await login(client, "wrong", forwarded, username="nobody") == 400


@pytest.mark.parametrize("forwarded", ["1.2.3.4", "1.2.3.4, 127.0.0.1", "unknown"])
async def test_forwarded_for_is_ignored_without_trusted_proxies(
    live: str, services: Services, forwarded: str
) -> None:
    assert services.config.trusted_proxies == []
    async with httpx.AsyncClient(base_url=live) as client:
        await lock_out(client)
        assert await login(client, ADMIN_PASSWORD, forwarded) == 429


async def test_forwarded_for_is_believed_from_a_trusted_proxy(
    live: str, services: Services
) -> None:
    services.config.trusted_proxies = ["127.0.0.1"]
    async with httpx.AsyncClient(base_url=live) as client:
        await lock_out(client, "192.0.2.1")
        assert await login(client, ADMIN_PASSWORD, "192.0.2.1") == 429
        assert await login(client, ADMIN_PASSWORD, "192.0.2.2") == 200


# --- request heads ------------------------------------------------------------------


def request_head(target: str = "/ping", headers: list[bytes] | None = None) -> bytes:
    lines = [f"GET {target} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close"]
    return b"\r\n".join([*lines, *(headers or [])]) + b"\r\n\r\n"


def many(count: int, size: int) -> list[bytes]:
    return [b"X-Filler-%d: " % i + b"v" * size for i in range(count)]


OVERSIZED_HEADS = {
    "10000 headers": request_head(headers=many(10_000, 5)),
    "101 headers": request_head(headers=many(101, 5)),
    "one 20 KiB header": request_head(headers=many(1, 20 << 10)),
    "80 KiB of headers": request_head(headers=many(40, 2 << 10)),
    "header without end": request_head()[:-2] + b"X-Endless: " + b"v" * (2 * MiB),
    "100 KiB URL": request_head("/ping?" + "q" * (100 << 10)),
}

ORDINARY_HEADS = {
    "60 headers": request_head(headers=many(60, 100)),
    "one 12 KiB header": request_head(headers=many(1, 12 << 10)),
    "8 KiB URL": request_head("/ping?" + "q" * (8 << 10)),
}


@pytest.mark.parametrize("head", OVERSIZED_HEADS.values(), ids=OVERSIZED_HEADS.keys())
async def test_oversized_request_heads_are_refused(live: str, head: bytes) -> None:
    answer = await exchange(live, head)
    # A server that stops reading early may have its refusal cut off by a reset.
    assert answer is None or answer.startswith(b"HTTP/1.1 431 "), answer
    # The server is still there for everyone else.
    assert (await exchange(live, request_head()) or b"").startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize("head", ORDINARY_HEADS.values(), ids=ORDINARY_HEADS.keys())
async def test_ordinary_request_heads_are_served(live: str, head: bytes) -> None:
    answer = await exchange(live, head) or b""
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"pong"), answer[:200]


async def test_kept_alive_connection_counts_each_head_afresh(live: str) -> None:
    """Many ordinary requests on one connection add up to more than one head's limit."""
    keep = request_head(headers=many(50, 100)).replace(b"Connection: close", b"X-Keep: 1")
    answer = await exchange(live, keep * 20 + request_head()) or b""
    assert answer.count(b"HTTP/1.1 200 ") == 21, answer[:300]


STALLED_REQUESTS = {
    "no byte at all": b"",
    "half a head": b"GET /ping HTTP/1.1\r\nHost: x\r\n",
    "a head and half a body": (
        b"POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    ),
}


@pytest.mark.parametrize("sent", STALLED_REQUESTS.values(), ids=STALLED_REQUESTS.keys())
async def test_a_request_that_stalls_is_closed(
    live: str, sent: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One client holding every connection the process may open, each with a request it
    never finishes, would shut everyone else out for as long as it likes."""
    monkeypatch.setattr("manifold.server.REQUEST_IDLE_SECONDS", 0.5)
    answer = await exchange(live, sent)  # fails the test if the server waits for ever
    assert answer is None or not answer.startswith(b"HTTP/1.1 200 "), answer


# --- request bodies -------------------------------------------------------------------


def peak_rss_reset() -> int:
    """Reset this process's peak resident size to the current one; returns it in bytes."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_bytes("VmHWM")


def peak_rss() -> int:
    return _status_bytes("VmHWM")


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


async def post_huge(url: str, size: int, chunked: bool) -> dict[str, Any]:
    """POST ``size`` bytes to the login route, a MiB at a time; the envelope it answers."""
    async with asyncio.timeout(STUCK):
        return await _post_huge(url, size, chunked)


async def _post_huge(url: str, size: int, chunked: bool) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % size
    writer.write(
        b"POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + framing
        + b"\r\n\r\n"
    )
    piece = b" " * MiB
    for _ in range(size // MiB):
        writer.write(b"100000\r\n" + piece + b"\r\n" if chunked else piece)
        await writer.drain()
    writer.write(b"0\r\n\r\n" if chunked else b"")
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    body = await reader.readexactly(length)
    writer.close()
    result: dict[str, Any] = json.loads(body)
    return result


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_huge_login_body_is_refused_without_being_held(live: str, chunked: bool) -> None:
    before = peak_rss_reset()
    answer = await post_huge(live, 100 * MiB, chunked)
    growth = peak_rss() - before
    assert answer == {"code": 413, "message": "request body too large", "data": None}
    # The cap is 4 MiB; holding the body would cost 100 MiB or more.
    assert growth < 40 * MiB, growth


# --- raw UTF-8 in File-Path -------------------------------------------------------------

NAME = "naïve 文件 ✓.txt"


async def put_raw(url: str, token: str, file_path: bytes, data: bytes) -> dict[str, Any]:
    head = b"\r\n".join(
        [
            b"PUT /api/fs/put HTTP/1.1",
            b"Host: 127.0.0.1",
            b"Authorization: " + token.encode(),
            b"File-Path: " + file_path,
            b"Content-Length: %d" % len(data),
            b"Connection: close",
        ]
    )
    answer = await exchange(url, head + b"\r\n\r\n" + data) or b""
    result: dict[str, Any] = json.loads(answer.partition(b"\r\n\r\n")[2])
    return result


SPELLINGS = {
    "raw UTF-8": NAME.encode(),
    "escaped": quote(NAME).encode(),
    "raw and escaped mixed": "na%C3%AFve 文件%20✓.txt".encode(),
}


@pytest.mark.parametrize("spelling", SPELLINGS.values(), ids=SPELLINGS.keys())
async def test_file_path_is_read_as_utf8(
    live_root: tuple[str, Path], api: Api, spelling: bytes
) -> None:
    url, root = live_root
    answer = await put_raw(url, api.token, b"/local/" + spelling, b"hello")
    assert answer["code"] == 200, answer
    assert (root / NAME).read_bytes() == b"hello"
    assert sorted(p.name for p in root.iterdir()) == sorted([NAME, "keep.txt"])


NOT_UTF8 = {
    "raw Latin-1": "naïve.txt".encode("latin-1"),
    "raw surrogate": b"\xed\xa0\x80.txt",
    "escaped surrogate": b"%ED%A0%80.txt",
    "raw cut short": NAME.encode()[:8],
}


@pytest.mark.parametrize("spelling", NOT_UTF8.values(), ids=NOT_UTF8.keys())
async def test_file_path_not_utf8_is_refused(
    live_root: tuple[str, Path], api: Api, spelling: bytes
) -> None:
    url, root = live_root
    answer = await put_raw(url, api.token, b"/local/" + spelling, b"hello")
    assert answer["code"] == 400, answer
    assert [p.name for p in root.iterdir()] == ["keep.txt"]
