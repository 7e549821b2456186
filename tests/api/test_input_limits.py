"""Hostile input on every route: numbers beyond int64, broken Unicode, oversized bodies.

Each class of attack is run over every route that takes that kind of input, found from
the route table itself, so a new route is covered the day it is added.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

import httpx
import pytest
from pydantic import BaseModel

from manifold.api.routes.fs import DirsBody, GetBody, ListBody, OtherBody
from manifold.api.routes.offline import AddBody
from manifold.api.routes.search import SearchBody, UpdateIndexBody
from manifold.app import ROUTES, Route, create_app
from manifold.config import Config, load_config
from tests.api.fs_helpers import add_meta, make_tree, mount_local, save_settings
from tests.conftest import Api, start_services

INT64_OUTSIDE = (2**63, -(2**63) - 1)

# The ANY routes bind their fields inside the handler (``api.binding``), not through
# the signature; these are the models they bind.
BOUND_MODELS: dict[str, type[BaseModel]] = {
    "/api/fs/list": ListBody,
    "/api/fs/get": GetBody,
    "/api/fs/dirs": DirsBody,
    "/api/fs/other": OtherBody,
    "/api/fs/search": SearchBody,
    "/api/admin/index/update": UpdateIndexBody,
    "/api/fs/add_offline_download": AddBody,
}


@dataclass(frozen=True)
class RouteInputs:
    method: str
    url: str
    query_ints: tuple[str, ...]
    model: type[BaseModel] | None
    as_list: bool  # the body is a JSON list of ``model``

    def __str__(self) -> str:
        return f"{self.method} {self.url}"


def _route_inputs(route: Route) -> RouteInputs:
    hints = get_type_hints(route.endpoint, include_extras=True)
    query_ints = tuple(name for name, hint in hints.items() if _is_int(hint))
    model, as_list = BOUND_MODELS.get(route.path), False
    for name, hint in hints.items():
        if name == "return":
            continue
        if get_origin(hint) is list and _is_model(get_args(hint)[0]):
            model, as_list = get_args(hint)[0], True
        elif _is_model(hint):
            model = hint
    method = "POST" if "POST" in route.methods else route.methods[0]
    url = route.path.replace("{kind}", "upload").replace("{path:path}", "local/x")
    return RouteInputs(method, url, query_ints, model, as_list)


def _is_int(hint: Any) -> bool:
    return hint is int or (get_origin(hint) is Annotated and get_args(hint)[0] is int)


def _is_model(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, BaseModel)


INPUTS = [_route_inputs(route) for route in ROUTES]


def _int_fields(model: type[BaseModel]) -> list[str]:
    return [name for name, info in model.model_fields.items() if info.annotation is int]


def _text_fields(model: type[BaseModel]) -> list[str]:
    texts = (str, list[str])
    return [name for name, info in model.model_fields.items() if info.annotation in texts]


def _base_body(model: type[BaseModel]) -> dict[str, Any]:
    """The smallest body that passes validation: required texts filled in."""
    body: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if info.is_required():
            body[name] = [] if info.annotation == list[str] else "/x"
    return body


def int_cases() -> Iterator[Any]:
    for inputs in INPUTS:
        for name in inputs.query_ints:
            yield pytest.param(inputs, "query", name, id=f"{inputs}?{name}")
        if inputs.model is not None:
            for name in _int_fields(inputs.model):
                yield pytest.param(inputs, "body", name, id=f"{inputs} body.{name}")


def text_cases() -> Iterator[Any]:
    for inputs in INPUTS:
        if inputs.model is not None:
            for name in _text_fields(inputs.model):
                yield pytest.param(inputs, name, id=f"{inputs} body.{name}")


@pytest.fixture(scope="module")
async def admin(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    """One admin client for the module, with a storage mounted and search on, so no
    route stops early. Refused requests change nothing, so the tests can share it."""
    tmp_path = tmp_path_factory.mktemp("limits")
    services = await start_services(tmp_path / "data")
    transport = httpx.ASGITransport(
        app=create_app(services.config, services), client=("203.0.113.7", 40000)
    )
    async with httpx.AsyncClient(transport=transport, base_url="http://manifold.test") as client:
        api = await Api(client, services).as_admin()
        await mount_local(
            api, "/local", make_tree(tmp_path / "root", {"a.txt": "a", "locked/a.txt": "b"})
        )
        await save_settings(api, search_index="database", sign_all="false")
        await add_meta(api, "/local/locked", password="pw", p_sub=True)
        yield api
    await services.stop()


@pytest.fixture
def config(admin: Api, monkeypatch: pytest.MonkeyPatch) -> Iterator[Config]:
    """The shared server's configuration; what a test changes is put back after it."""
    for key in ("max_request_body", "trusted_proxies", "site_url"):
        if hasattr(admin.services.config, key):
            monkeypatch.setattr(admin.services.config, key, getattr(admin.services.config, key))
    yield admin.services.config


