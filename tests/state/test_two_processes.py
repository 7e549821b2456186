"""Two Manifold containers in one test process, sharing one database (SQLite or
PostgreSQL) and, in the Redis case, one Redis: what changes through one applies on the
other. ``synced`` waits until what one announced has been applied by the other (the
change bus delivers within its poll interval on the database, at once on Redis)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from manifold.config import load_config
from manifold.container import Services
from tests.api.fs_helpers import (
    add_meta,
    fs_list,
    make_tree,
    mount_local,
    names,
    save_settings,
    storage_by_mount,
)
from tests.api.test_auth import LOCKED, login
from tests.conftest import ADMIN_PASSWORD, Api, open_api
from tests.protocols.dav_helpers import ALL, Dav
from tests.state.conftest import database_at

SETUPS = ("sqlite", "postgresql", "redis")


@dataclass(slots=True)
class Pair:
    a: Api
    b: Api

    async def synced(self) -> None:
        """Everything either announced has been applied by the other."""
        for api in (self.a, self.b):
            await api.services.state.bus.sync()
        for api in (self.a, self.b):
            await api.services.state.bus.sync()


@pytest.fixture(params=SETUPS)
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pair]:
    kind = "postgresql" if request.param == "postgresql" else "sqlite"
    env = {"MANIFOLD_DATABASE_URL": await database_at(request, tmp_path, kind)}
    if request.param == "redis":
        env["MANIFOLD_REDIS_URL"] = url = request.getfixturevalue("redis_server").url
        async with aioredis.Redis.from_url(url) as client:
            await client.flushdb()  # counters of an earlier test's client address
    async with AsyncExitStack() as stack:
        apis = []
        for _ in range(2):
            services = Services.build(load_config(tmp_path / "data", env), shared=True)
            await services.start(admin_password=ADMIN_PASSWORD)
            stack.push_async_callback(services.stop)
            apis.append(await stack.enter_async_context(open_api(services)))
        yield Pair(*apis)


async def me(api: Api, token: str) -> dict[str, Any]:
    return await api.get("/api/me", token=token)


async def test_a_storage_created_on_one_serves_on_the_other(pair: Pair, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "files", {"hello.txt": "hi"})
    await mount_local(pair.a, "/shared", root)
    await pair.synced()
    assert names(await fs_list(pair.b, "/shared", token=await pair.b.login())) == ["hello.txt"]
    stored = await storage_by_mount(pair.a, "/shared")
    admin = await pair.a.login()
    body = await pair.a.post(f"/api/admin/storage/disable?id={stored['id']}", token=admin)
    assert body["code"] == 200, body
    await pair.synced()
    gone = await fs_list(pair.b, "/shared", token=await pair.b.login())
    assert gone["code"] != 200 or names(gone) == []


async def test_a_meta_edited_on_one_applies_on_the_other(pair: Pair, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "files", {"secret/a.txt": "a"})
    await mount_local(pair.a, "/m", root)
    await add_meta(pair.a, "/m/secret", password="open-sesame", p_sub=True)
    await pair.synced()
    await pair.b.make_user("guestish", "pw-guestish", permission=0)
    token = await pair.b.login("guestish", "pw-guestish")
    refused = await fs_list(pair.b, "/m/secret", token=token)
    assert refused["code"] == 403, refused
    allowed = await fs_list(pair.b, "/m/secret", token=token, password="open-sesame")
    assert names(allowed) == ["a.txt"]


async def test_a_setting_saved_on_one_applies_on_the_other(pair: Pair) -> None:
    await save_settings(pair.a, site_title="Shared Title")
    await pair.synced()
    public = await pair.b.get("/api/public/settings")
    assert public["data"]["site_title"] == "Shared Title"


async def test_a_user_disabled_on_one_is_refused_by_the_other(pair: Pair) -> None:
    user_id = await pair.a.make_user("dana", "dana-pw")
    token = await pair.b.login("dana", "dana-pw")
    assert (await me(pair.b, token))["code"] == 200
    admin = await pair.a.login()
    update = {"id": user_id, "username": "dana", "password": "", "base_path": "/", "role": 0}
    body = await pair.a.post("/api/admin/user/update", {**update, "disabled": True}, token=admin)
    assert body["code"] == 200, body
    await pair.synced()
    assert (await me(pair.b, token))["code"] != 200
    assert (await login(pair.b, "dana", "dana-pw"))["code"] != 200


async def test_a_password_changed_on_one_revokes_the_token_on_the_other(pair: Pair) -> None:
    user_id = await pair.a.make_user("erin", "erin-pw")
    token = await pair.b.login("erin", "erin-pw")
    admin = await pair.a.login()
    update = {"id": user_id, "username": "erin", "password": "erin-new-pw", "base_path": "/"}
    body = await pair.a.post("/api/admin/user/update", {**update, "role": 0}, token=admin)
    assert body["code"] == 200, body
    await pair.synced()
    assert (await me(pair.b, token))["code"] == 401
    assert (await login(pair.b, "erin", "erin-pw"))["code"] != 200
    assert (await login(pair.b, "erin", "erin-new-pw"))["code"] == 200


async def test_a_logout_on_one_revokes_the_token_on_both(pair: Pair) -> None:
    await pair.a.make_user("finn", "finn-pw")
    token = await pair.a.login("finn", "finn-pw")
    assert (await me(pair.b, token))["code"] == 200
    body = await pair.a.get("/api/auth/logout", token=token)
    assert body["code"] == 200, body
    await pair.synced()
    assert (await me(pair.a, token))["code"] == 401
    assert (await me(pair.b, token))["code"] == 401


async def test_a_rename_on_one_shows_in_the_warm_listing_of_the_other(
    pair: Pair, tmp_path: Path
) -> None:
    root = make_tree(tmp_path / "files", {"docs/old.txt": "x", "docs/keep.txt": "y"})
    await mount_local(pair.a, "/r", root)
    await pair.synced()
    admin_b = await pair.b.login()
    assert names(await fs_list(pair.b, "/r/docs", token=admin_b)) == ["keep.txt", "old.txt"]
    admin_a = await pair.a.login()
    renamed = await pair.a.post(
        "/api/fs/rename", {"path": "/r/docs/old.txt", "name": "new.txt"}, token=admin_a
    )
    assert renamed["code"] == 200, renamed
    await pair.synced()
    assert names(await fs_list(pair.b, "/r/docs", token=admin_b)) == ["keep.txt", "new.txt"]


async def test_wrong_passwords_spread_over_both_lock_the_account(pair: Pair) -> None:
    await pair.a.make_user("gale", "gale-pw")
    for attempt in range(5):
        api = pair.a if attempt % 2 else pair.b
        body = await login(api, "gale", "wrong-password")
        assert body["code"] == 400, body
    for api in (pair.a, pair.b):
        body = await login(api, "gale", "gale-pw")
        assert (body["code"], body["message"]) == (429, LOCKED)


async def test_wrong_folder_passwords_spread_over_both_lock_the_address(
    pair: Pair, tmp_path: Path
) -> None:
    root = make_tree(tmp_path / "files", {"vault/a.txt": "a"})
    await mount_local(pair.a, "/v", root)
    await add_meta(pair.a, "/v/vault", password="right-one")
    await pair.a.make_user("hugo", "hugo-pw", permission=0)
    await pair.synced()
    tokens = {id(api): await api.login("hugo", "hugo-pw") for api in (pair.a, pair.b)}
    limit = pair.a.services.config.max_login_failures
    for n in range(limit):
        api = pair.a if n % 2 else pair.b
        body = await fs_list(api, "/v/vault", token=tokens[id(api)], password=f"guess-{n}")
        assert body["code"] == 403, body
    for api in (pair.a, pair.b):
        body = await fs_list(api, "/v/vault", token=tokens[id(api)], password="right-one")
        assert body["code"] == 429, body


LOCKINFO = (
    '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
    "</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>a</D:owner></D:lockinfo>"
)


async def test_a_webdav_lock_taken_on_one_holds_on_the_other(pair: Pair, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "files", {"doc.txt": "v1"})
    await mount_local(pair.a, "/w", root)
    await pair.a.make_user("wendy", "wendy-pw", permission=ALL)
    await pair.synced()
    dav_a, dav_b = Dav(pair.a.client, "wendy"), Dav(pair.b.client, "wendy")
    locked = await dav_a("LOCK", "/w/doc.txt", LOCKINFO, Timeout="Second-60")
    assert locked.status_code == 200, locked.text
    token = locked.headers["lock-token"]
    assert (await dav_b("PUT", "/w/doc.txt", b"v2")).status_code == 423
    assert (await dav_b("LOCK", "/w/doc.txt", LOCKINFO)).status_code == 423
    assert (await dav_b("DELETE", "/w")).status_code == 423
    refreshed = await dav_b("LOCK", "/w/doc.txt", If=f"({token})", Timeout="Second-600")
    assert refreshed.status_code == 200, refreshed.text
    assert "Second-600" in refreshed.text
    assert (await dav_b("PUT", "/w/doc.txt", b"v2", If=f"({token})")).status_code == 204
    assert (await dav_b("UNLOCK", "/w/doc.txt", Lock_Token=token)).status_code == 204
    assert (await dav_a("PUT", "/w/doc.txt", b"v3")).status_code == 204
    assert (root / "doc.txt").read_bytes() == b"v3"


async def test_an_expired_webdav_lock_lets_the_other_write(pair: Pair, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "files", {"doc.txt": "v1"})
    await mount_local(pair.a, "/w", root)
    await pair.a.make_user("wendy", "wendy-pw", permission=ALL)
    await pair.synced()
    dav_a, dav_b = Dav(pair.a.client, "wendy"), Dav(pair.b.client, "wendy")
    locked = await dav_a("LOCK", "/w/doc.txt", LOCKINFO, Timeout="Second-1")
    assert locked.status_code == 200, locked.text
    assert (await dav_b("PUT", "/w/doc.txt", b"v2")).status_code == 423
    await asyncio.sleep(1.2)  # the lock's second has passed, on every clock
    assert (await dav_b("PUT", "/w/doc.txt", b"v2")).status_code == 204
    assert (root / "doc.txt").read_bytes() == b"v2"
