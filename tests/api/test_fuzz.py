"""A property-based fuzz of every route: whatever arrives, ``/api`` answers the envelope.

Requests are drawn from the app's own description of each route (``app.openapi()``)
and bent out of shape: wrong types, nulls, huge integers, odd text (lone surrogates,
NUL, long names, ``..``), missing and extra keys, and raw bodies that are not JSON,
not an object, or of another content type than they claim. Each route runs on a
fresh server with a Local storage mounted, called as the admin, an ordinary user,
the guest, or with a junk token. An ``/api`` answer must be HTTP 200 with
``{code, message, data}`` and never the catch-all's "internal error"; ``/d`` and
``/p`` must not answer 5xx.

Hypothesis runs derandomized with no example database, so a run is repeatable.
"""

from __future__ import annotations

import functools
import json
import logging
import tempfile
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from manifold.app import ROUTES, Route, create_app
from manifold.config import load_config
from manifold.container import Services
from manifold.errors import ManifoldError
from manifold.models import ADMIN_DEFAULT_PERMISSION, Perm, Role, Storage
from manifold.services.auth.tokens import TokenService
from manifold.services.auth.users import UserInput
from tests.api.fs_helpers import make_tree
from tests.conftest import start_services

EXAMPLES = 60
CLIENT = "203.0.113.7"
SKIPPED_METHODS = {"HEAD", "OPTIONS"}

# -- values --------------------------------------------------------------------

ODD_TEXT = [
    "", " ", "/", "\\", ".", "..", "../../..", "//", "/local", "/local/", "/local/a.txt",
    "/local/dir", "/local/dir/b.bin", "/local/empty", "/local/../../etc", "/local/" + "n" * 300,
    "\x00", "a\x00b", "/local/\x00", "\ud800", "/local/\udfff", "%00", "%zz", "%2e%2e",
    "*", "[", "(?P<", "$1", "\\1", "\u202e", "\U0001f600", "中文", "null", "true", "-1",
    "9" * 30, "x" * 5000, "admin", "guest", "Local", "{}", "[]", "\r\n", "a.txt", "dir",
]  # fmt: skip
HUGE_INTS = [2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1, 10**40]
RAW_BODIES = [
    b"", b"{", b"}", b"[1,", b"null", b"[]", b"[null]", b'"text"', b"0", b"1e999", b"NaN",
    b"\xff\xfe\x00", b'{"path": "\\ud800"}', b'{"path": "/local"', b"[" * 5000,
    b'{"a":' * 2000, b"path=%ff%fe&password=", b"--x\r\nbroken", b"\x00" * 16,
]  # fmt: skip
CONTENT_TYPES = [
    "application/json", "application/json; charset=utf-16", "text/plain", "",
    "application/x-www-form-urlencoded", "multipart/form-data",
    "multipart/form-data; boundary=x", "application/octet-stream", "application/json\x00",
]  # fmt: skip
TASK_KINDS = ["upload", "copy", "offline_download", "offline_download_transfer", "decompress"]

ODD_CHARS = ["\ud800", "\udcff", "\x00", "\x7f", "\u202e", "\ufffd", "\U0001f600", "/", "%"]
any_text = st.text(st.characters(exclude_categories=()), max_size=24)
texts = st.one_of(
    st.sampled_from(ODD_TEXT),
    any_text,
    st.tuples(any_text, st.sampled_from(ODD_CHARS), any_text).map("".join),
    st.tuples(
        st.sampled_from(["/local/", "/local/dir/", "/"]), st.sampled_from(ODD_TEXT) | any_text
    ).map("".join),
)
integers = st.one_of(st.integers(-3, 10), st.sampled_from(HUGE_INTS), st.integers())
json_values = st.recursive(
    st.none() | st.booleans() | integers | st.floats() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)


def values(schema: dict[str, Any], wild: bool) -> SearchStrategy[Any]:
    """Values for ``schema``; when ``wild``, any JSON value may stand in for one."""
    typed = _typed(schema, wild)
    return st.one_of(typed, json_values) if wild else typed