async def send(
    api: Api, inputs: RouteInputs, body: dict[str, Any] | None, query: dict[str, Any]
) -> dict[str, Any]:
    content = None
    if body is not None:
        # json.dumps escapes a lone surrogate as \ud800, exactly as an attacker sends it.
        content = json.dumps([body] if inputs.as_list else body)
    response = await api.client.request(
        inputs.method,
        inputs.url,
        params=query,
        content=content,
        headers={"Authorization": api.token, "Content-Type": "application/json"},
    )
    assert response.status_code in (200, 400), response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.mark.parametrize("value", INT64_OUTSIDE)
@pytest.mark.parametrize(("inputs", "where", "name"), list(int_cases()))
async def test_numbers_beyond_int64_are_refused(
    admin: Api, inputs: RouteInputs, where: str, name: str, value: int
) -> None:
    query = {q: 1 for q in inputs.query_ints}
    body = _base_body(inputs.model) if inputs.model is not None else None
    if where == "query":
        query[name] = value
    else:
        assert body is not None
        body[name] = value
    result = await send(admin, inputs, body, query)
    assert result["code"] == 400, result
    assert name in result["message"] or "invalid JSON" in result["message"], result


PAGED = [
    i for i in INPUTS if "page" in i.query_ints or (i.model and "page" in _int_fields(i.model))
]


@pytest.mark.parametrize("inputs", PAGED, ids=str)
async def test_pages_whose_offset_overflows_are_refused(admin: Api, inputs: RouteInputs) -> None:
    """Each number fits int64, their product does not: the offset must never reach SQL."""
    huge = {"page": 2**40, "per_page": 2**40}
    query = {q: 1 for q in inputs.query_ints}
    body = _base_body(inputs.model) if inputs.model is not None else None
    if "page" in inputs.query_ints:
        query.update(huge)
    else:
        assert body is not None
        body.update(huge, parent="/", keywords="a")
    result = await send(admin, inputs, body, query)
    assert result["code"] == 400, result


@pytest.mark.parametrize(("inputs", "name"), list(text_cases()))
async def test_lone_surrogates_in_bodies_are_refused(
    admin: Api, inputs: RouteInputs, name: str
) -> None:
    assert inputs.model is not None
    body = _base_body(inputs.model)
    body[name] = (
        ["/local/\ud800"]
        if inputs.model.model_fields[name].annotation == list[str]
        else "/local/\ud800"
    )
    query = {q: 1 for q in inputs.query_ints}
    result = await send(admin, inputs, body, query)
    assert result["code"] == 400, result


BROKEN_UTF8 = "%ED%A0%80"  # a UTF-16 surrogate written as UTF-8: not valid UTF-8

