"""Share links under attack from outside: a share is a window, never a door.

The world: a Local storage at ``/local``. ``bob`` (base ``/local/users/bob``) shares
his ``docs`` folder, which holds ``lc`` (a link to carol's folder: inside the storage,
outside the share and bob's base), ``lb`` (a link to bob's own ``private`` folder:
inside his base, outside the share), ``lf`` (a link to carol's file) and ``hidden.txt``
(hidden by a meta). ``/team`` is an Alias of bob's ``docs``.

A visitor with the share id tries to reach beyond it (``..`` plain and encoded, the
links, the links through the Alias), to see hidden entries, to keep using a share
that expired, ran out, was disabled or deleted, or whose creator lost his base path
or his right to share, to guess the password, to download past the maximum with
concurrent requests; and another user tries bob's share ids.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from manifold.models import Perm
from tests.api.fs_helpers import add_meta, make_tree, mount_local
from tests.api.share_helpers import (
    INVALID,
    MISSING,
    PW,
    SHARER,
    create_share,
    download,
    listed,
    made_share,
    visit_get,
    visit_list,
)
from tests.conftest import Api

SECRET = "CAROL-SECRET"
PRIVATE = "BOB-PRIVATE"


@dataclass
class World:
    api: Api
    root: Path
    bob: str
    share: str

    async def set_bob(self, base_path: str, permission: int) -> None:
        users = await self.api.get("/api/admin/user/list")
        bob_id = next(u["id"] for u in users["data"]["content"] if u["username"] == "bob")
        body = {"id": bob_id, "username": "bob", "base_path": base_path, "permission": permission}
        updated = await self.api.post("/api/admin/user/update", body)
        assert updated["code"] == 200, updated


@pytest.fixture
async def world(api: Api, tmp_path: Path) -> World:
    root = make_tree(
        tmp_path / "root",
        {
            "users/carol/private.txt": SECRET,
            "users/bob/private/p.txt": PRIVATE,
            "users/bob/docs/own.txt": "own",
            "users/bob/docs/hidden.txt": "hidden",
            "users/bob/docs/sub/a.txt": "a",
        },
    )
    docs = root / "users/bob/docs"
    (docs / "lc").symlink_to("../../carol", target_is_directory=True)
    (docs / "lb").symlink_to("../private", target_is_directory=True)
    (docs / "lf").symlink_to("../../carol/private.txt")
    await api.as_admin()
    await mount_local(api, "/local", root)
    alias = {"paths": "/local/users/bob/docs"}
    body = {"mount_path": "/team", "driver": "Alias", "addition": json.dumps(alias)}
    assert (await api.post("/api/admin/storage/create", body))["code"] == 200
    await add_meta(api, "/local/users/bob/docs", hide="hidden", h_sub=True)
    perms = SHARER | int(Perm.SEE_HIDDEN)  # bob sees hidden entries; his visitors do not
    await api.make_user("bob", PW, base_path="/local/users/bob", permission=perms)
    await api.make_user("eve", PW, base_path="/local/users/bob", permission=SHARER)
    bob = await api.login("bob", PW)
    share = await made_share(api, bob, ["/local/users/bob/docs"])
    return World(api, root, bob, share)


def _leaks(text: str) -> bool:
    return SECRET in text or PRIVATE in text


async def test_the_share_itself_is_readable(world: World) -> None:
    assert listed(await visit_list(world.api, f"/@s/{world.share}")) == ["own.txt", "sub"]
    assert (await download(world.api, f"/sd/{world.share}/own.txt")).content == b"own"


@pytest.mark.parametrize(
    "below",
    ["..", "../private", "sub/../../private", "..\\private", "sub/..", "/../../carol", "\x00"],
)
async def test_dot_dot_in_any_spelling_is_refused(world: World, below: str) -> None:
    for visit in (visit_list, visit_get):
        body = await visit(world.api, f"/@s/{world.share}/{below}")
        assert body["code"] != 200, body
        assert not _leaks(json.dumps(body))


@pytest.mark.parametrize(
    "url",
    [
        "/sd/{id}/%2e%2e/private/p.txt",
        "/sd/{id}/..%2fprivate%2fp.txt",
        "/sd/{id}/sub/%2E%2E/%2E%2E/private/p.txt",
        "/sd/{id}/..%5cprivate%5cp.txt",
        "/sd/{id}/%2e%2e%2f%2e%2e%2fcarol%2fprivate.txt",
        "/sd/{id}%2f..%2fprivate%2fp.txt",
    ],
)
async def test_encoded_escapes_from_a_download_are_refused(world: World, url: str) -> None:
    response = await download(world.api, url.format(id=world.share))
    assert response.status_code != 200
    assert not _leaks(response.text)


@pytest.mark.parametrize("name", ["lc", "lb", "lf"])
async def test_links_leaving_the_share_are_refused(world: World, name: str) -> None:
    share = world.share
    names = listed(await visit_list(world.api, f"/@s/{share}"))
    assert name not in names  # not even shown
    for path in (f"/@s/{share}/{name}", f"/@s/{share}/{name}/private.txt"):
        for visit in (visit_list, visit_get):
            body = await visit(world.api, path)
            assert body["code"] != 200 and not _leaks(json.dumps(body)), body
    for url in (f"/sd/{share}/{name}", f"/sd/{share}/{name}/private.txt", f"/sd/{share}/lb/p.txt"):
        response = await download(world.api, url)
        assert response.status_code != 200 and not _leaks(response.text)


async def test_links_through_an_alias_are_refused(world: World, api: Api) -> None:
    alias_share = await made_share(api, api.token, ["/team"])  # the admin shares the Alias
    assert "own.txt" in listed(await visit_list(api, f"/@s/{alias_share}"))
    for url in (f"/sd/{alias_share}/lf", f"/sd/{alias_share}/lc/private.txt"):
        response = await download(api, url)
        assert response.status_code != 200 and not _leaks(response.text)
    body = await visit_list(api, f"/@s/{alias_share}/lc")
    assert body["code"] != 200 and not _leaks(json.dumps(body))


async def test_a_link_shared_directly_is_held_to_the_creator_base(world: World) -> None:
    """A link out of bob's base cannot be shared; one shared while his base held its
    target serves nothing once the base no longer does, though its own name stays in."""
    refused = await create_share(world.api, world.bob, ["/local/users/bob/docs/lf"])
    assert refused["code"] == 403, refused
    await world.set_bob("/local/users", SHARER)
    bob = await world.api.login("bob", PW, fresh=True)
    share = await made_share(world.api, bob, ["/local/users/bob/docs/lf"])
    assert (await download(world.api, f"/sd/{share}")).content == SECRET.encode()
    await world.set_bob("/local/users/bob", SHARER)
    response = await download(world.api, f"/sd/{share}")
    assert response.status_code != 200 and not _leaks(response.text)
    assert (await visit_get(world.api, f"/@s/{share}"))["code"] != 200


async def test_sharing_outside_the_base_path_is_refused(world: World) -> None:
    for path in ("/local/users/carol", "/local/users/bob/../carol", "/local"):
        body = await create_share(world.api, world.bob, [path])
        assert body["code"] != 200, body


async def test_hidden_entries_stay_hidden(world: World) -> None:
    share = world.share
    assert "hidden.txt" not in listed(await visit_list(world.api, f"/@s/{share}"))
    assert (await visit_get(world.api, f"/@s/{share}/hidden.txt"))["code"] != 200
    assert (await download(world.api, f"/sd/{share}/hidden.txt")).status_code != 200
    direct = await made_share(world.api, world.bob, ["/local/users/bob/docs/hidden.txt"])
    assert (await download(world.api, f"/sd/{direct}")).status_code != 200


async def test_a_creator_whose_base_path_shrinks_shrinks_the_share(world: World) -> None:
    await world.set_bob("/local/users/bob/private", SHARER)
    body = await visit_list(world.api, f"/@s/{world.share}")
    assert body["code"] == 410 and body["message"] == INVALID
    assert (await download(world.api, f"/sd/{world.share}/own.txt")).status_code == 410
    await world.set_bob("/local/users/bob", SHARER)
    assert (await visit_list(world.api, f"/@s/{world.share}"))["code"] == 200


async def test_a_creator_who_loses_the_share_bit_closes_the_share(world: World) -> None:
    await world.set_bob("/local/users/bob", int(Perm.WRITE))
    body = await visit_get(world.api, f"/@s/{world.share}/own.txt")
    assert body["message"] == INVALID
    assert (await download(world.api, f"/sd/{world.share}/own.txt")).status_code == 410


async def test_expired_shares_are_refused_at_once(world: World) -> None:
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    share = await made_share(world.api, world.bob, ["/local/users/bob/docs"], expires=past)
    for visit in (visit_list, visit_get):
        body = await visit(world.api, f"/@s/{share}")
        assert (body["code"], body["message"]) == (410, INVALID)  # gone, not "ask a password"
    assert (await download(world.api, f"/sd/{share}/own.txt")).status_code == 410


async def test_exhausted_shares_are_refused_at_once(world: World) -> None:
    share = await made_share(world.api, world.bob, ["/local/users/bob/docs"], max_accessed=2)
    for _ in range(2):
        assert (await download(world.api, f"/sd/{share}/own.txt")).status_code == 200
    assert (await download(world.api, f"/sd/{share}/own.txt")).status_code == 410
    assert (await visit_list(world.api, f"/@s/{share}"))["message"] == INVALID


async def test_ranges_and_heads_after_the_start_take_no_access(world: World) -> None:
    share = await made_share(world.api, world.bob, ["/local/users/bob/docs"], max_accessed=1)
    url = f"/sd/{share}/own.txt"
    assert (await world.api.client.head(url)).status_code == 200
    assert (await download(world.api, url, Range="bytes=1-")).content == b"wn"
    assert (await download(world.api, url)).status_code == 200
    assert (await download(world.api, url)).status_code == 410


async def test_concurrent_downloads_never_pass_the_maximum(world: World) -> None:
    share = await made_share(world.api, world.bob, ["/local/users/bob/docs"], max_accessed=3)
    url = f"/sd/{share}/own.txt"
    responses = await asyncio.gather(*(download(world.api, url) for _ in range(12)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 3 + [410] * 9
    got = await world.api.get("/api/share/get", params={"id": share}, token=world.bob)
    assert got["data"]["accessed"] == 3


async def test_deleted_and_disabled_shares_are_refused_at_once(world: World) -> None:
    share = world.share
    await world.api.post("/api/share/disable", params={"id": share}, token=world.bob)
    assert (await visit_list(world.api, f"/@s/{share}"))["message"] == INVALID
    assert (await download(world.api, f"/sd/{share}/own.txt")).status_code == 410
    await world.api.post("/api/share/delete", params={"id": share}, token=world.bob)
    assert (await visit_list(world.api, f"/@s/{share}"))["message"] == MISSING
    assert (await visit_list(world.api, f"/@s/{share}"))["code"] == 404
    assert (await download(world.api, f"/sd/{share}/own.txt")).status_code == 404


async def test_wrong_passwords_lock_the_address_out(world: World) -> None:
    share = await made_share(world.api, world.bob, ["/local/users/bob/docs"], pwd="right-one")
    no_password = await visit_list(world.api, f"/@s/{share}")
    assert no_password["code"] == 403 and no_password["message"] == "wrong share code"
    assert (await download(world.api, f"/sd/{share}/own.txt")).status_code == 403
    ok = await visit_list(world.api, f"/@s/{share}", "right-one")
    assert ok["code"] == 200
    limit = world.api.services.config.max_login_failures
    for attempt in range(limit):
        body = await visit_list(world.api, f"/@s/{share}", f"guess-{attempt}")
        assert body["code"] == 403, body
    locked = await visit_list(world.api, f"/@s/{share}", "right-one")
    assert locked["code"] == 429, locked
    response = await download(world.api, f"/sd/{share}/own.txt?pwd=right-one")
    assert response.status_code == 429


async def test_other_users_cannot_touch_a_share(world: World) -> None:
    eve = await world.api.login("eve", PW)
    share = world.share
    assert (await world.api.get("/api/share/get", params={"id": share}, token=eve))["code"] == 404
    for action in ("delete", "disable", "enable"):
        body = await world.api.post(f"/api/share/{action}", params={"id": share}, token=eve)
        assert body["code"] == 404, body
    update = {"id": share, "files": ["/local/users/bob/private"], "creator": "eve"}
    assert (await world.api.post("/api/share/update", update, token=eve))["code"] == 404
    assert (await world.api.get("/api/share/list", token=eve))["data"]["content"] == []
    assert listed(await visit_list(world.api, f"/@s/{share}")) == ["own.txt", "sub"]
