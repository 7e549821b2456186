"""The envelope around every answer: unknown routes, bad bodies, crashes, CORS, ping."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from manifold import app as app_module
from manifold.app import Route, create_app
from manifold.container import Services
from manifold.errors import BadRequest, ManifoldError, UpstreamStatus
from tests.conftest import Api

LOGIN = "/api/auth/login"


@pytest.fixture
async def crashing(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    """An app with extra routes: one fails with an unexpected error, one quotes its input."""
    app = create_app(services.config, services)

    async def boom() -> Response:
        raise RuntimeError("secret-value")

    async def quoting() -> Response:
        # json.loads turns a body's "\ud800" into a lone surrogate, which messages quote.
        raise BadRequest("failed get storage; rawPath: /\ud800")

    app.add_api_route("/api/boom", boom, methods=["GET"])
    app.add_api_route("/api/quoting", quoting, methods=["GET"])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://manifold.test") as client:
        yield client


async def post_raw(api: Api, path: str, content: bytes) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    return await api.client.post(path, content=content, headers=headers)


# -- unknown routes and methods ---------------------------------------------


async def test_unknown_api_path_answers_404_in_the_envelope(api: Api) -> None:
    body = await api.get("/api/nope")
    assert body == {"code": 404, "message": "not found", "data": None}


async def test_unknown_api_path_with_post(api: Api) -> None:
    body = await api.post("/api/nope/deeper", {"a": 1})
    assert body == {"code": 404, "message": "not found", "data": None}


async def test_envelope_is_json_with_charset(api: Api) -> None:
    response = await api.client.get("/api/nope")
    assert response.headers["content-type"] == "application/json; charset=utf-8"


async def test_wrong_method_on_a_known_route(api: Api) -> None:
    body = await api.call("DELETE", "/api/me")
    assert body == {"code": 405, "message": "method not allowed", "data": None}


async def test_unknown_path_outside_api_is_plain(api: Api) -> None:
    # A GET there is a page of the web interface (tests/api/test_web.py); a POST is not.
    response = await api.client.post("/nothing-here")
    assert response.status_code == 404
    assert response.text == "Not Found"


# -- request bodies ---------------------------------------------------------


async def test_malformed_json_on_login(api: Api) -> None:
    response = await post_raw(api, LOGIN, b'{"username": "admin",')
    assert response.status_code == 200
    body = response.json()
    assert body["code"] == 400
    assert body["data"] is None
    assert body["message"].startswith("body: invalid JSON")


async def test_malformed_json_message_names_the_body(api: Api) -> None:
    response = await post_raw(api, LOGIN, b'{"username": "admin",')
    assert response.json()["message"].startswith("body: ")


async def test_empty_body_on_login(api: Api) -> None:
    body = await api.post(LOGIN)
    assert body == {"code": 400, "message": "body: Field required", "data": None}


async def test_wrong_type_names_the_field(api: Api) -> None:
    body = await api.post(LOGIN, {"username": 42, "password": "x"})
    assert body == {
        "code": 400,
        "message": "username: Input should be a valid string",
        "data": None,
    }


async def test_missing_field_is_its_zero_value(api: Api) -> None:
    body = await api.post(LOGIN, {"password": "x", "username": None})
    assert body == {"code": 400, "message": "username is empty", "data": None}


async def test_every_wrong_field_is_named(api: Api) -> None:
    body = await api.post(LOGIN, {"username": "admin", "password": 1, "otp_code": []})
    message = "password: Input should be a valid string; otp_code: Input should be a valid string"
    assert body == {"code": 400, "message": message, "data": None}


async def test_body_that_is_not_an_object(api: Api) -> None:
    body = await api.post(LOGIN, ["admin", "pw"])
    message = "body: Input should be a valid dictionary or object to extract fields from"
    assert body == {"code": 400, "message": message, "data": None}


async def test_wrong_query_type_names_the_parameter(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/user/get", params={"id": "x"})
    message = "id: Input should be a valid integer, unable to parse string as an integer"
    assert body == {"code": 400, "message": message, "data": None}


async def test_unknown_fields_are_ignored(api: Api) -> None:
    body = await api.post(LOGIN, {"username": "admin", "password": "nope", "extra": True})
    assert body == {"code": 400, "message": "password is incorrect", "data": None}


# -- unexpected errors ------------------------------------------------------


async def test_unexpected_error_answers_internal_error(
    crashing: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    response = await crashing.get("/api/boom")
    assert response.status_code == 200
    assert response.json() == {"code": 500, "message": "internal error", "data": None}
    assert "secret-value" not in response.text


async def test_unexpected_error_logs_one_line_without_traceback(
    crashing: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await crashing.get("/api/boom")
    ours = [record for record in caplog.records if record.name == "manifold"]
    assert [(r.levelno, r.getMessage()) for r in ours] == [
        (logging.ERROR, "unhandled RuntimeError in GET /api/boom")
    ]
    assert all(record.exc_info is None and record.exc_text is None for record in caplog.records)
    assert "secret-value" not in caplog.text
    assert "Traceback" not in caplog.text


async def test_server_keeps_answering_after_an_unexpected_error(
    crashing: httpx.AsyncClient,
) -> None:
    await crashing.get("/api/boom")
    response = await crashing.get("/ping")
    assert response.text == "pong"


async def test_error_quoting_a_lone_surrogate_is_still_the_envelope(
    crashing: httpx.AsyncClient,
) -> None:
    response = await crashing.get("/api/quoting")
    assert response.json() == {
        "code": 400,
        "message": "failed get storage; rawPath: /\ufffd",
        "data": None,
    }


# -- CORS and ping ----------------------------------------------------------


async def test_cors_preflight(api: Api) -> None:
    headers = {
        "Origin": "https://files.example.com",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    response = await api.client.options(LOGIN, headers=headers)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert "POST" in response.headers["access-control-allow-methods"]
    allowed = response.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed


async def test_cors_header_on_a_plain_request(api: Api) -> None:
    response = await api.client.get(
        "/api/public/settings", headers={"Origin": "https://files.example.com"}
    )
    assert response.headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize("method", ["GET", "POST", "PUT"])
async def test_ping(api: Api, method: str) -> None:
    response = await api.client.request(method, "/ping")
    assert response.status_code == 200
    assert response.text == "pong"


def _all_errors(cls: type[ManifoldError] = ManifoldError) -> list[type[ManifoldError]]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _all_errors(child))]


async def test_every_error_class_renders_the_envelope(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The error vocabulary itself; drivers' private refinements of it are theirs.
    classes = {cls.__name__: cls for cls in _all_errors() if cls.__module__ == "manifold.errors"}

    async def raising(request: Request) -> Response:
        cls = classes[request.query_params["name"]]
        if cls is UpstreamStatus:
            raise UpstreamStatus(502)
        raise cls(data={"n": 1}) if cls is ManifoldError else cls()

    route = Route(("GET",), "/api/raise", raising)
    monkeypatch.setattr(app_module, "ROUTES", (*app_module.ROUTES, route))
    app = create_app(services.config, services)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://m.test") as client:
        for name, cls in classes.items():
            response = await client.get("/api/raise", params={"name": name})
            assert response.status_code == 200, name
            body = response.json()
            assert set(body) == {"code", "message", "data"}, name
            assert body["code"] == cls.code and body["message"], name
    assert len(classes) > 20


async def test_null_password_is_no_password(api: Api) -> None:
    # What clients send when they have no password: Go reads null as "".
    fields = {"path": "/", "password": None, "page": None}
    body = await api.post("/api/fs/list", fields, token=await api.login())
    # No storage is mounted here, so AList's own answer for the root, not a 400.
    assert (body["code"], body["message"]) == (
        500,
        "storage not found; please add a storage first",
    )


async def test_wrong_json_type_is_still_refused(api: Api) -> None:
    body = await api.post("/api/fs/list", {"path": "/", "page": "1"}, token=await api.login())
    assert (body["code"], body["message"]) == (400, "page: Input should be a valid integer")
