"""No spelling of a path reaches a file outside a Local root, through any read route.

A secret file (and a folder) carrying a unique marker lie next to the Local root;
symlinks inside the root point at them. Every attempt goes through every read
endpoint as the admin and as a user confined to ``/local/sub``, and through
``/d/`` and ``/p/`` with a valid sign for the attempted path, sent as raw bytes so
encoded and dot-segment forms reach the server the way a real HTTP server passes
them on.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from manifold.app import create_app
from manifold.container import Services
from manifold.paths import clean_path
from tests.api.fs_helpers import RELATIVE, make_tree, mount_local
from tests.conftest import Api

MARKER = "TOP-SECRET-" + secrets.token_hex(8)
SECRET_FILE = f"secret-{MARKER}.txt"
SECRET_DIR = f"outside-{MARKER}-dir"
USER_PW = "confined-password-1"

# API paths as a client would send them in the JSON body.
ATTEMPTS = [
    "../",
    "..",
    "../../etc/passwd",
    f"../{SECRET_FILE}",
    "..%2f..%2fetc",
    f"..%2f{SECRET_FILE}",
    "%2e%2e/%2e%2e/etc/passwd",
    f"%2e%2e/{SECRET_FILE}",
    "..\\..\\etc",
    f"..\\{SECRET_FILE}",
    "/local/../../etc",
    f"/local/../../{SECRET_FILE}",
    "/local/sub/../../../etc",
    f"/local/sub/../../{SECRET_FILE}",
    "/local/\x00/../etc",
    f"/local/a.txt\x00/../../{SECRET_FILE}",
    "/etc/passwd",
    str(Path("/etc/passwd")),
    "/local/evil_file",
    "/local/evil_dir",
    "/local/evil_dir/inner.txt",
    "/local/sub/evil_file",
    "/local/sub/evil_dir",
    "/local/sub/evil_dir/inner.txt",
    "/evil_file",
    "/evil_dir",
    "/evil_dir/inner.txt",
    "/local/sub/./../../evil_file",
]

RELATIVE_ATTEMPTS = [a for a in ATTEMPTS if ".." in a.replace("\\", "/").split("/")]

# Raw URL paths after /d or /p, exactly as they go on the wire.
RAW_DOWNLOADS = [
    f"/../{SECRET_FILE}",
    f"/local/../../{SECRET_FILE}",
    f"/local/..%2f..%2f{SECRET_FILE}",
    f"/local/%2e%2e/%2e%2e/{SECRET_FILE}",
    f"/%2e%2e/%2e%2e/{SECRET_FILE}",
    f"/local/..%5c..%5c{SECRET_FILE}",
    f"/local/sub/../../../{SECRET_FILE}",
    f"/local/a.txt%00/../../{SECRET_FILE}",
    "/etc/passwd",
    "/local/evil_file",
    "/local/evil_dir/inner.txt",
    "/local/sub/evil_file",
    "/local/sub/evil_dir/inner.txt",
    f"/local/evil_dir/..%2f{SECRET_FILE}",
    f"/local//..//..//{SECRET_FILE}",
]


@dataclass
class World:
    api: Api
    raw: httpx.AsyncClient
    user_token: str
    tmp: Path


class RawPath:
    """Puts the ``x-raw-path`` header's bytes in the scope, as an HTTP server would.

    httpx removes dot segments from URLs before sending; servers such as uvicorn
    do not, they only percent-decode ``path``. This restores that behaviour.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            raw = headers.get(b"x-raw-path")
            if raw is not None:
                scope = {**scope, "raw_path": raw, "path": unquote(raw.decode("latin-1"))}
        await self.app(scope, receive, send)


@pytest.fixture
async def world(api: Api, services: Services, tmp_path: Path) -> AsyncIterator[World]:
    root = make_tree(tmp_path / "root", {"a.txt": "inside", "sub/b.txt": "inside b"})
    (tmp_path / SECRET_FILE).write_text(MARKER)
    make_tree(tmp_path / SECRET_DIR, {"inner.txt": MARKER, f"{SECRET_FILE}": MARKER})
    for folder in (root, root / "sub"):
        (folder / "evil_file").symlink_to(tmp_path / SECRET_FILE)
        (folder / "evil_dir").symlink_to(tmp_path / SECRET_DIR, target_is_directory=True)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text(MARKER)
    await mount_local(api, "/local", root)
    await api.make_user("confined", USER_PW, base_path="/local/sub", permission=0x30FF)
    token = await api.login("confined", USER_PW)
    await api.as_admin()
    app = RawPath(create_app(services.config, services))
    transport = httpx.ASGITransport(app=app, client=("203.0.113.8", 40001))
    async with httpx.AsyncClient(transport=transport, base_url="http://manifold.test") as raw:
        yield World(api, raw, token, tmp_path)