URL_PATH_CASES = [
    f"/d/local/{BROKEN_UTF8}",
    f"/p/local/{BROKEN_UTF8}",
    f"/d/local/a{BROKEN_UTF8}.txt?sign=x",
    f"/api/fs/list?path=/local/{BROKEN_UTF8}",
    f"/api/fs/get?path=/local/{BROKEN_UTF8}",
    f"/api/fs/dirs?path={BROKEN_UTF8}",
    f"/api/fs/search?parent=/&keywords={BROKEN_UTF8}&page=1&per_page=1",
    f"/api/admin/user/del_cache?username={BROKEN_UTF8}",
]


@pytest.mark.parametrize("url", URL_PATH_CASES)
async def test_urls_that_are_not_utf8_are_refused(admin: Api, url: str) -> None:
    method = "POST" if "del_cache" in url else "GET"
    response = await admin.client.request(method, url, headers={"Authorization": admin.token})
    body = response.json()
    assert body["code"] == 400, body
    # Downloads answer a real status; the JSON API answers 200 around the envelope.
    assert response.status_code == (400 if urlsplit(url).path[:3] in ("/d/", "/p/") else 200)


# --- request bodies ------------------------------------------------------------------

SMALL_CAP = 4096

JSON_ROUTES = [
    ("POST", "/api/auth/login"),
    ("POST", "/api/fs/list"),
    ("POST", "/api/fs/mkdir"),
    ("POST", "/api/admin/user/create"),
    ("POST", "/api/admin/setting/save"),
    ("POST", "/api/admin/task/upload/delete_some"),
    ("POST", "/api/fs/search"),
]


def padded_json(size: int) -> bytes:
    return b'{"username": "' + b"a" * size + b'", "path": "/"}'


async def chunks(body: bytes, size: int = 1000) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.fixture
def capped(admin: Api, config: Config) -> Api:
    config.max_request_body = SMALL_CAP
    return admin


@pytest.mark.parametrize("streamed", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("media", ["application/json", "application/x-www-form-urlencoded"])
@pytest.mark.parametrize(("method", "url"), JSON_ROUTES)
async def test_bodies_over_the_cap_are_refused(
    capped: Api, method: str, url: str, media: str, streamed: bool
) -> None:
    body = padded_json(SMALL_CAP + 1)
    content: bytes | AsyncIterator[bytes] = chunks(body) if streamed else body
    headers = {"Authorization": capped.token, "Content-Type": media}
    response = await capped.client.request(method, url, content=content, headers=headers)
    assert response.json() == {"code": 413, "message": "request body too large", "data": None}


@pytest.mark.parametrize(("method", "url"), JSON_ROUTES)
async def test_bodies_within_the_cap_are_read(capped: Api, method: str, url: str) -> None:
    body = padded_json(SMALL_CAP - 100)
    headers = {"Authorization": capped.token, "Content-Type": "application/json"}
    response = await capped.client.request(method, url, content=body, headers=headers)
    assert response.json()["code"] != 413


@pytest.mark.parametrize("streamed", [False, True], ids=["content-length", "chunked"])
async def test_uploads_are_not_capped(capped: Api, streamed: bool) -> None:
    root = capped.services.config.data_dir.parent / "root"
    data = b"u" * (SMALL_CAP * 8)
    headers = {"Authorization": capped.token, "File-Path": "/local/put.bin"}
    if streamed:
        put = await capped.client.put("/api/fs/put", content=chunks(data), headers=headers)
        # A streamed upload has no Content-Length, which /api/fs/put needs.
        assert put.json()["code"] != 413
    else:
        put = await capped.client.put("/api/fs/put", content=data, headers=headers)
        assert put.json()["code"] == 200, put.text
        assert (root / "put.bin").read_bytes() == data
    form = await capped.client.put(
        "/api/fs/form",
        files={"file": ("form.bin", data)},
        headers={"Authorization": capped.token, "File-Path": "/local/form.bin"},
    )
    assert form.json()["code"] == 200, form.text
    assert (root / "form.bin").read_bytes() == data


def test_the_cap_has_a_default_of_a_few_mebibytes(tmp_path: Path) -> None:
    assert 1 << 20 <= load_config(tmp_path).max_request_body <= 16 << 20


# --- downloads and generated links -------------------------------------------------------

DOWNLOAD_CASES = [
    ("/d/local/a.txt", {}, 200),
    ("/p/local/a.txt", {}, 200),
    ("/d/local/a.txt", {"Range": "bytes=0-0"}, 206),
    ("/p/local/a.txt", {"Range": "bytes=0-0"}, 206),
    ("/d/local/a.txt", {"Range": "bytes=50-60"}, 416),
    ("/d/local/missing.txt", {}, 404),
    ("/p/local/missing.txt", {}, 404),
    ("/d/nowhere/a.txt", {}, 404),
    ("/d/local/locked/a.txt?sign=bad", {}, 401),
    ("/p/local/locked/a.txt", {}, 401),
]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize(("url", "headers", "status"), DOWNLOAD_CASES)
async def test_downloads_are_never_sniffed(
    admin: Api, url: str, headers: dict[str, str], status: int, method: str
) -> None:
    response = await admin.client.request(method, url, headers=headers)
    assert response.status_code == status, response.text
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("/api/public/settings", {}),  # answered before routing
        ("/api/public/settings", {"Origin": "https://x.example"}),
        ("/api/no/such/route", {}),
        ("/ping", {}),
    ],
)
async def test_every_answer_is_never_sniffed(admin: Api, url: str, headers: dict[str, str]) -> None:
    response = await admin.client.get(url, headers=headers)
    assert response.headers["x-content-type-options"] == "nosniff"


