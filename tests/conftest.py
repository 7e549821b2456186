"""Shared fixtures: a real app on a real database, driven through ASGI."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from manifold.app import create_app
from manifold.config import load_config
from manifold.container import Services
from manifold.errors import ManifoldError
from manifold.services.auth import passwords
from tests.fixtures.redisserver import RedisServer, have_redis, start_redis

ADMIN_PASSWORD = "admin-secret-pw"


class Api:
    """A client that speaks the envelope: every call returns the decoded body."""

    def __init__(
        self, client: httpx.AsyncClient, services: Services, app: FastAPI | None = None
    ) -> None:
        self.client = client
        self.services = services
        self.app = app
        self.token = ""
        # Tokens by (username, password): a login is an argon2 verify, and helpers log
        # in on every call. A kept token is reused only while the server accepts it.
        self._tokens: dict[tuple[str, str], str] = {}

    async def call(
        self,
        method: str,
        path: str,
        json: Any = None,
        params: dict[str, Any] | None = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        sent = dict(headers or {})
        auth = self.token if token is None else token
        if auth:
            sent["Authorization"] = auth
        response = await self.client.request(method, path, json=json, params=params, headers=sent)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        assert set(body) == {"code", "message", "data"}, body
        return body

    async def get(self, path: str, **kw: Any) -> dict[str, Any]:
        return await self.call("GET", path, **kw)

    async def post(self, path: str, json: Any = None, **kw: Any) -> dict[str, Any]:
        return await self.call("POST", path, json=json, **kw)

    async def login(
        self, username: str = "admin", password: str = ADMIN_PASSWORD, fresh: bool = False
    ) -> str:
        """A token for ``username``; a kept one while it still works, unless ``fresh``."""
        kept = self._tokens.get((username, password))
        if kept is not None and not fresh and await self._accepted(kept, username):
            return kept
        body = await self.post("/api/auth/login", {"username": username, "password": password})
        assert body["code"] == 200, body
        token: str = body["data"]["token"]
        self._tokens[(username, password)] = token
        return token

    async def _accepted(self, token: str, username: str) -> bool:
        try:
            caller = await self.services.auth.authenticate(token, "")
        except ManifoldError:
            return False
        return caller.user.username == username and not caller.user.otp_secret

    async def as_admin(self) -> Api:
        self.token = await self.login()
        return self

    async def make_user(self, username: str, password: str, **fields: Any) -> int:
        admin = await self.login()
        user = {"username": username, "password": password, **fields}
        body = await self.post("/api/admin/user/create", user, token=admin)
        assert body["code"] == 200, body
        listing = await self.get("/api/admin/user/list", token=admin)
        return int(next(u["id"] for u in listing["data"]["content"] if u["username"] == username))

    async def mount(self, driver: str, mount_path: str, addition: dict[str, Any]) -> str:
        """Create a storage as the admin (asserting it started); the admin's token."""
        admin = await self.login()
        body = {"mount_path": mount_path, "driver": driver, "addition": json.dumps(addition)}
        created = await self.post("/api/admin/storage/create", body, token=admin)
        assert created["code"] == 200, created
        return admin


# A database migrated and filled with defaults once per session, copied per test:
# migrations and the first start are most of a test's set-up otherwise.
_TEMPLATE: list[Path] = []


async def start_services(
    data_dir: Path, database_url: str = "", env: Mapping[str, str] | None = None
) -> Services:
    """Services on ``data_dir``, their configuration overridden by ``env``
    (``MANIFOLD_`` variables)."""
    if not database_url:
        await _from_template(data_dir)
    env = dict(env or {})
    if database_url:
        env["MANIFOLD_DATABASE_URL"] = database_url
    services = Services.build(load_config(data_dir, env=env))
    await services.start(admin_password=ADMIN_PASSWORD)
    # A test of what survives a restart reads its storages at once: they start first.
    await services.storages.started()
    return services


async def _from_template(data_dir: Path) -> None:
    if not _TEMPLATE:
        folder = Path(tempfile.mkdtemp(prefix="manifold-template-")) / "data"
        made = Services.build(load_config(folder, env={}))
        await made.start(admin_password=ADMIN_PASSWORD)
        await made.stop()
        _TEMPLATE.append(folder / "data.db")
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = data_dir / "data.db"
    if not target.exists():  # a restart keeps its own database
        shutil.copyfile(_TEMPLATE[0], target)
        target.chmod(0o600)


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashing() -> Iterator[None]:
    """Hashes made in tests cost little; the template database goes at the end."""
    passwords.use_cost(time_cost=1, memory_cost=8, parallelism=1)
    yield
    for template in _TEMPLATE:
        shutil.rmtree(template.parent.parent, ignore_errors=True)


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    started = await start_services(tmp_path / "data")
    yield started
    await started.stop()


@asynccontextmanager
async def open_api(services: Services, address: str = "203.0.113.7") -> AsyncIterator[Api]:
    """A client of ``services``'s app through ASGI, its requests coming from ``address``."""
    app = create_app(services.config, services)
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://manifold.test") as client:
        yield Api(client, services, app)


@asynccontextmanager
async def started_api(data_dir: Path, database_url: str = "") -> AsyncIterator[Api]:
    """A client of services started on ``data_dir``, which stop on exit (a test of what
    survives a restart opens another on the same folder)."""
    services = await start_services(data_dir, database_url)
    try:
        async with open_api(services) as api:
            yield api
    finally:
        await services.stop()


@pytest.fixture
async def api(services: Services) -> AsyncIterator[Api]:
    async with open_api(services) as client:
        yield client


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A private Redis for the session, started by the first test that asks."""
    if not have_redis():
        pytest.fail("redis-server is not installed: run the test command from README.md")
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()