def _typed(schema: dict[str, Any], wild: bool) -> SearchStrategy[Any]:
    if "$ref" in schema:  # a model FastAPI binds itself, under components
        schema = api_schema()["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in schema:
        return st.one_of([values(s, wild) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "string":
        return st.binary(max_size=64) if schema.get("format") == "binary" else texts
    if kind in ("integer", "number"):
        return integers
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(values(schema.get("items", {}), wild), max_size=4)
    if kind == "object":
        return objects(schema, wild)
    return json_values


def objects(schema: dict[str, Any], wild: bool) -> SearchStrategy[dict[str, Any]]:
    """Objects of ``schema``; when ``wild``, keys go missing and unknown keys join."""
    fields = {name: values(s, wild) for name, s in schema.get("properties", {}).items()}
    required = set(schema.get("required", ()))
    if not wild:
        given_fields = {name: s for name, s in fields.items() if name in required}
        optional = {name: s for name, s in fields.items() if name not in required}
        return st.fixed_dictionaries(given_fields, optional=optional)
    extra = st.dictionaries(texts, json_values, max_size=2)
    return st.builds(lambda a, b: {**b, **a}, st.fixed_dictionaries({}, optional=fields), extra)


# -- requests ------------------------------------------------------------------


def escaped(text: str) -> str:
    """``text`` percent-encoded as UTF-8, lone surrogates and all."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def form_encoded(fields: dict[str, Any]) -> bytes:
    return "&".join(f"{escaped(k)}={escaped(as_text(v))}" for k, v in fields.items()).encode()


def multipart(fields: dict[str, Any], boundary: str = "fuzzboundary") -> bytes:
    parts = []
    for name, value in fields.items():
        data = (
            value if isinstance(value, bytes) else as_text(value).encode("utf-8", "surrogatepass")
        )
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{escaped(name)}"'
        if isinstance(value, bytes):
            head += '; filename="f.bin"\r\nContent-Type: application/octet-stream'
        parts.append(head.encode() + b"\r\n\r\n" + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


def encoded(media_type: str, value: Any) -> tuple[str, bytes]:
    """The content type and bytes of ``value`` sent as ``media_type``."""
    if media_type == "application/json":
        return media_type, json.dumps(value).encode()
    if media_type == "application/x-www-form-urlencoded" and isinstance(value, dict):
        return media_type, form_encoded(value)
    if media_type == "multipart/form-data" and isinstance(value, dict):
        return f"{media_type}; boundary=fuzzboundary", multipart(value)
    if isinstance(value, bytes):
        return media_type, value
    return media_type, as_text(value).encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    url: str
    headers: dict[str, bytes]
    content: bytes


@st.composite
def calls(draw: st.DrawFn, route: Route, schema: dict[str, Any]) -> Call:
    method = draw(st.sampled_from([m for m in route.methods if m not in SKIPPED_METHODS]))
    operation = schema["paths"][route.path][method.lower()]
    wild = draw(st.booleans())
    path = route.path
    headers: dict[str, bytes] = {}
    query: dict[str, Any] = {}
    for parameter in operation.get("parameters", []):
        where, name = parameter["in"], parameter["name"]
        if where == "path":
            value = draw(st.sampled_from(TASK_KINDS) | texts) if name == "kind" else draw(texts)
            path = path.replace(f"{{{name}}}", escaped(value) if name == "kind" else value)
        elif draw(st.booleans()) or (parameter.get("required") and not wild):
            value = draw(values(parameter.get("schema", {}), wild))
            if where == "query":
                query[name] = value
            elif where == "header":
                headers[name] = _header(as_text(value))
    if query:
        path += "?" + form_encoded(query).decode()
    content = draw(_bodies(operation, wild, headers))
    return Call(method, path, headers, content)


def _header(text: str) -> bytes:
    # A server never hands on CR, LF or NUL in a header value; anything else may come.
    cleaned = text.replace("\r", "").replace("\n", "").replace("\x00", "")
    return cleaned.encode("utf-8", "surrogatepass")


@st.composite
def _bodies(
    draw: st.DrawFn, operation: dict[str, Any], wild: bool, headers: dict[str, bytes]
) -> bytes:
    content = operation.get("requestBody", {}).get("content", {})
    if content and not (wild and draw(st.booleans())):
        media_type = draw(st.sampled_from(sorted(content)))
        value = draw(values(content[media_type]["schema"], wild))
        content_type, body = encoded(media_type, value)
    else:
        content_type = draw(st.sampled_from(CONTENT_TYPES))
        body = draw(st.sampled_from(RAW_BODIES) | json_values.map(lambda v: json.dumps(v).encode()))
    headers["Content-Type"] = content_type.encode()
    return body


# -- the server under fuzz -----------------------------------------------------

TREE: dict[str, bytes | str] = {"a.txt": "alpha", "dir/b.bin": b"\0" * 8, "empty/": ""}
FUZZER_PERMISSION = int(Perm.WRITE | Perm.RENAME | Perm.MOVE | Perm.COPY | Perm.REMOVE)


@dataclass(slots=True)
class Server:
    """One server for the module; ``restore`` undoes what one route's fuzz did to the next."""

    services: Services
    client: httpx.AsyncClient
    base: Path
    fuzzer_id: int = 0
    tokens: list[str] = field(default_factory=list)
    logged: list[str] = field(default_factory=list)

    async def send(self, call: Call, token: str) -> httpx.Response:
        self.logged.clear()
        headers = {**call.headers, "Authorization": token.encode()} if token else call.headers
        return await self.client.request(
            call.method, call.url, content=call.content, headers=headers
        )

    async def restore(self) -> None:
        """The callers as they were (admin, user, guest, junk) and /local mounted again."""
        make_tree(self.base / "root", TREE)
        users = self.services.users
        admin = await users.admin()
        await users.update(
            admin.id, UserInput("admin", role=Role.ADMIN, permission=ADMIN_DEFAULT_PERMISSION)
        )
        guest = await users.guest()
        await users.update(guest.id, UserInput("guest", role=Role.GUEST))
        fuzzer = await self._fuzzer()
        issuer = TokenService(
            self.services.config.jwt_secret,
            self.services.config.token_expires_in,
            self.services.revocations,
        )
        self.tokens = [issuer.issue(u) for u in (await users.admin(), await users.get(fuzzer))]
        self.tokens += ["", "Bearer \x01junk"]
        await self._mount()

    async def _fuzzer(self) -> int:
        users = self.services.users
        wanted = UserInput("fuzzer", permission=FUZZER_PERMISSION)
        try:
            await users.update(self.fuzzer_id, wanted)
            return self.fuzzer_id
        except ManifoldError:  # gone, or another user took its name: start again
            pass
        for user in (await users.page(1, 1000))[0]:
            if user.role == Role.GENERAL:
                await users.delete(user.id)
        self.fuzzer_id = (await users.create(replace(wanted, password="fuzzer-pw"))).id
        return self.fuzzer_id

    async def _mount(self) -> None:
        storages = self.services.storages
        for storage in (await storages.page(1, 1000))[0]:
            await storages.delete(storage.id)
        addition = json.dumps({"root_folder_path": str(self.base / "root")})
        await storages.create(Storage(id=0, mount_path="/local", driver="Local", addition=addition))


class Recorder(logging.Handler):
    """Keeps what the server logs, to show with a failing example."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@functools.cache
def api_schema() -> dict[str, Any]:
    """The app's OpenAPI document, which the requests are drawn from."""
    with tempfile.TemporaryDirectory() as data_dir, warnings.catch_warnings():
        # An ANY route's methods share one operation id; FastAPI warns, nothing else.
        warnings.filterwarnings("ignore", "Duplicate Operation ID", UserWarning)
        return create_app(load_config(Path(data_dir), env={})).openapi()


@pytest.fixture(scope="module")
async def server_once(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    base = tmp_path_factory.mktemp("fuzz")
    services = await start_services(base / "data")
    app = create_app(services.config, services)
    transport = httpx.ASGITransport(app=app, client=(CLIENT, 40000))
    logger = logging.getLogger("manifold")
    async with httpx.AsyncClient(transport=transport, base_url="http://manifold.test") as client:
        server = Server(services, client, base)
        recorder = Recorder(server.logged)
        logger.addHandler(recorder)
        yield server
        logger.removeHandler(recorder)
    await services.stop()


@pytest.fixture
async def server(server_once: Server, monkeypatch: pytest.MonkeyPatch) -> Server:
    monkeypatch.chdir(server_once.base)  # a relative path that slips through lands here
    await server_once.restore()
    return server_once


# Requests the fuzz once found answering "internal error": integers past int64 (or a
# page times its size past what the database takes), and a lone surrogate in a JSON
# body, which no database or file name can hold. Each answers 400 now.
EDGE_INPUTS = [
    ("GET", "/api/admin/user/get?id=9223372036854775808", None),
    ("GET", "/api/admin/meta/list?page=2147483648&per_page=9007199254740993", None),
    ("POST", "/api/admin/user/create", {"username": "big", "permission": 2**64}),
    ("POST", "/api/fs/rename", {"path": "/local/a.txt", "name": "\ud800"}),
    ("POST", "/api/admin/meta/create", {"path": "/\ud800"}),
]


def assert_envelope(response: httpx.Response, logged: list[str]) -> None:
    where = f"{response.request.method} {response.request.url}: {response.content[:300]!r} {logged}"
    assert response.status_code == 200, where
    assert response.headers.get("content-type", "").startswith("application/json"), where
    body = orjson.loads(response.content)
    assert isinstance(body, dict) and set(body) == {"code", "message", "data"}, where
    assert type(body["code"]) is int and isinstance(body["message"], str), where
    assert body["message"] != "internal error", where


FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
API_ROUTES = [r for r in ROUTES if r.path.startswith("/api/")]
DOWNLOAD_ROUTES = [r for r in ROUTES if r.path.startswith(("/d/", "/p/"))]


@pytest.mark.parametrize("route", API_ROUTES, ids=lambda r: f"{r.path}")
@FUZZ
@given(data=st.data())
async def test_api_route_answers_the_envelope(
    server: Server, route: Route, data: st.DataObject
) -> None:
    call = data.draw(calls(route, api_schema()), label="call")
    token = data.draw(st.sampled_from(server.tokens), label="token")
    assert_envelope(await server.send(call, token), server.logged)


@pytest.mark.parametrize(("method", "url", "body"), EDGE_INPUTS)
async def test_edge_input_is_refused_in_the_envelope(
    server: Server, method: str, url: str, body: Any
) -> None:
    content = b"" if body is None else json.dumps(body).encode()
    call = Call(method, url, {"Content-Type": b"application/json"}, content)
    response = await server.send(call, server.tokens[0])
    assert_envelope(response, server.logged)
    assert response.json()["code"] == 400, response.json()


@pytest.mark.parametrize("route", DOWNLOAD_ROUTES, ids=lambda r: f"{r.path}")
@FUZZ
@given(data=st.data())
async def test_download_route_never_answers_5xx(
    server: Server, route: Route, data: st.DataObject
) -> None:
    path = data.draw(texts, label="path")
    sign = data.draw(st.none() | texts, label="sign")
    url = route.path.replace("{path:path}", escaped(path).replace("%2F", "/"))
    if sign is not None:
        url += "?sign=" + escaped(sign)
    call = Call(data.draw(st.sampled_from(route.methods)), url, {}, b"")
    response = await server.send(call, data.draw(st.sampled_from(server.tokens)))
    assert response.status_code < 500, (url, response.content[:300], server.logged)
