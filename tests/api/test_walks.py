"""Requests that walk a tree see only what the caller could name directly.

The world: a Local storage at ``/local``; ``bob`` and ``carol`` have base paths
``/local/users/bob`` and ``/local/users/carol``. In bob's folder, links lead into
carol's (relative, so they stay inside the storage), a link loops back to the folder
itself, ``pw`` has a folder password bob was not given, ``hid`` is hidden from him,
and a second storage is mounted inside his folder at ``dest``. ``boxp`` and ``boxh``
hold a password folder and a hidden file one level down, for the requests that
carry a folder whole.

Every walking request (recursive move, removing empty folders, copies between
storages, search) must skip what bob cannot reach, and every whole-folder request
(rename, move, copy, remove) of a folder holding such entries is refused, leaving the
tree as it was.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.models import Perm, TaskState
from tests.api.fs_helpers import add_meta, make_tree, mount_local, save_settings
from tests.api.test_copy_tasks import settle
from tests.conftest import Api

BOB_PW = "bob-password-1"
CAROL_SECRET = "CAROL-SECRET"
FOLDER_PW = "folder-pw"
BOB_PERMS = int(Perm.WRITE | Perm.RENAME | Perm.MOVE | Perm.COPY | Perm.REMOVE)


@dataclass
class World:
    api: Api
    services: Services
    root: Path
    dest: Path
    bob: str

    @property
    def home(self) -> Path:
        return self.root / "users/bob"

    async def call(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.api.post(route, body, token=self.bob)

    def files(self) -> dict[str, str]:
        """Every regular file under the storage roots, by path, with its content."""
        found = {}
        for top in (self.root, self.dest):
            for path in top.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    found[str(path.relative_to(top.parent))] = path.read_text()
        return found

    def carol_intact(self) -> None:
        carol = self.root / "users/carol"
        assert (carol / "private.txt").read_text() == CAROL_SECRET
        assert (carol / "empty_c").is_dir()
        leaked = [p for p, text in self.files().items() if text == CAROL_SECRET]
        assert leaked == ["root/users/carol/private.txt"]


def build(tmp: Path) -> tuple[Path, Path]:
    root = make_tree(
        tmp / "root",
        {
            "users/carol/private.txt": CAROL_SECRET,
            "users/carol/empty_c/": "",
            "users/bob/own.txt": "own",
            "users/bob/empty_b/": "",
            "users/bob/stuff/a.txt": "a",
            "users/bob/pw/p.txt": "p",
            "users/bob/pw/pw_empty/": "",
            "users/bob/hid/h.txt": "h",
            "users/bob/hid/hid_empty/": "",
            "users/bob/boxp/plain.txt": "plain",
            "users/bob/boxp/locked/l.txt": "l",
            "users/bob/boxh/plain.txt": "plain",
            "users/bob/boxh/unseen.txt": "unseen",
            "users/bob/keep/": "",
        },
    )
    bob = root / "users/bob"
    (bob / "stuff/link_carol").symlink_to("../../carol", target_is_directory=True)
    (bob / "stuff/link_file").symlink_to("../../carol/private.txt")
    (bob / "loop").symlink_to(".", target_is_directory=True)
    (bob / "link_carol").symlink_to("../carol", target_is_directory=True)
    dest = make_tree(tmp / "dest", {"d.txt": "d"})
    return root, dest


@pytest.fixture
async def world(api: Api, services: Services, tmp_path: Path) -> AsyncIterator[World]:
    root, dest = build(tmp_path)
    await api.as_admin()
    await mount_local(api, "/local", root)
    await mount_local(api, "/local/users/bob/dest", dest)
    await add_meta(api, "/local/users/bob", hide="^hid$", h_sub=False)
    await add_meta(api, "/local/users/bob/pw", password=FOLDER_PW, p_sub=True)
    await add_meta(api, "/local/users/bob/boxp/locked", password=FOLDER_PW, p_sub=True)
    await add_meta(api, "/local/users/bob/boxh", hide="^unseen", h_sub=True)
    for name in ("bob", "carol"):
        await api.make_user(name, BOB_PW, base_path=f"/local/users/{name}", permission=BOB_PERMS)
    if services.writer.tasks is None:
        services.writer.tasks = services.tasks
        services.transfers.register(services.tasks)
    yield World(api, services, root, dest, await api.login("bob", BOB_PW))


async def test_direct_requests_are_refused(world: World) -> None:
    """The premise: bob cannot reach any of it by naming it."""
    for path in ("/link_carol", "/stuff/link_carol", "/stuff/link_file", "/pw", "/hid"):
        body = await world.call("/api/fs/list", {"path": path})
        assert body["code"] == 403, (path, body)


async def test_recursive_move_skips_what_bob_cannot_reach(world: World) -> None:
    assert (await world.call("/api/fs/mkdir", {"path": "/loot"}))["code"] == 200
    body = await world.call(
        "/api/fs/recursive_move",
        {"src_dir": "/", "dst_dir": "/loot", "conflict_policy": "skip"},
    )
    assert body["code"] == 200, body
    world.carol_intact()
    loot = sorted(p.name for p in (world.home / "loot").iterdir())
    assert loot == ["a.txt", "own.txt", "plain.txt"]
    assert (world.home / "pw/p.txt").read_text() == "p"
    assert (world.home / "hid/h.txt").read_text() == "h"
    assert (world.home / "boxp/locked/l.txt").read_text() == "l"
    assert (world.home / "boxh/unseen.txt").read_text() == "unseen"
    assert (world.dest / "d.txt").read_text() == "d"  # another storage: not moved


async def test_remove_empty_directory_spares_what_bob_cannot_reach(world: World) -> None:
    body = await world.call("/api/fs/remove_empty_directory", {"src_dir": "/"})
    assert body["code"] == 200, body
    world.carol_intact()
    assert not (world.home / "empty_b").exists()
    assert not (world.home / "keep").exists()
    assert (world.home / "pw/pw_empty").is_dir()
    assert (world.home / "hid/hid_empty").is_dir()


async def test_copy_between_storages_does_not_follow_links_out(world: World) -> None:
    body = await world.call(
        "/api/fs/copy", {"src_dir": "/", "dst_dir": "/dest", "names": ["stuff"]}
    )
    assert body["code"] == 200, body
    finished = await settle(world.api)
    assert {t.state for t in finished} == {TaskState.SUCCEEDED}
    assert sorted(p.name for p in (world.dest / "stuff").iterdir()) == ["a.txt"]
    world.carol_intact()


async def test_regex_rename_matches_only_names_bob_can_reach(world: World) -> None:
    body = await world.call(
        "/api/fs/regex_rename",
        {
            "src_dir": "/",
            "src_name_regex": "^(own\\.txt|link_carol|hid|pw)$",
            "new_name_regex": "r-$1",
        },
    )
    assert body["code"] == 200, body
    names = sorted(p.name for p in world.home.iterdir())
    assert "r-own.txt" in names, names
    assert {"link_carol", "hid", "pw"} <= set(names), names
    world.carol_intact()


WHOLE = [
    ("rename", "/api/fs/rename", lambda box: {"path": f"/{box}", "name": f"{box}-2"}),
    ("move", "/api/fs/move", lambda box: {"src_dir": "/", "dst_dir": "/keep", "names": [box]}),
    ("copy", "/api/fs/copy", lambda box: {"src_dir": "/", "dst_dir": "/keep", "names": [box]}),
    ("copy-across", "/api/fs/copy", lambda b: {"src_dir": "/", "dst_dir": "/dest", "names": [b]}),
    ("remove", "/api/fs/remove", lambda box: {"dir": "/", "names": [box]}),
    (
        "batch_rename",
        "/api/fs/batch_rename",
        lambda box: {"src_dir": "/", "rename_objects": [{"src_name": box, "new_name": "x"}]},
    ),
]


@pytest.mark.parametrize("box", ["boxp", "boxh"])
@pytest.mark.parametrize(("label", "route", "body_of"), WHOLE, ids=[w[0] for w in WHOLE])
async def test_whole_folder_requests_refuse_withheld_contents(
    world: World, box: str, label: str, route: str, body_of: Any
) -> None:
    before = world.files()
    body = await world.call(route, body_of(box))
    assert body["code"] == 403, (label, body)
    assert world.files() == before
    assert (world.home / box).is_dir()


async def test_whole_folder_request_with_the_password_goes_through(world: World) -> None:
    body = await world.call(
        "/api/fs/move",
        {"src_dir": "/", "dst_dir": "/keep", "names": ["boxp"], "password": FOLDER_PW},
    )
    assert body["code"] == 200, body
    assert (world.home / "keep/boxp/locked/l.txt").read_text() == "l"


async def test_admin_may_carry_any_folder(world: World) -> None:
    body = await world.api.post("/api/fs/rename", {"path": "/local/users/bob/boxh", "name": "b2"})
    assert body["code"] == 200, body
    assert (world.home / "b2/unseen.txt").read_text() == "unseen"


@pytest.mark.parametrize("keyword", ["private", "link_file", "empty_c"])
async def test_search_leaves_out_names_reached_through_links(world: World, keyword: str) -> None:
    await save_settings(world.api, search_index="database")
    body = await world.api.post("/api/admin/index/build", token=await world.api.login())
    assert body["code"] == 200, body
    await world.services.search.indexer.settled()
    request = {"parent": "/", "keywords": keyword, "scope": 0, "page": 1, "per_page": 100}
    admin_hits = await world.api.post("/api/fs/search", request)
    assert admin_hits["data"]["total"] > 0, admin_hits  # the index has them
    hits = await world.call("/api/fs/search", request)
    assert hits["code"] == 200, hits
    assert hits["data"]["content"] == [] and hits["data"]["total"] == 0, hits
    own = await world.call("/api/fs/search", {**request, "keywords": "own"})
    # The index enters bob's folder once, not again through the link loop in it.
    hits = [(h["parent"], h["name"]) for h in own["data"]["content"]]
    assert hits == [("/local/users/bob", "own.txt")]


# --- the same tree through an Alias ---------------------------------------------------


@pytest.fixture
async def through_alias(world: World) -> str:
    """An Alias at /team naming bob's and carol's folders; ``abob`` lives in /team/bob."""
    paths = "bob:/local/users/bob\ncarol:/local/users/carol"
    body = {
        "mount_path": "/team",
        "driver": "Alias",
        "addition": json.dumps({"paths": paths, "writable": True}),
    }
    created = await world.api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created
    await world.api.make_user("abob", BOB_PW, base_path="/team/bob", permission=BOB_PERMS)
    return await world.api.login("abob", BOB_PW)


@pytest.mark.parametrize("path", ["/link_carol", "/stuff/link_carol", "/stuff/link_file"])
async def test_links_out_of_an_alias_target_are_refused(
    world: World, through_alias: str, path: str
) -> None:
    for route in ("/api/fs/list", "/api/fs/get"):
        body = await world.api.post(route, {"path": path}, token=through_alias)
        assert body["code"] == 403, (route, path, body)
    own = await world.api.post("/api/fs/get", {"path": "/own.txt"}, token=through_alias)
    assert own["code"] == 200, own


async def test_walks_through_an_alias_skip_links_out(world: World, through_alias: str) -> None:
    assert (await world.call("/api/fs/mkdir", {"path": "/loot"}))["code"] == 200
    body = await world.api.post(
        "/api/fs/recursive_move",
        {"src_dir": "/stuff", "dst_dir": "/loot", "conflict_policy": "skip"},
        token=through_alias,
    )
    assert body["code"] == 200, body
    world.carol_intact()
    assert sorted(p.name for p in (world.home / "loot").iterdir()) == ["a.txt"]
