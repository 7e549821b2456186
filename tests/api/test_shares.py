"""Share links through the API: the owner's ``/api/share/*`` and a visitor's
``/@s/<id>`` reads and ``/sd`` downloads, with OpenList v4's JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.models import Perm
from tests.api.fs_helpers import make_tree, mount_local
from tests.api.share_helpers import (
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


@pytest.fixture
async def tree(api: Api, tmp_path: Path) -> AsyncIterator[Path]:
    root = make_tree(
        tmp_path / "root",
        {
            "bob/docs/a.txt": "alpha",
            "bob/docs/sub/b.txt": "beta",
            "bob/one.txt": "one",
            "bob/two.txt": "two",
        },
    )
    await api.as_admin()
    await mount_local(api, "/local", root)
    await api.make_user("bob", PW, base_path="/local/bob", permission=SHARER)
    await api.make_user("carol", PW, base_path="/local/bob", permission=0)
    yield root


async def test_folder_share_is_browsed_and_downloaded_without_login(api: Api, tree: Path) -> None:
    bob = await api.login("bob", PW)
    share_id = await made_share(api, bob, ["/local/bob/docs"], remark="for you")
    assert listed(await visit_list(api, f"/@s/{share_id}")) == ["a.txt", "sub"]
    assert listed(await visit_list(api, f"/@s/{share_id}/sub")) == ["b.txt"]
    got = await visit_get(api, f"/@s/{share_id}/sub/b.txt")
    assert got["code"] == 200, got
    assert got["data"]["name"] == "b.txt" and got["data"]["sign"] == ""
    raw = got["data"]["raw_url"]
    assert raw == f"http://manifold.test/sd/{share_id}/sub/b.txt"
    response = await download(api, raw)
    assert response.status_code == 200 and response.content == b"beta"
    assert "attachment" in response.headers["content-disposition"]


async def test_single_file_share_serves_the_file_at_its_root(api: Api, tree: Path) -> None:
    bob = await api.login("bob", PW)
    share_id = await made_share(api, bob, ["/local/bob/one.txt"])
    got = await visit_get(api, f"/@s/{share_id}")
    assert got["code"] == 200 and got["data"]["name"] == "one.txt", got
    assert got["data"]["is_dir"] is False
    for url in (f"/sd/{share_id}", f"/sd/{share_id}/"):
        response = await download(api, url)
        assert response.status_code == 200 and response.content == b"one"


async def test_a_folder_share_has_no_bytes_of_its_own(api: Api, tree: Path) -> None:
    bob = await api.login("bob", PW)
    share_id = await made_share(api, bob, ["/local/bob/docs"])
    for url in (f"/sd/{share_id}", f"/sd/{share_id}/sub"):
        response = await download(api, url)
        assert response.status_code == 400, url
        body = response.json()
        assert body["code"] == 400 and body["message"].startswith("cannot download a folder")
    got = await visit_get(api, f"/@s/{share_id}")
    assert got["code"] == 200 and got["data"]["raw_url"] == ""


async def test_several_files_share_lists_them_by_name(api: Api, tree: Path) -> None:
    bob = await api.login("bob", PW)
    files = ["/local/bob/one.txt", "/local/bob/docs"]
    share_id = await made_share(api, bob, files, order_by="name", extract_folder="front")
    body = await visit_list(api, f"/@s/{share_id}")
    assert [o["name"] for o in body["data"]["content"]] == ["docs", "one.txt"]
    assert listed(await visit_list(api, f"/@s/{share_id}/docs")) == ["a.txt", "sub"]
    assert (await download(api, f"/sd/{share_id}/one.txt")).content == b"one"
    assert (await download(api, f"/sd/{share_id}/docs/a.txt")).content == b"alpha"
    root = await download(api, f"/sd/{share_id}")
    assert root.status_code == 400  # a root of several files has no bytes
    assert root.json()["code"] == 400 and root.json()["message"] == "cannot get sharing root link"


async def test_owner_lists_updates_disables_and_deletes(api: Api, tree: Path) -> None:
    bob = await api.login("bob", PW)
    created = await create_share(api, bob, ["/local/bob/docs"], pwd="open", max_accessed=5)
    data = created["data"]
    assert data["creator"] == "bob" and data["pwd"] == "open" and data["max_accessed"] == 5
    assert data["expires"] is None and data["accessed"] == 0
    share_id = data["id"]
    mine = await api.get("/api/share/list", token=bob)
    assert [s["id"] for s in mine["data"]["content"]] == [share_id]
    assert (await api.get("/api/share/list"))["data"]["total"] == 1  # the admin sees it
    update = {**data, "remark": "changed", "expires": "2999-01-02T03:04:05Z"}
    updated = await api.post("/api/share/update", update, token=bob)
    assert updated["code"] == 200, updated
    got = await api.get("/api/share/get", params={"id": share_id}, token=bob)
    assert got["data"]["remark"] == "changed"
    assert got["data"]["expires"].startswith("2999-01-02T03:04:05")
    disabled = await api.post("/api/share/disable", params={"id": share_id}, token=bob)
    assert disabled["code"] == 200
    assert (await visit_list(api, f"/@s/{share_id}", "open"))["code"] == 410
    await api.post("/api/share/enable", params={"id": share_id}, token=bob)
    assert (await visit_list(api, f"/@s/{share_id}", "open"))["code"] == 200
    deleted = await api.post("/api/share/delete", params={"id": share_id}, token=bob)
    assert deleted["code"] == 200
    assert (await api.get("/api/share/list", token=bob))["data"]["content"] == []


async def test_sharing_needs_its_permission_bit(api: Api, tree: Path) -> None:
    carol = await api.login("carol", PW)
    refused = await create_share(api, carol, ["/local/bob/docs"])
    assert refused["code"] == 403, refused
    bob = await api.login("bob", PW)
    own_id = await create_share(api, bob, ["/local/bob/docs"], id="my-share")
    assert own_id["code"] == 403, own_id  # choosing the id is bit 15
    await api.post(
        "/api/admin/user/update",
        {
            "id": await _user_id(api, "bob"),
            "username": "bob",
            "base_path": "/local/bob",
            "permission": int(Perm.SHARE | Perm.SHARE_CUSTOM_ID),
        },
    )
    bob = await api.login("bob", PW, fresh=True)
    chosen = await create_share(api, bob, ["/local/bob/docs"], id="my-share")
    assert chosen["code"] == 200 and chosen["data"]["id"] == "my-share", chosen
    taken = await create_share(api, bob, ["/local/bob/one.txt"], id="my-share")
    assert taken["code"] == 500 and "taken" in taken["message"]
    bad = await create_share(api, bob, ["/local/bob/docs"], id="a/b")
    assert bad["code"] == 400


async def test_guests_cannot_manage_shares(api: Api, tree: Path) -> None:
    body = await api.get("/api/share/list", token="")
    assert body["code"] in (401, 403), body


async def test_share_summary_setting_is_public(api: Api) -> None:
    body = await api.get("/api/public/settings", token="")
    assert "/@s/{{id}}" in body["data"]["share_summary_content"]


async def _user_id(api: Api, name: str) -> int:
    users = await api.get("/api/admin/user/list")
    return int(next(u["id"] for u in users["data"]["content"] if u["username"] == name))