def assert_no_leak(body: Any, context: object) -> None:
    text = str(_without_echo(body))
    assert MARKER not in text, context
    assert "evil_file" not in _listed_names(body), context
    assert "evil_dir" not in _listed_names(body), context


def _without_echo(body: Any) -> Any:
    """The body less the requested path that AList's "storage not found" texts repeat
    (``...; rawPath: <path>``): the client's own input is not a leak."""
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return {**body, "message": body["message"].split("; rawPath: ")[0]}
    return body


def _listed_names(body: Any) -> list[str]:
    if not isinstance(body, dict) or body.get("code") != 200:
        return []
    data = body["data"]
    if isinstance(data, list):
        return [d["name"] for d in data]
    if isinstance(data, dict) and isinstance(data.get("content"), list):
        return [o["name"] for o in data["content"]]
    return []


ENDPOINTS = ["/api/fs/list", "/api/fs/get", "/api/fs/dirs", "/api/fs/other"]


@pytest.mark.parametrize("who", ["admin", "confined"])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_api_attempts_never_leak(world: World, endpoint: str, who: str) -> None:
    token = world.api.token if who == "admin" else world.user_token
    for attempt in ATTEMPTS:
        for extra in ({}, {"force_root": True}, {"refresh": True}):
            body = await world.api.post(endpoint, {"path": attempt, **extra}, token=token)
            assert_no_leak(body, (endpoint, who, attempt, extra))
        # The query-string form must not leak either.
        response = await world.raw.get(endpoint, params={"path": attempt})
        assert MARKER not in response.text, (endpoint, who, attempt)


@pytest.mark.parametrize("who", ["admin", "confined"])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("attempt", RELATIVE_ATTEMPTS)
async def test_relative_segments_are_refused(
    world: World, endpoint: str, who: str, attempt: str
) -> None:
    token = world.api.token if who == "admin" else world.user_token
    body = await world.api.post(endpoint, {"path": attempt}, token=token)
    assert (body["code"], body["message"]) == (403, RELATIVE), body


@pytest.mark.parametrize("who", ["admin", "confined"])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_nul_byte_is_refused(world: World, endpoint: str, who: str) -> None:
    token = world.api.token if who == "admin" else world.user_token
    body = await world.api.post(endpoint, {"path": "/local/a.txt\x00"}, token=token)
    assert body["code"] == 403, body


async def test_listings_hide_escaping_links(world: World) -> None:
    for path in ("/local", "/local/sub"):
        body = await world.api.post("/api/fs/list", {"path": path})
        assert body["code"] == 200
        shown = _listed_names(body)
        assert "evil_file" not in shown
        assert "evil_dir" not in shown
        assert SECRET_FILE not in shown
    body = await world.api.post("/api/fs/list", {"path": "/"}, token=world.user_token)
    assert sorted(_listed_names(body)) == ["b.txt"]


async def test_confined_user_cannot_reach_siblings(world: World) -> None:
    for path in ("/a.txt", "/../a.txt", "/sub/../a.txt"):
        body = await world.api.post("/api/fs/get", {"path": path}, token=world.user_token)
        assert body["code"] != 200, (path, body)
        assert "inside" not in str(body)


def _signed_raw(world: World, prefix: str, raw: str) -> str:
    served = clean_path(unquote(raw))
    sign = world.api.services.signer.sign(served)
    return f"{prefix}{raw}?sign={quote(sign, safe='')}"


@pytest.mark.parametrize("prefix", ["/d", "/p"])
@pytest.mark.parametrize("raw", RAW_DOWNLOADS)
async def test_downloads_never_leak(world: World, prefix: str, raw: str) -> None:
    wire = _signed_raw(world, prefix, raw)
    path_part, _, query = wire.partition("?")
    for method in ("GET", "HEAD"):
        response = await world.raw.request(
            method,
            f"/placeholder?{query}",
            headers={"x-raw-path": path_part},
        )
        assert MARKER not in response.text, (prefix, raw, method)
        assert response.status_code >= 400, (prefix, raw, method, response.status_code)


async def test_raw_path_header_reaches_the_server(world: World) -> None:
    """The helper really delivers an unnormalised path: a good download still works."""
    wire = _signed_raw(world, "/d", "/local/sub/../a.txt")
    path_part, _, query = wire.partition("?")
    response = await world.raw.get(f"/placeholder?{query}", headers={"x-raw-path": path_part})
    # ``..`` is cleaned to /local/a.txt, which is inside the root: it is served.
    assert response.status_code == 200
    assert response.content == b"inside"
