"""Meta records through /api/admin/meta/*, and the in-memory nearest-meta lookup."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api

FULL_META: dict[str, Any] = {
    "path": "/docs",
    "password": "open sesame",
    "p_sub": True,
    "write": True,
    "w_sub": False,
    "hide": "^secret$\n\\.bak$",
    "h_sub": True,
    "readme": "# Read me",
    "r_sub": False,
    "header": "Header text",
    "header_sub": True,
}

MISSING = "failed get old meta: record not found"


async def create(api: Api, path: str, **fields: Any) -> dict[str, Any]:
    return await api.post("/api/admin/meta/create", {"path": path, **fields})


async def all_metas(api: Api) -> list[dict[str, Any]]:
    body = await api.get("/api/admin/meta/list")
    assert body["code"] == 200, body
    content: list[dict[str, Any]] = body["data"]["content"]
    assert body["data"]["total"] == len(content)
    return content


async def meta_id(api: Api, path: str) -> int:
    return int(next(m["id"] for m in await all_metas(api) if m["path"] == path))


async def test_round_trip_of_all_twelve_fields(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/meta/create", FULL_META)
    assert (body["code"], body["message"], body["data"]) == (200, "success", None)
    [listed] = await all_metas(api)
    assert listed == {"id": listed["id"], **FULL_META}
    assert len(listed) == 12

    got = await api.get("/api/admin/meta/get", params={"id": listed["id"]})
    assert got["data"] == listed

    flipped = {k: (not v if isinstance(v, bool) else v) for k, v in listed.items()}
    flipped.update(path="/docs2", password="", hide="x", readme="r", header="h")
    assert (await api.post("/api/admin/meta/update", flipped))["code"] == 200
    got = await api.get("/api/admin/meta/get", params={"id": listed["id"]})
    assert got["data"] == flipped

    deleted = await api.post("/api/admin/meta/delete", params={"id": listed["id"]})
    assert (deleted["code"], deleted["message"]) == (200, "success")
    assert await all_metas(api) == []


async def test_list_pages_in_id_order(api: Api) -> None:
    await api.as_admin()
    for path in ("/a", "/b", "/c"):
        assert (await create(api, path))["code"] == 200
    body = await api.get("/api/admin/meta/list", params={"page": 2, "per_page": 2})
    assert [m["path"] for m in body["data"]["content"]] == ["/c"]
    assert body["data"]["total"] == 3
    assert [m["path"] for m in await all_metas(api)] == ["/a", "/b", "/c"]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("a/../b//c/", "/b/c"),
        ("\\x\\y\\", "/x/y"),
        ("/p/./q", "/p/q"),
        ("/../..", "/"),
    ],
)
async def test_create_cleans_path(api: Api, given: str, stored: str) -> None:
    await api.as_admin()
    assert (await create(api, given))["code"] == 200
    assert [m["path"] for m in await all_metas(api)] == [stored]


async def test_update_cleans_path(api: Api) -> None:
    await api.as_admin()
    await create(api, "/a")
    mid = await meta_id(api, "/a")
    updated = await api.post("/api/admin/meta/update", {"id": mid, "path": "z\\y/../x/"})
    assert updated["code"] == 200, updated
    assert [m["path"] for m in await all_metas(api)] == ["/z/x"]


async def test_duplicate_path_is_500(api: Api) -> None:
    await api.as_admin()
    assert (await create(api, "/dup"))["code"] == 200
    body = await create(api, "dup/")
    assert body["code"] == 500
    assert "/dup" in body["message"]
    assert len(await all_metas(api)) == 1


async def test_update_onto_another_metas_path_is_500(api: Api) -> None:
    await api.as_admin()
    await create(api, "/one")
    await create(api, "/two")
    body = await api.post(
        "/api/admin/meta/update", {"id": await meta_id(api, "/two"), "path": "/one"}
    )
    assert body["code"] == 500
    assert [m["path"] for m in await all_metas(api)] == ["/one", "/two"]
    kept = api.services.metas.nearest("/two/x")
    assert kept is not None
    assert kept.path == "/two"


async def test_invalid_hide_line_is_400(api: Api) -> None:
    await api.as_admin()
    body = await create(api, "/h", hide="fine\na(\nalso-fine")
    assert body["code"] == 400
    assert body["message"].startswith("a( is illegal:")
    assert await all_metas(api) == []


async def test_invalid_hide_line_on_update_is_400(api: Api) -> None:
    await api.as_admin()
    await create(api, "/h", hide="ok")
    mid = await meta_id(api, "/h")
    body = await api.post("/api/admin/meta/update", {"id": mid, "path": "/h", "hide": "[z"})
    assert body["code"] == 400
    assert body["message"].startswith("[z is illegal:")
    assert (await all_metas(api))[0]["hide"] == "ok"


async def test_hide_is_validated_line_by_line_as_it_is_compiled(api: Api) -> None:
    await api.as_admin()
    body = await create(api, "/h", hide="a\r(?=b)")
    assert body["code"] == 400
    assert body["message"] == (
        "a\r(?=b) is illegal: error parsing regexp: invalid or unsupported Perl syntax: `(?=`"
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/admin/meta/get"),
        ("POST", "/api/admin/meta/delete"),
    ],
)
async def test_missing_id_is_500(api: Api, method: str, path: str) -> None:
    await api.as_admin()
    body = await api.call(method, path, params={"id": 999})
    assert (body["code"], body["message"]) == (500, MISSING)


async def test_update_missing_id_is_500(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/meta/update", {"id": 999, "path": "/x"})
    assert (body["code"], body["message"]) == (500, MISSING)
    assert await all_metas(api) == []


async def test_non_integer_id_is_400(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/meta/get", params={"id": "one"})
    assert body["code"] == 400


# --- nearest ---------------------------------------------------------------------


async def test_nearest_finds_the_closest_ancestor(api: Api) -> None:
    await api.as_admin()
    metas = api.services.metas
    assert metas.nearest("/a/b/c") is None
    await create(api, "/a", readme="of a")
    found = metas.nearest("/a/b/c")
    assert found is not None
    assert (found.path, found.readme) == ("/a", "of a")
    assert metas.nearest("/ab") is None

    await create(api, "/a/b", readme="of b")
    found = metas.nearest("/a/b/c")
    assert found is not None
    assert (found.path, found.readme) == ("/a/b", "of b")
    found = metas.nearest("/a/x")
    assert found is not None
    assert found.path == "/a"


async def test_nearest_follows_update_and_delete(api: Api) -> None:
    await api.as_admin()
    metas = api.services.metas
    await create(api, "/a")
    mid = await meta_id(api, "/a")
    assert (await api.post("/api/admin/meta/update", {"id": mid, "path": "/m"}))["code"] == 200
    assert metas.nearest("/a/b/c") is None
    moved = metas.nearest("/m/n")
    assert moved is not None
    assert moved.path == "/m"

    assert (await api.post("/api/admin/meta/delete", params={"id": mid}))["code"] == 200
    assert metas.nearest("/m/n") is None


async def test_root_meta_applies_everywhere(api: Api) -> None:
    await api.as_admin()
    await create(api, "/", header="root")
    found = api.services.metas.nearest("/deep/down/here")
    assert found is not None
    assert found.header == "root"


# --- access ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "params", "json"),
    [
        ("GET", "/api/admin/meta/list", None, None),
        ("GET", "/api/admin/meta/get", {"id": 1}, None),
        ("POST", "/api/admin/meta/create", None, {"path": "/x"}),
        ("POST", "/api/admin/meta/update", None, {"id": 1, "path": "/x"}),
        ("POST", "/api/admin/meta/delete", {"id": 1}, None),
    ],
)
async def test_non_admin_is_refused(
    api: Api, method: str, path: str, params: dict[str, Any] | None, json: Any
) -> None:
    await api.make_user("mallory", "pw")
    token = await api.login("mallory", "pw")
    body = await api.call(method, path, params=params, json=json, token=token)
    assert (body["code"], body["message"]) == (403, "You are not an admin")
    assert api.services.metas.nearest("/x") is None
