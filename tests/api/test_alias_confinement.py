"""A link inside an Alias's target is held as a Local link is, through any number of Aliases.

The world: a Local storage at ``/local``. ``bob``'s base path is ``/local/users/bob``; his
``docs`` folder holds ``lc``, a link to carol's folder (inside the storage, outside his
base path), and ``lf``, a link to her file. Reached as ``/docs/lc`` these answer 403.
The same folder is reached through Aliases:

* ``/local/users/bob/one``: an Alias of ``/local/users/bob/docs``, mounted inside bob's
  base path; ``/local/users/bob/two``: an Alias of that Alias (two levels);
* ``/team``: an Alias of bob's ``docs``, and ``/team2`` an Alias of ``/team``; ``dave``
  has ``/team`` as his base path and ``erin`` ``/team2``.

Every kind of access through each of them must be refused as the direct one is: list,
get, dirs, the archive routes, ``/api/fs/link``, a copy, a move, and the walks.
"""

from __future__ import annotations

import io
import json
import zipfile
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

PW = "confined-password-1"
SECRET = "CAROL-SECRET"
PERMS = int(Perm.WRITE | Perm.RENAME | Perm.MOVE | Perm.COPY | Perm.REMOVE | Perm.READ_ARCHIVES)


@dataclass
class World:
    api: Api
    services: Services
    root: Path
    tokens: dict[str, str]

    async def call(self, who: str, route: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.api.post(route, body, token=self.tokens[who])

    def carol_intact(self) -> None:
        carol = self.root / "users/carol"
        assert (carol / "private.txt").read_text() == SECRET
        assert (carol / "empty_c").is_dir()
        leaked = [
            p for p in self.root.rglob("*") if p.is_file() and not p.is_symlink()
            and p.read_bytes() == SECRET.encode()
        ]  # fmt: skip
        assert leaked == [carol / "private.txt"]


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


async def _alias(api: Api, mount_path: str, paths: str) -> None:
    addition = json.dumps({"paths": paths, "writable": True})
    body = {"mount_path": mount_path, "driver": "Alias", "addition": addition}
    created = await api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created


@pytest.fixture
async def world(api: Api, services: Services, tmp_path: Path) -> AsyncIterator[World]:
    root = make_tree(
        tmp_path / "root",
        {
            "users/carol/private.txt": SECRET,
            "users/carol/empty_c/": "",
            "users/bob/docs/own.txt": "own",
            "users/bob/docs/sub/a.txt": "a",
            "users/bob/dst/": "",
        },
    )
    (root / "users/carol/secret.zip").write_bytes(_zip({"inner.txt": SECRET.encode()}))
    docs = root / "users/bob/docs"
    (docs / "lc").symlink_to("../../carol", target_is_directory=True)
    (docs / "lf").symlink_to("../../carol/private.txt")
    (docs / "sub/lc").symlink_to("../../../carol", target_is_directory=True)
    await api.as_admin()
    await mount_local(api, "/local", root)
    await _alias(api, "/local/users/bob/one", "/local/users/bob/docs")
    await _alias(api, "/local/users/bob/two", "/local/users/bob/one")
    await _alias(api, "/team", "/local/users/bob/docs")
    await _alias(api, "/team2", "/team")
    bases = {"bob": "/local/users/bob", "dave": "/team", "erin": "/team2"}
    tokens = {}
    for name, base in bases.items():
        await api.make_user(name, PW, base_path=base, permission=PERMS)
        tokens[name] = await api.login(name, PW)
    if services.writer.tasks is None:
        services.writer.tasks = services.tasks
        services.transfers.register(services.tasks)
    yield World(api, services, root, tokens)


# Who asks, and how each spells bob's docs folder: directly, through one Alias, through two.
WAYS = [
    ("bob", "/docs"),
    ("bob", "/one"),
    ("bob", "/two"),
    ("dave", ""),
    ("erin", ""),
]
IDS = ["direct", "alias", "alias-of-alias", "base-at-alias", "base-at-alias-of-alias"]


@pytest.mark.parametrize(("who", "docs"), WAYS, ids=IDS)
async def test_reads_through_links_out_are_refused(world: World, who: str, docs: str) -> None:
    own = await world.call(who, "/api/fs/get", {"path": f"{docs}/own.txt"})
    assert own["code"] == 200, own  # the premise: the folder itself is reachable
    attempts = [
        ("/api/fs/list", {"path": f"{docs}/lc"}),
        ("/api/fs/list", {"path": f"{docs}/sub/lc"}),
        ("/api/fs/dirs", {"path": f"{docs}/lc"}),
        ("/api/fs/get", {"path": f"{docs}/lc/private.txt"}),
        ("/api/fs/get", {"path": f"{docs}/lf"}),
        ("/api/fs/archive/meta", {"path": f"{docs}/lc/secret.zip"}),
        ("/api/fs/archive/list", {"path": f"{docs}/lc/secret.zip", "inner_path": "/"}),
    ]
    for route, body in attempts:
        answer = await world.call(who, route, body)
        assert answer["code"] == 403, (route, body, answer)
        assert SECRET not in json.dumps(answer)


@pytest.mark.parametrize(("who", "docs"), WAYS, ids=IDS)
async def test_listings_through_an_alias_still_show_the_links(
    world: World, who: str, docs: str
) -> None:
    """The names stay listed (as on Local); only following them is refused."""
    body = await world.call(who, "/api/fs/list", {"path": docs})
    assert body["code"] == 200, body
    assert {"own.txt", "lc", "lf", "sub"} <= {o["name"] for o in body["data"]["content"]}


@pytest.mark.parametrize("docs", ["/local/users/bob/one", "/local/users/bob/two", "/team2"])
async def test_admin_link_and_download_through_an_alias_are_refused(
    world: World, docs: str
) -> None:
    link = await world.api.post("/api/fs/link", {"path": f"{docs}/lf"})
    assert link["code"] == 403, link
    for path in (f"{docs}/lc/private.txt", f"{docs}/lf"):
        sign = world.services.signer.sign(path)
        for route in ("/d", "/p"):
            fetched = await world.api.client.get(f"{route}{path}", params={"sign": sign})
            assert fetched.status_code == 403, (route, path, fetched.text)
            assert SECRET not in fetched.text


@pytest.mark.parametrize(("who", "docs"), WAYS[1:], ids=IDS[1:])
async def test_copies_and_moves_through_links_out_are_refused(
    world: World, who: str, docs: str
) -> None:
    dst = "/dst" if who == "bob" else "/sub"
    for route in ("/api/fs/copy", "/api/fs/move"):
        for name in ("lc", "lf"):
            body = {"src_dir": docs, "dst_dir": dst, "names": [name]}
            answer = await world.call(who, route, body)
            assert answer["code"] == 403, (route, name, answer)
        body = {"src_dir": f"{docs}/lc", "dst_dir": dst, "names": ["private.txt"]}
        answer = await world.call(who, route, body)
        assert answer["code"] == 403, (route, answer)
    await settle(world.api)
    world.carol_intact()


@pytest.mark.parametrize(("who", "docs"), WAYS[1:], ids=IDS[1:])
async def test_walks_through_an_alias_skip_links_out(world: World, who: str, docs: str) -> None:
    moved = await world.call(
        who,
        "/api/fs/recursive_move",
        {"src_dir": f"{docs}/sub", "dst_dir": docs, "conflict_policy": "skip"},
    )
    assert moved["code"] == 200, moved
    cleared = await world.call(who, "/api/fs/remove_empty_directory", {"src_dir": docs})
    assert cleared["code"] == 200, cleared
    world.carol_intact()
    assert (world.root / "users/bob/docs/a.txt").read_text() == "a"


async def test_copy_task_through_an_alias_does_not_follow_links_out(world: World) -> None:
    body = {"src_dir": "/two", "dst_dir": "/dst", "names": ["sub"]}
    answer = await world.call("bob", "/api/fs/copy", body)
    assert answer["code"] == 200, answer
    finished = await settle(world.api)
    assert {t.state for t in finished} <= {TaskState.SUCCEEDED}
    assert sorted(p.name for p in (world.root / "users/bob/dst/sub").iterdir()) == ["a.txt"]
    world.carol_intact()


async def test_search_through_an_alias_leaves_out_names_behind_links(world: World) -> None:
    await save_settings(world.api, search_index="database")
    built = await world.api.post("/api/admin/index/build", token=await world.api.login())
    assert built["code"] == 200, built
    await world.services.search.indexer.settled()
    for who in ("bob", "dave", "erin"):
        request = {"parent": "/", "keywords": "private", "page": 1, "per_page": 100}
        hits = await world.call(who, "/api/fs/search", request)
        assert hits["code"] == 200, hits
        assert hits["data"]["content"] == [], (who, hits)
    # What the Aliases show is searchable at their paths, each folder once per Alias.
    request = {"parent": "/", "keywords": "own.txt", "page": 1, "per_page": 100}
    hits = await world.call("dave", "/api/fs/search", request)
    assert [(h["parent"], h["name"]) for h in hits["data"]["content"]] == [("/team", "own.txt")]
    hits = await world.call("bob", "/api/fs/search", request)
    parents = sorted(h["parent"] for h in hits["data"]["content"])
    assert parents == [f"/local/users/bob/{name}" for name in ("docs", "one", "two")]


# --- metas through Aliases: those of the path asked for apply (as AList) ------------


async def test_a_password_on_the_alias_path_holds_through_it(world: World) -> None:
    await add_meta(world.api, "/local/users/bob/two/sub", password="pw", p_sub=True)
    for path in ("/two/sub", "/two/sub/a.txt"):
        refused = await world.call("bob", "/api/fs/get", {"path": path})
        assert refused["code"] == 403, refused
    given = await world.call("bob", "/api/fs/get", {"path": "/two/sub/a.txt", "password": "pw"})
    assert given["code"] == 200, given
    assert (await world.call("bob", "/api/fs/mkdir", {"path": "/two/flat"}))["code"] == 200
    moved = await world.call(
        "bob",
        "/api/fs/recursive_move",
        {"src_dir": "/two", "dst_dir": "/two/flat", "conflict_policy": "skip"},
    )
    assert moved["code"] == 200, moved
    assert sorted(p.name for p in (world.root / "users/bob/docs/flat").iterdir()) == ["own.txt"]
    assert (world.root / "users/bob/docs/sub/a.txt").read_text() == "a"


async def test_hide_rules_on_the_alias_path_hold_through_it(world: World) -> None:
    await add_meta(world.api, "/team2", hide="^sub$", h_sub=True)
    listed = await world.call("erin", "/api/fs/list", {"path": "/"})
    assert "sub" not in {o["name"] for o in listed["data"]["content"]}
    refused = await world.call("erin", "/api/fs/get", {"path": "/sub"})
    assert refused["code"] == 403, refused
    removed = await world.call("erin", "/api/fs/remove", {"dir": "/", "names": ["sub"]})
    assert removed["code"] == 403, removed
    assert (world.root / "users/bob/docs/sub/a.txt").is_file()


async def test_metas_on_the_target_path_are_the_target_paths_own(world: World) -> None:
    """As in AList: an Alias is a view with metas of its own (see the README)."""
    await add_meta(world.api, "/local/users/bob/docs/sub", password="pw", p_sub=True)
    direct = await world.call("bob", "/api/fs/get", {"path": "/docs/sub/a.txt"})
    assert direct["code"] == 403, direct
    through = await world.call("bob", "/api/fs/get", {"path": "/two/sub/a.txt"})
    assert through["code"] == 200, through


# --- a folder holding a link out, renamed onto a path just found inside ------------------


BOB_DOCS = "/local/users/bob/docs"


async def _own_file_at_p(world: World, who: str, docs: str) -> None:
    """Make ``docs/p/lc/private.txt`` the caller's own file, read it, then rename ``p``
    away: ``p`` is free for ``sub``, whose ``lc`` leads to carol."""
    assert (await world.call(who, "/api/fs/mkdir", {"path": f"{docs}/p/lc"}))["code"] == 200
    put = await world.api.client.put(
        "/api/fs/put",
        content=b"mine",
        headers={"Authorization": world.tokens[who], "File-Path": f"{docs}/p/lc/private.txt"},
    )
    assert put.json()["code"] == 200, put.text
    for route, body in [
        ("/api/fs/list", {"path": f"{docs}/p/lc"}),
        ("/api/fs/get", {"path": f"{docs}/p/lc/private.txt"}),
        ("/api/fs/rename", {"path": f"{docs}/p", "name": "p_old"}),
    ]:
        answer = await world.call(who, route, body)
        assert answer["code"] == 200, (route, answer)


@pytest.mark.parametrize(("who", "docs"), [WAYS[0], WAYS[2], WAYS[3]], ids=IDS[:1] + IDS[2:4])
async def test_a_link_renamed_onto_a_path_just_found_inside_is_refused(
    world: World, who: str, docs: str
) -> None:
    """Where links lead is reused for a second, but never across a rename (here the
    admin's, who may move the link)."""
    await _own_file_at_p(world, who, docs)
    moved = await world.api.post("/api/fs/rename", {"path": f"{BOB_DOCS}/sub", "name": "p"})
    assert moved["code"] == 200, moved
    for route, body in [
        ("/api/fs/list", {"path": f"{docs}/p/lc"}),
        ("/api/fs/get", {"path": f"{docs}/p/lc/private.txt"}),
    ]:
        answer = await world.call(who, route, body)
        assert answer["code"] == 403, (route, answer)
        assert SECRET not in json.dumps(answer)


@pytest.mark.parametrize(("who", "docs"), [WAYS[0], WAYS[2], WAYS[3]], ids=IDS[:1] + IDS[2:4])
async def test_a_folder_holding_a_link_out_is_not_moved_by_the_user(
    world: World, who: str, docs: str
) -> None:
    """A user cannot move a link out of their base path onto paths they named before,
    where a sign given then would follow it: the folder holding it stays put."""
    await _own_file_at_p(world, who, docs)
    for route, body in [
        ("/api/fs/rename", {"path": f"{docs}/sub", "name": "p"}),
        ("/api/fs/move", {"src_dir": docs, "dst_dir": f"{docs}/p_old", "names": ["sub"]}),
        ("/api/fs/copy", {"src_dir": docs, "dst_dir": f"{docs}/p_old", "names": ["sub"]}),
    ]:
        answer = await world.call(who, route, body)
        assert answer["code"] == 403, (route, answer)
    path = f"{BOB_DOCS}/p/lc/private.txt"
    fetched = await world.api.client.get(
        f"/d{path}", params={"sign": world.services.signer.sign(path)}
    )
    assert SECRET not in fetched.text
    assert fetched.status_code != 200
    world.carol_intact()
