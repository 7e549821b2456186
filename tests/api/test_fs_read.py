"""Reading the file tree: /api/fs/list, get and dirs over Local storages, with metas."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from manifold.api.fs_render import FolderStyle
from manifold.models import Obj
from manifold.state.counters import DatabaseGuessLimiter
from tests.api.fs_helpers import (
    NOT_FOUND_SUFFIX,
    PASSWORD_DENIED,
    add_meta,
    fs_get,
    fs_list,
    make_tree,
    mount_local,
    names,
    save_settings,
    store,
)
from tests.conftest import Api
from tests.fixtures.silent import sftp_addition, silent_server

USER_PW = "user-password-1"

TREE: dict[str, bytes | str] = {
    "a.txt": "alpha",
    "movie.mp4": b"\x00\x01video",
    "song.mp3": b"ID3",
    "pic.PNG": b"\x89PNG",
    "blob.xyz": b"?",
    "noext": b"n",
    "sub/b.txt": "beta",
    "sub/deeper/c.txt": "gamma",
    "empty/": "",
}


async def user_token(api: Api, name: str = "reader", **fields: Any) -> str:
    fields.setdefault("permission", 0)
    await api.make_user(name, USER_PW, **fields)
    return await api.login(name, USER_PW)


def by_name(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert body["code"] == 200, body
    return {o["name"]: o for o in body["data"]["content"] or []}


# --- storages and the mount tree ---------------------------------------------


async def test_no_storage_at_all(api: Api) -> None:
    await api.as_admin()
    for path in ("/", "/anything"):
        body = await fs_list(api, path)
        assert body["code"] == 500
        assert body["message"] == "storage not found; please add a storage first"


async def test_virtual_folders_above_deeper_mounts(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/a/b", root)
    top = await fs_list(api, "/")
    assert names(top) == ["a"]
    assert top["data"]["provider"] == "unknown"
    [virtual] = top["data"]["content"]
    assert virtual["is_dir"] is True
    assert virtual["type"] == 1
    assert virtual["sign"] == ""
    middle = await fs_list(api, "/a")
    assert names(middle) == ["b"]
    assert middle["data"]["provider"] == "unknown"
    inner = await fs_list(api, "/a/b")
    assert inner["data"]["provider"] == "Local"
    assert "a.txt" in names(inner)
    got = await fs_get(api, "/a")
    assert got["code"] == 200
    assert got["data"]["is_dir"] is True
    assert got["data"]["name"] == "a"
    assert got["data"]["raw_url"] == ""


async def test_longest_prefix_on_whole_segments(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    one = make_tree(tmp_path / "one", {"from-b.txt": "b"})
    two = make_tree(tmp_path / "two", {"from-bc.txt": "bc"})
    three = make_tree(tmp_path / "three", {"from-a.txt": "a", "bcd/": ""})
    await mount_local(api, "/a/b", one)
    await mount_local(api, "/a/bc", two)
    await mount_local(api, "/a", three)
    assert names(await fs_list(api, "/a/b")) == ["from-b.txt"]
    assert names(await fs_list(api, "/a/bc")) == ["from-bc.txt"]
    assert set(names(await fs_list(api, "/a"))) == {"from-a.txt", "bcd", "b", "bc"}
    assert (await fs_list(api, "/a/bcd"))["code"] == 200
    assert (await fs_list(api, "/a/bcd"))["data"]["provider"] == "Local"


# --- listing content ------------------------------------------------------------


async def test_list_fields_signs_and_types(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await fs_list(api, "/local")
    data = body["data"]
    assert data["provider"] == "Local"
    assert data["write"] is True
    assert data["total"] == len(data["content"]) == 8
    objs = by_name(body)
    expected_types = {
        "a.txt": 4,
        "movie.mp4": 2,
        "song.mp3": 3,
        "pic.PNG": 5,
        "blob.xyz": 0,
        "noext": 0,
        "sub": 1,
        "empty": 1,
    }
    assert {n: o["type"] for n, o in objs.items()} == expected_types
    signer = api.services.signer
    for name, obj in objs.items():
        if obj["is_dir"]:
            assert obj["sign"] == "", name
            assert obj["size"] == 0
        else:
            assert obj["sign"] == signer.sign(f"/local/{name}"), name
    assert objs["a.txt"]["size"] == 5
    assert objs["a.txt"]["hashinfo"] == "null"
    assert objs["a.txt"]["hash_info"] is None
    assert set(objs["a.txt"]) >= {"id", "path", "name", "size", "is_dir", "modified", "created"}


async def test_paging(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    root = make_tree(tmp_path / "many", {f"f{n:02}.txt": str(n) for n in range(7)})
    await mount_local(api, "/m", root)
    everything = names(await fs_list(api, "/m", per_page=0))
    assert len(everything) == 7
    pages = []
    for page in (1, 2, 3):
        body = await fs_list(api, "/m", page=page, per_page=3)
        assert body["data"]["total"] == 7
        pages += names(body)
    assert pages == everything
    assert len(names(await fs_list(api, "/m", page=3, per_page=3))) == 1
    past = await fs_list(api, "/m", page=9, per_page=3)
    assert past["data"]["content"] == []  # the page iterates it; an empty folder is null
    assert past["data"]["total"] == 7
    zero_page = await fs_list(api, "/m", page=0, per_page=3)
    assert names(zero_page) == everything[:3]


async def test_pages_of_a_local_folder_follow_name_order(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    wanted = [f"n{(n * 7919) % 997:04}-{'x' * (n % 13)}" for n in range(997)]
    root = make_tree(tmp_path / "big", dict.fromkeys(wanted, ""))
    await mount_local(api, "/big", root)
    pages = []
    for page in range(1, 12):
        body = await fs_list(api, "/big", page=page, per_page=100)
        assert body["data"]["total"] == 997
        pages += names(body)
    assert pages == sorted(wanted)
    assert names(await fs_list(api, "/big", per_page=0)) == sorted(wanted)


async def test_empty_folder_content_is_null(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await fs_list(api, "/local/empty")
    assert body["code"] == 200
    assert body["data"]["content"] is None
    assert body["data"]["total"] == 0


@pytest.mark.parametrize("path", ["/local/nope", "/local/sub/nope", "/local/nope/deeper"])
async def test_missing_path(api: Api, root: Path, path: str) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    for body in (await fs_list(api, path), await fs_get(api, path)):
        assert body["code"] == 500, body
        assert body["message"].endswith(NOT_FOUND_SUFFIX), body


@pytest.mark.parametrize(
    "name", ["with space.txt", "odd #?%&+ name.txt", "ünïcødé 文件.txt", "emoji 🎉.txt"]
)
async def test_unusual_names_round_trip(api: Api, tmp_path: Path, name: str) -> None:
    await api.as_admin()
    root = make_tree(tmp_path / "odd", {name: "payload " + name})
    await mount_local(api, "/odd", root)
    listed = by_name(await fs_list(api, "/odd"))
    assert list(listed) == [name]
    got = await fs_get(api, f"/odd/{name}")
    assert got["code"] == 200, got
    assert got["data"]["name"] == name
    raw = got["data"]["raw_url"]
    response = await api.client.get(raw)
    assert response.status_code == 200
    assert response.content == ("payload " + name).encode()


async def test_list_as_get_with_query_parameters(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await api.get("/api/fs/list", params={"path": "/local/sub"})
    assert set(names(body)) == {"b.txt", "deeper"}


# --- fs/get --------------------------------------------------------------------


async def test_get_file_raw_url_is_fetchable(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await fs_get(api, "/local/sub/b.txt")
    assert body["code"] == 200
    data = body["data"]
    assert data["name"] == "b.txt"
    assert data["is_dir"] is False
    assert data["size"] == 4
    assert data["type"] == 4
    assert data["provider"] == "Local"
    sign = api.services.signer.sign("/local/sub/b.txt")
    assert data["sign"] == sign
    parts = urlsplit(data["raw_url"])
    assert parts.scheme == "http"
    assert parts.netloc == "manifold.test"
    assert parts.path == "/d/local/sub/b.txt"
    assert parts.query == f"sign={sign}"
    response = await api.client.get(data["raw_url"])
    assert response.status_code == 200
    assert response.content == b"beta"


async def test_get_folder_has_no_raw_url(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    for path in ("/local/sub", "/local"):
        body = await fs_get(api, path)
        assert body["code"] == 200
        assert body["data"]["is_dir"] is True
        assert body["data"]["raw_url"] == ""
        assert body["data"]["sign"] == ""
    assert (await fs_get(api, "/local"))["data"]["name"] == "local"


async def test_get_of_the_root_is_alists_root_folder(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    data = (await fs_get(api, "/"))["data"]
    assert (data["name"], data["is_dir"], data["size"]) == ("root", True, 0)
    assert data["modified"] == "0001-01-01T00:00:00Z"
    assert data["provider"] == "unknown"


async def test_raw_url_uses_forwarded_headers_from_a_trusted_proxy(api: Api, root: Path) -> None:
    api.services.config.trusted_proxies = ["203.0.113.7"]
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await api.post(
        "/api/fs/get",
        {"path": "/local/a.txt"},
        headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "files.example"},
    )
    assert body["data"]["raw_url"].startswith("https://files.example/d/local/a.txt?sign=")


# --- metas ---------------------------------------------------------------------


async def test_folder_password(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await add_meta(api, "/local/sub", password="pw1")
    token = await user_token(api)
    denied = await fs_list(api, "/local/sub", token=token)
    assert (denied["code"], denied["message"]) == (403, PASSWORD_DENIED)
    wrong = await fs_list(api, "/local/sub", token=token, password="nope")
    assert wrong["code"] == 403
    right = await fs_list(api, "/local/sub", token=token, password="pw1")
    assert set(names(right)) == {"b.txt", "deeper"}
    # Files under a password carry signs whatever sign_all says.
    assert by_name(right)["b.txt"]["sign"]
    got = await fs_get(api, "/local/sub/b.txt", token=token)
    assert got["code"] == 200  # no p_sub: the file itself is not guarded
    # Without p_sub the subfolder is open.
    assert (await fs_list(api, "/local/sub/deeper", token=token))["code"] == 200
    # The admin has the "access without password" bit.
    assert (await fs_list(api, "/local/sub"))["code"] == 200


async def test_folder_password_guesses_are_limited_like_logins(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await add_meta(api, "/local/sub", password="pw1")
    token = await user_token(api)
    limit = api.services.config.max_login_failures
    codes = [
        (await fs_list(api, "/local/sub", token=token, password=f"guess-{n}"))["code"]
        for n in range(limit + 10)
    ]
    assert codes == [403] * limit + [429] * 10
    refused = await fs_list(api, "/local/sub", token=token, password="pw1")
    assert refused["code"] == 429  # even the right one, until the lock ends
    # Without a guess the folder answers as before, and open folders stay open.
    assert (await fs_list(api, "/local/sub", token=token))["code"] == 403
    assert (await fs_list(api, "/local", token=token))["code"] == 200


async def test_right_folder_passwords_do_not_count_as_guesses(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await add_meta(api, "/local/sub", password="pw1")
    token = await user_token(api)
    limit = api.services.config.max_login_failures
    for _ in range(2 * limit):
        assert (await fs_list(api, "/local/sub", token=token, password="pw1"))["code"] == 200
    wrong = [
        (await fs_list(api, "/local/sub", token=token, password=f"guess-{n}"))["code"]
        for n in range(limit + 1)
    ]
    assert wrong == [403] * limit + [429]


async def test_parallel_folder_password_guesses_are_not_checked_past_the_limit(
    api: Api, root: Path
) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await add_meta(api, "/local/sub", password="pw1")
    token = await user_token(api)
    limit = api.services.config.max_login_failures
    # The store several processes share: its check and count are separate queries.
    services = api.services
    services.reader.guesses = DatabaseGuessLimiter(services.engine, "folder-race", limit, 600)
    answers = await asyncio.gather(
        *(fs_list(api, "/local/sub", token=token, password=f"g-{n}") for n in range(3 * limit))
    )
    assert sum(body["code"] != 429 for body in answers) <= limit
    assert (await fs_list(api, "/local/sub", token=token, password="pw1"))["code"] == 429


async def test_password_with_p_sub_and_overriding_meta(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await add_meta(api, "/local/sub", password="pw1", p_sub=True)
    token = await user_token(api)
    for path in ("/local/sub/deeper", "/local/sub/deeper/c.txt", "/local/sub/b.txt"):
        body = await fs_get(api, path, token=token)
        assert (body["code"], body["message"]) == (403, PASSWORD_DENIED), path
        assert (await fs_get(api, path, token=token, password="pw1"))["code"] == 200
    assert (await fs_list(api, "/local/sub/deeper", token=token))["code"] == 403
    # A nearer meta without a password lifts it.
    await add_meta(api, "/local/sub/deeper", readme="open")
    opened = await fs_list(api, "/local/sub/deeper", token=token)
    assert names(opened) == ["c.txt"]
    assert opened["data"]["readme"] == "open"
    # The dirs endpoint checks the password too.
    dirs = await api.post("/api/fs/dirs", {"path": "/local/sub"}, token=token)
    assert dirs["code"] == 403
    dirs = await api.post("/api/fs/dirs", {"path": "/local/sub", "password": "pw1"}, token=token)
    assert [d["name"] for d in dirs["data"]] == ["deeper"]


async def test_hide_patterns(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await add_meta(api, "/local", hide="^a\\.txt$\n\\.mp4$\n^sub$")
    token = await user_token(api)
    shown = names(await fs_list(api, "/local", token=token))
    assert "a.txt" not in shown
    assert "movie.mp4" not in shown
    assert "sub" not in shown
    assert "song.mp3" in shown
    body = await fs_list(api, "/local", token=token)
    assert body["data"]["total"] == len(shown)
    # A hidden entry cannot be reached directly either.
    assert (await fs_get(api, "/local/a.txt", token=token))["code"] == 403
    dirs = await api.post("/api/fs/dirs", {"path": "/local"}, token=token)
    assert "sub" not in [d["name"] for d in dirs["data"] or []]
    # The admin sees everything (bit 0 in the default permission).
    assert {"a.txt", "movie.mp4", "sub"} <= set(names(await fs_list(api, "/local")))
    # A user with bit 0 sees them as well.
    seer = await user_token(api, "seer", permission=1)
    assert "a.txt" in names(await fs_list(api, "/local", token=seer))


async def test_hide_applies_below_only_with_h_sub(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    root = make_tree(tmp_path / "h", {"x.bak": "", "d/y.bak": "", "d/keep.txt": ""})
    await mount_local(api, "/h", root)
    await add_meta(api, "/h", hide="\\.bak$")
    token = await user_token(api)
    assert names(await fs_list(api, "/h", token=token)) == ["d"]
    assert set(names(await fs_list(api, "/h/d", token=token))) == {"y.bak", "keep.txt"}
    await api.as_admin()
    meta = (await api.get("/api/admin/meta/list"))["data"]["content"][0]
    meta["h_sub"] = True
    assert (await api.post("/api/admin/meta/update", meta))["code"] == 200
    assert names(await fs_list(api, "/h/d", token=token)) == ["keep.txt"]


async def test_readme_and_header(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await add_meta(api, "/local/sub", readme="R", header="H")
    here = await fs_list(api, "/local/sub")
    assert (here["data"]["readme"], here["data"]["header"]) == ("R", "H")
    below = await fs_list(api, "/local/sub/deeper")
    assert (below["data"]["readme"], below["data"]["header"]) == ("", "")
    got = await fs_get(api, "/local/sub")
    assert (got["data"]["readme"], got["data"]["header"]) == ("R", "H")


async def test_readme_and_header_sub_flags(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await add_meta(api, "/local/sub", readme="R", r_sub=True, header="H")
    below = await fs_list(api, "/local/sub/deeper")
    assert (below["data"]["readme"], below["data"]["header"]) == ("R", "")
    meta = (await api.get("/api/admin/meta/list"))["data"]["content"][0]
    meta.update(r_sub=False, header_sub=True)
    assert (await api.post("/api/admin/meta/update", meta))["code"] == 200
    below = await fs_list(api, "/local/sub/deeper")
    assert (below["data"]["readme"], below["data"]["header"]) == ("", "H")


async def test_write_flag_and_refresh(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    token = await user_token(api)
    body = await fs_list(api, "/local", token=token)
    assert body["data"]["write"] is False
    refused = await fs_list(api, "/local", token=token, refresh=True)
    assert (refused["code"], refused["message"]) == (403, "Refresh without permission")
    assert (await fs_list(api, "/local", refresh=True))["code"] == 200  # admin may
    await add_meta(api, "/local/sub", write=True)
    granted = await fs_list(api, "/local/sub", token=token)
    assert granted["data"]["write"] is True
    assert (await fs_list(api, "/local/sub", token=token, refresh=True))["code"] == 200
    # Without w_sub the grant stops at the folder itself.
    assert (await fs_list(api, "/local/sub/deeper", token=token))["data"]["write"] is False
    writer = await user_token(api, "writer", permission=8)
    assert (await fs_list(api, "/local", token=writer))["data"]["write"] is True


async def test_dirs(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await api.post("/api/fs/dirs", {"path": "/local"})
    assert body["code"] == 200
    assert sorted(d["name"] for d in body["data"]) == ["empty", "sub"]
    assert all(set(d) == {"name", "modified"} for d in body["data"])
    leaf = await api.post("/api/fs/dirs", {"path": "/local/sub/deeper"})
    assert leaf["code"] == 200
    assert leaf["data"] is None


async def test_dirs_force_root_is_for_admins(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    token = await user_token(api, base_path="/local/sub")
    body = await api.post("/api/fs/dirs", {"path": "/", "force_root": True}, token=token)
    assert (body["code"], body["message"]) == (403, "Permission denied")
    ok = await api.post("/api/fs/dirs", {"path": "/", "force_root": True})
    assert [d["name"] for d in ok["data"]] == ["local"]
    scoped = await api.post("/api/fs/dirs", {"path": "/"}, token=token)
    assert [d["name"] for d in scoped["data"]] == ["deeper"]


async def test_base_path_user_sees_only_subtree(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    token = await user_token(api, base_path="/local/sub")
    body = await fs_list(api, "/", token=token)
    assert set(names(body)) == {"b.txt", "deeper"}
    assert by_name(body)["b.txt"]["sign"] == api.services.signer.sign("/local/sub/b.txt")
    assert names(await fs_list(api, "/deeper", token=token)) == ["c.txt"]
    got = await fs_get(api, "/b.txt", token=token)
    assert got["code"] == 200
    assert urlsplit(got["data"]["raw_url"]).path == "/d/local/sub/b.txt"
    assert (await api.client.get(got["data"]["raw_url"])).content == b"beta"
    # "/local" is resolved inside the base path, so it does not exist there.
    missing = await fs_list(api, "/local", token=token)
    assert missing["code"] == 500
    assert "a.txt" not in str(missing)


async def test_fs_other_is_not_supported_on_local(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await api.post("/api/fs/other", {"path": "/local/a.txt", "method": "x"})
    assert (body["code"], body["message"]) == (500, "not implement")
    missing = await api.post("/api/fs/other", {"path": "/local/none", "method": "x"})
    assert missing["code"] == 500
    assert missing["message"].endswith(NOT_FOUND_SUFFIX)


# --- binding: JSON bodies, form bodies and query strings ---------------------------


async def raw_call(api: Api, method: str, path: str, **kw: Any) -> dict[str, Any]:
    response = await api.client.request(method, path, headers={"Authorization": api.token}, **kw)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_list_binds_a_form_body(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    fields = {"path": "/local/sub", "page": "2", "per_page": "1"}
    body = await raw_call(api, "POST", "/api/fs/list", data=fields)
    assert body["data"]["total"] == 2
    assert len(names(body)) == 1


async def test_list_binds_a_multipart_body(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    files = {"unused": ("x.bin", b"x")}
    body = await raw_call(api, "POST", "/api/fs/list", data={"path": "/local/sub"}, files=files)
    assert set(names(body)) == {"b.txt", "deeper"}


async def test_post_without_a_body_binds_the_query(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await raw_call(api, "POST", "/api/fs/list", params={"path": "/local/sub"})
    assert set(names(body)) == {"b.txt", "deeper"}


async def test_get_dirs_and_other_bind_the_query(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    got = await api.get("/api/fs/get", params={"path": "/local/sub/b.txt"})
    assert got["data"]["name"] == "b.txt"
    dirs = await api.get("/api/fs/dirs", params={"path": "/local"})
    assert sorted(d["name"] for d in dirs["data"]) == ["empty", "sub"]
    other = await api.get("/api/fs/other", params={"path": "/local/a.txt", "method": "x"})
    assert (other["code"], other["message"]) == (500, "not implement")


async def test_query_values_are_converted(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    root = make_tree(tmp_path / "many", {f"f{n}.txt": "" for n in range(5)})
    await mount_local(api, "/m", root)
    everything = names(await fs_list(api, "/m"))
    body = await api.get("/api/fs/list", params={"path": "/m", "page": "2", "per_page": "2"})
    assert names(body) == everything[2:4]
    # Empty values leave numbers and flags at their defaults, as Go's form binding does.
    body = await api.get("/api/fs/list", params={"path": "/m", "page": "", "per_page": ""})
    assert names(body) == everything
    # Go's url.Values: the first of repeated values wins.
    body = await api.get("/api/fs/list", params=[("path", "/m"), ("path", "/nowhere")])
    assert names(body) == everything


async def test_refresh_is_bound_from_the_query(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    token = await user_token(api)
    for key in ("Refresh", "refresh"):
        query = {"path": "/local", key: "true"}
        body = await api.get("/api/fs/list", params=query, token=token)
        assert (body["code"], body["message"]) == (403, "Refresh without permission"), key


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            {"page": "x"},
            "page: Input should be a valid integer, unable to parse string as an integer",
        ),
        (
            {"per_page": "1.5"},
            "per_page: Input should be a valid integer, unable to parse string as an integer",
        ),
        (
            {"refresh": "maybe"},
            "refresh: Input should be a valid boolean, unable to interpret input",
        ),
    ],
)
async def test_bad_query_values_answer_400(
    api: Api, root: Path, query: dict[str, str], message: str
) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await api.get("/api/fs/list", params={"path": "/local", **query})
    assert body["code"] == 400
    assert body["message"].startswith(message)
    assert body["data"] is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"page": "2"}, "page: Input should be a valid integer"),
        ({"path": 5}, "path: Input should be a valid string"),
        ({"refresh": "true"}, "refresh: Input should be a valid boolean"),
    ],
)
async def test_json_bodies_stay_strict(
    api: Api, root: Path, fields: dict[str, Any], message: str
) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    body = await api.post("/api/fs/list", {"path": "/local", **fields})
    assert (body["code"], body["message"], body["data"]) == (400, message, None)


@pytest.mark.parametrize("endpoint", ["/api/fs/list", "/api/fs/get", "/api/fs/dirs"])
async def test_malformed_and_non_object_json_answer_400(api: Api, endpoint: str) -> None:
    await api.as_admin()
    json_type = {"Authorization": api.token, "Content-Type": "application/json"}
    response = await api.client.post(endpoint, content=b'{"path":', headers=json_type)
    assert response.json()["code"] == 400
    assert response.json()["message"].startswith("body: invalid JSON")
    body = await api.post(endpoint, ["/"])
    message = "body: Input should be a valid dictionary or object to extract fields from"
    assert (body["code"], body["message"]) == (400, message)
    response = await api.client.post(endpoint, content=b"", headers=json_type)
    assert response.json() == {"code": 400, "message": "body: Field required", "data": None}


async def test_guest_check_comes_before_binding(api: Api) -> None:
    admin = await api.login()
    guest = (await api.get("/api/admin/user/list", token=admin))["data"]["content"]
    guest = next(u for u in guest if u["role"] == 1)
    guest["disabled"] = True
    assert (await api.post("/api/admin/user/update", guest, token=admin))["code"] == 200
    body = await api.get("/api/fs/list", params={"page": "x"})
    assert body["code"] == 401


# --- related objects in fs/get ---------------------------------------------------

RELATED_TREE: dict[str, bytes | str] = {
    "movie.mp4": "video",
    "movie.srt": "subs",
    "movie.zh.ass": "more subs",
    "movie2.mkv": "sequel",
    "movie/": "",
    "other.txt": "other",
    "sub/movie.srt": "not a sibling",
}


async def test_get_lists_related_siblings_as_list_entries(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/v", make_tree(tmp_path / "v", RELATED_TREE))
    listed = by_name(await fs_list(api, "/v"))
    got = await fs_get(api, "/v/movie.mp4")
    related = got["data"]["related"]
    assert {r["name"] for r in related} == {"movie.srt", "movie.zh.ass", "movie2.mkv", "movie"}
    in_listing = [n for n in listed if n.startswith("movie") and n != "movie.mp4"]
    assert [r["name"] for r in related] == in_listing  # in the listing's order
    for entry in related:
        assert entry == listed[entry["name"]]
    assert listed["movie"]["type"] == 1
    assert listed["movie.srt"]["sign"] == api.services.signer.sign("/v/movie.srt")


async def test_related_is_null_without_siblings(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/v", make_tree(tmp_path / "v", RELATED_TREE))
    for path in ("/v/other.txt", "/v/sub/movie.srt", "/"):
        got = await fs_get(api, path)
        assert got["code"] == 200, got
        assert got["data"]["related"] is None, path


async def test_related_leaves_out_hidden_siblings(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/v", make_tree(tmp_path / "v", RELATED_TREE))
    await add_meta(api, "/v", hide="\\.srt$\n^movie$")
    token = await user_token(api)
    got = await fs_get(api, "/v/movie.mp4", token=token)
    assert {r["name"] for r in got["data"]["related"]} == {"movie.zh.ass", "movie2.mkv"}
    seen_by_admin = await fs_get(api, "/v/movie.mp4")
    assert "movie.srt" in {r["name"] for r in seen_by_admin["data"]["related"]}


async def test_related_under_a_password_carry_signs(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/v", make_tree(tmp_path / "v", RELATED_TREE))
    await save_settings(api, sign_all="false")
    await add_meta(api, "/v", password="pw")
    token = await user_token(api)
    got = await fs_get(api, "/v/movie.mp4", token=token, password="pw")
    signs = {r["name"]: r["sign"] for r in got["data"]["related"]}
    assert signs["movie.srt"] == api.services.signer.sign("/v/movie.srt")
    assert signs["movie"] == ""


# --- paging without cost, and kept renderings ------------------------------------


class Counter:
    def __init__(self) -> None:
        self.calls = 0


def count_driver_lists(api: Api, mount_path: str) -> Counter:
    resolved = api.services.storages.resolve(mount_path)
    assert resolved is not None and resolved.target.ops is not None
    driver = resolved.target.ops.driver
    counter, original = Counter(), driver.list

    async def counted(folder: Obj) -> list[Obj]:
        counter.calls += 1
        return await original(folder)

    driver.list = counted  # type: ignore[method-assign]
    return counter


def count_encodes(monkeypatch: pytest.MonkeyPatch) -> Counter:
    counter, original = Counter(), FolderStyle.encode

    def counted(style: FolderStyle, obj: Obj) -> bytes:
        counter.calls += 1
        return original(style, obj)

    monkeypatch.setattr(FolderStyle, "encode", counted)
    return counter


async def seven_files(api: Api, tmp_path: Path) -> Path:
    """As the admin, a Local storage at /m holding seven empty files; its root."""
    await api.as_admin()
    root = make_tree(tmp_path / "many", {f"f{n}.txt": "" for n in range(7)})
    await mount_local(api, "/m", root)
    return root


async def test_paging_scans_a_folder_once(api: Api, tmp_path: Path) -> None:
    root = await seven_files(api, tmp_path)
    scans = count_driver_lists(api, "/m")
    pages = [names(await fs_list(api, "/m", page=p, per_page=3)) for p in (1, 2, 3)]
    assert scans.calls == 1
    assert [n for page in pages for n in page] == names(await fs_list(api, "/m"))
    (root / "late.txt").write_text("written behind the server's back")
    refreshed = await fs_list(api, "/m", refresh=True)
    assert scans.calls == 2
    assert "late.txt" in names(refreshed)


async def test_a_page_encodes_only_its_own_entries(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seven_files(api, tmp_path)
    encodes = count_encodes(monkeypatch)
    await fs_list(api, "/m", page=2, per_page=3)
    assert encodes.calls == 3
    await fs_list(api, "/m", page=2, per_page=3)
    assert encodes.calls == 3
    await fs_list(api, "/m", page=3, per_page=3)
    assert encodes.calls == 4
    whole = await fs_list(api, "/m")
    assert encodes.calls == 7
    assert len(names(whole)) == 7


async def test_a_rescan_encodes_only_what_changed(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = await seven_files(api, tmp_path)
    encodes = count_encodes(monkeypatch)
    await fs_list(api, "/m")
    assert encodes.calls == 7
    await fs_list(api, "/m", refresh=True)
    assert encodes.calls == 7  # rescanned, nothing changed: nothing encoded again
    (root / "f0.txt").write_text("grown")
    (root / "new.txt").write_text("")
    (root / "f6.txt").unlink()
    listed = by_name(await fs_list(api, "/m", refresh=True))
    assert encodes.calls == 9
    assert listed["f0.txt"]["size"] == 5
    assert set(listed) == {f"f{n}.txt" for n in range(6)} | {"new.txt"}


async def test_a_page_asked_again_after_a_change_shows_the_change(api: Api, tmp_path: Path) -> None:
    root = await seven_files(api, tmp_path)
    for _ in range(2):  # the second answers are the pages joined the first time
        assert names(await fs_list(api, "/m", page=1, per_page=3)) == ["f0.txt", "f1.txt", "f2.txt"]
        assert len(names(await fs_list(api, "/m"))) == 7
    (root / "f1.txt").unlink()
    (root / "f2.txt").write_text("grown")
    first = by_name(await fs_list(api, "/m", page=1, per_page=3, refresh=True))
    assert list(first) == ["f0.txt", "f2.txt", "f3.txt"]
    assert first["f2.txt"]["size"] == 5
    assert "f1.txt" not in names(await fs_list(api, "/m"))


async def test_kept_renderings_follow_settings_and_token(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    first = by_name(await fs_list(api, "/local"))["a.txt"]["sign"]
    assert first == api.services.signer.sign("/local/a.txt")
    await save_settings(api, sign_all="false")
    assert by_name(await fs_list(api, "/local"))["a.txt"]["sign"] == ""
    await save_settings(api, sign_all="true", text_types="md", filename_char_mapping='{"a": "A"}')
    entry = by_name(await fs_list(api, "/local"))["A.txt"]
    assert (entry["type"], entry["sign"]) == (0, first)
    admin = await api.login()
    assert (await api.post("/api/admin/setting/reset_token", token=admin))["code"] == 200
    renewed = by_name(await fs_list(api, "/local"))["A.txt"]["sign"]
    assert renewed not in ("", first)
    assert renewed == api.services.signer.sign("/local/a.txt")


async def test_each_user_sees_their_own_view(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    await add_meta(api, "/local", hide="^a\\.txt$")
    token = await user_token(api)
    for _ in range(2):
        assert "a.txt" not in names(await fs_list(api, "/local", token=token))
        assert "a.txt" in names(await fs_list(api, "/local"))


async def test_a_loading_storage_answers_at_once_and_the_others_serve(api: Api, root: Path) -> None:
    await api.as_admin()
    await mount_local(api, "/local", root)
    with silent_server() as silent:  # /slow's back end never answers: it stays loading
        await store(api.services, "/slow", "SFTP", sftp_addition(silent))
        await api.services.storages.load_all()
        for body in (await fs_list(api, "/slow"), await fs_get(api, "/slow/a.txt")):
            assert (body["code"], body["message"]) == (500, "storage not init: loading")
        await api.services.storages.ready("/local")
        assert (await fs_list(api, "/local"))["code"] == 200


async def test_local_thumbnails_are_signed_links_here(api: Api, root: Path) -> None:
    await api.as_admin()
    addition = json.dumps({"root_folder_path": str(root), "thumbnail": True})
    await mount_local(api, "/local", root, addition=addition)
    await save_settings(api, sign_all="false")
    listed = by_name(await fs_list(api, "/local"))
    thumb = listed["pic.PNG"]["thumb"]
    sign = api.services.signer.sign("/local/pic.PNG")
    assert thumb == f"/d/local/pic.PNG?type=thumb&sign={sign}"
    assert listed["a.txt"]["thumb"] == ""
    assert listed["pic.PNG"]["sign"] == ""


async def test_a_folder_made_on_disk_is_listed_at_once(api: Api, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "fresh", {"a.txt": "a"})
    past = time.time() - 60
    os.utime(root, (past, past))  # an old folder: its fingerprint can be trusted
    await api.as_admin()
    await mount_local(api, "/fresh", root)
    assert names(await fs_list(api, "/fresh")) == ["a.txt"]
    (root / "made-behind-its-back").mkdir()
    assert names(await fs_list(api, "/fresh")) == ["a.txt", "made-behind-its-back"]