async def raw_url(api: Api, headers: dict[str, str]) -> str:
    sent = {"Authorization": api.token, **headers}
    response = await api.client.post("/api/fs/get", json={"path": "/local/a.txt"}, headers=sent)
    url: str = response.json()["data"]["raw_url"]
    return url


FORWARDED = {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}


async def test_raw_url_ignores_forwarded_host_from_anyone(admin: Api) -> None:
    assert (await raw_url(admin, FORWARDED)).startswith("http://manifold.test/d/local/a.txt")


async def test_raw_url_takes_forwarded_host_from_a_trusted_proxy(
    admin: Api, config: Config
) -> None:
    config.trusted_proxies = ["203.0.113.0/24"]
    assert (await raw_url(admin, FORWARDED)).startswith("https://evil.example/d/local/a.txt")


async def test_raw_url_is_built_from_site_url(admin: Api, config: Config) -> None:
    config.site_url = "https://files.example.org/base"
    config.trusted_proxies = ["203.0.113.0/24"]
    url = await raw_url(admin, FORWARDED)
    assert url.startswith("https://files.example.org/base/d/local/a.txt")


async def test_link_is_built_from_site_url(admin: Api, config: Config) -> None:
    config.site_url = "https://files.example.org"
    sent = {"Authorization": admin.token, **FORWARDED}
    response = await admin.client.post("/api/fs/link", json={"path": "/local/a.txt"}, headers=sent)
    assert response.json()["data"]["url"].startswith("https://files.example.org/p/local/a.txt")


@pytest.mark.parametrize("route", ["/api/fs/list", "/api/fs/get", "/api/fs/dirs", "/api/fs/mkdir"])
async def test_a_path_of_a_million_segments_is_refused_at_once(admin: Api, route: str) -> None:
    """2 MB of ``/a`` fits in a body; looking up each ancestor's meta and resolving each
    ancestor's links took minutes, the event loop blocked for much of it."""
    path = "/local" + "/a" * 1_000_000
    async with asyncio.timeout(60):  # fails only if the server works for minutes
        body = await admin.post(route, {"path": path})
    assert (body["code"], body["message"]) == (400, "path is longer than 32768 characters")
