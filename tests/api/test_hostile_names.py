"""A back end that makes names up never takes a walk out of the caller's root.

The world: bob's base path is ``/u``; an SFTP server (a real one, asyncssh's, made
hostile) is mounted at ``/u/esftp`` and lists, in its folder ``evil``, entries named
``../../../secret`` and worse besides the real ``ok.txt``; a Local storage is mounted at
``/u/out`` and the admin's own at ``/secret``. Joined into a path, ``../../../secret``
from ``/u/esftp/evil`` is ``/secret``: a copy of ``evil`` into ``/u/out`` would copy the
admin's folder into bob's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from manifold.models import Perm, TaskState
from tests.api.fs_helpers import CREATE, fs_get, fs_list, make_tree, mount_local, names
from tests.api.test_copy_tasks import settle
from tests.conftest import Api
from tests.fixtures.hostile_alist import hostile_alist
from tests.fixtures.hostile_sftp import Made, hostile_sftp

BOB_PW = "bob-password-1"
BOB_PERMS = int(Perm.WRITE | Perm.RENAME | Perm.MOVE | Perm.COPY | Perm.REMOVE)
ESCAPING = [Made("../../../secret", True), Made("..\\..\\..\\secret", True)]
BROKEN = [Made("a/b", False), Made("nul\x00name", False), Made("", True)]
UNSAFE = [Made("rtl\u202etxt.exe", False), Made("bell\x07", False)]
SHOWN = ["%2e%2e", "ok.txt"]  # the real entries: a literal %2e%2e is a name like any


@dataclass
class World:
    api: Api
    bob: str
    served: Path
    out: Path
    secret: Path


@pytest.fixture
async def world(api: Api, tmp_path: Path) -> AsyncIterator[World]:
    served = make_tree(tmp_path / "served", {"evil/ok.txt": "ok", "evil/%2e%2e": "dots"})
    out = make_tree(tmp_path / "out", {})
    secret = make_tree(tmp_path / "secret", {"secret.txt": "ADMIN-ONLY"})
    async with hostile_sftp(served, ESCAPING + BROKEN + UNSAFE) as sftp:
        admin = (await api.as_admin()).token
        body = {"mount_path": "/u/esftp", "driver": "SFTP", "addition": json.dumps(sftp.addition())}
        created = await api.post(CREATE, body, token=admin)
        assert created["code"] == 200, created
        await mount_local(api, "/u/out", out)
        await mount_local(api, "/secret", secret)
        await api.make_user("bob", BOB_PW, base_path="/u", permission=BOB_PERMS)
        yield World(api, await api.login("bob", BOB_PW), served, out, secret)


def tree_of(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


async def test_a_listing_shows_no_made_up_name(world: World) -> None:
    assert sorted(names(await fs_list(world.api, "/esftp/evil", token=world.bob))) == SHOWN
    admin = await world.api.login()
    listed = await fs_list(world.api, "/u/esftp/evil", token=admin, refresh=True)
    assert sorted(names(listed)) == SHOWN


async def test_a_copy_of_the_folder_stays_in_the_callers_root(world: World) -> None:
    body = await world.api.post(
        "/api/fs/copy",
        {"src_dir": "/esftp", "dst_dir": "/out", "names": ["evil"]},
        token=world.bob,
    )
    assert body["code"] == 200, body
    finished = await settle(world.api)
    assert {t.state for t in finished} == {TaskState.SUCCEEDED}
    assert all("secret" not in t.name for t in finished)
    assert tree_of(world.out) == {"evil", "evil/ok.txt", "evil/%2e%2e"}
    assert tree_of(world.secret) == {"secret.txt"}
    listed = await fs_list(world.api, "/out/evil", token=world.bob)
    assert sorted(names(listed)) == SHOWN


async def test_a_move_of_the_folder_stays_in_the_callers_root(world: World) -> None:
    body = await world.api.post(
        "/api/fs/move",
        {"src_dir": "/esftp", "dst_dir": "/out", "names": ["evil"]},
        token=world.bob,
    )
    assert body["code"] == 200, body
    finished = [await world.api.services.tasks.wait_done(t["id"]) for t in body["data"]["tasks"]]
    assert [(t.state, t.error) for t in finished] == [(TaskState.SUCCEEDED, "")]
    assert tree_of(world.out) == {"evil", "evil/ok.txt", "evil/%2e%2e"}
    assert tree_of(world.secret) == {"secret.txt"}
    # The server says ``evil`` holds more than it could list: the folder stays.
    assert tree_of(world.served) == {"evil"}


async def test_an_alist_remotes_made_up_names_are_left_out(api: Api) -> None:
    listed = [("ok.txt", False), ("sub", True), ("..", True), ("../../../secret", True)]
    listed += [("a/b", False), ("nul\x00name", False), ("rtl\u202etxt.exe", False)]
    async with hostile_alist(listed, looked_up="../../../secret") as remote:
        admin = (await api.as_admin()).token
        body = {"mount_path": "/u/ealist", "driver": "AList V3"}
        body["addition"] = json.dumps(remote.addition())
        created = await api.post(CREATE, body, token=admin)
        assert created["code"] == 200, created
        await api.make_user("bob", BOB_PW, base_path="/u", permission=BOB_PERMS)
        bob = await api.login("bob", BOB_PW)
        assert sorted(names(await fs_list(api, "/ealist/evil", token=bob))) == ["ok.txt", "sub"]
        looked_up = await fs_get(api, "/ealist/evil/ok.txt", token=bob)
        assert (looked_up["code"], looked_up["message"]) == (500, "object not found")
