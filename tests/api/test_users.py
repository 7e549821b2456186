"""Administration of users through /api/admin/user/*."""

from __future__ import annotations

import json
from typing import Any

import pytest

from manifold.models import ADMIN_RIGHTS, PROTOCOL_BITS, Perm
from tests.conftest import Api

USER_FIELDS = {
    "id",
    "username",
    "password",
    "base_path",
    "role",
    "disabled",
    "permission",
    "sso_id",
}
SECRET_KEYS = ("pwd_hash", "pwd_ts", "otp_secret", "salt", "token_gen")
# A throwaway public key, valid OpenSSH text; any key works for these tests.
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFcSy1kEs4eVbDd4NXIebcZSogidnhyrB/4hOFohLzjb"


async def create(api: Api, username: str, password: str = "pw", **fields: Any) -> dict[str, Any]:
    return await api.post(
        "/api/admin/user/create", {"username": username, "password": password, **fields}
    )


async def users_by_name(api: Api) -> dict[str, dict[str, Any]]:
    body = await api.get("/api/admin/user/list")
    return {u["username"]: u for u in body["data"]["content"]}


async def login_body(api: Api, username: str, password: str) -> dict[str, Any]:
    return await api.post("/api/auth/login", {"username": username, "password": password}, token="")


def assert_no_secrets(body: dict[str, Any]) -> None:
    text = json.dumps(body)
    for key in SECRET_KEYS:
        assert f'"{key}"' not in text


# --- defaults and listing ----------------------------------------------------


async def test_default_admin_and_guest_exist(api: Api) -> None:
    await api.as_admin()
    users = await users_by_name(api)
    admin, guest = users["admin"], users["guest"]
    assert (admin["role"], admin["base_path"]) == (2, "/")
    assert admin["permission"] == 0x30FF | ADMIN_RIGHTS  # the role's bits with AList's
    assert admin["disabled"] is False
    assert guest["role"] == 1
    assert guest["disabled"] is True


async def test_the_admin_holds_every_right_but_the_protocol_logins(api: Api) -> None:
    await api.as_admin()
    me = (await api.get("/api/me"))["data"]
    for bit in (Perm.SHARE, Perm.SHARE_CUSTOM_ID, Perm.OFFLINE_DOWNLOAD, Perm.SEE_HIDDEN):
        assert me["permission"] & bit, bit
    assert not me["permission"] & PROTOCOL_BITS  # ticked by the admin, as in AList
    body = {"username": "admin", "role": 2, "base_path": "/", "permission": 0}
    assert (await api.post("/api/admin/user/update", json={**body, "id": me["id"]}))["code"] == 200
    me = (await api.get("/api/me"))["data"]
    assert me["permission"] == ADMIN_RIGHTS  # unticking a right does not take it away


async def test_list_pages_in_id_order_with_total(api: Api) -> None:
    await api.as_admin()
    for name in ("u1", "u2", "u3"):
        assert (await create(api, name))["code"] == 200

    async def names(**params: int) -> tuple[list[str], int]:
        data = (await api.get("/api/admin/user/list", params=params))["data"]
        return [u["username"] for u in data["content"]], data["total"]

    assert await names(page=1, per_page=2) == (["admin", "guest"], 5)
    assert await names(page=2, per_page=2) == (["u1", "u2"], 5)
    assert await names(page=3, per_page=2) == (["u3"], 5)
    assert await names(page=4, per_page=2) == ([], 5)
    assert await names(per_page=0) == (["admin", "guest", "u1", "u2", "u3"], 5)


async def test_list_and_get_hide_every_secret(api: Api) -> None:
    await api.as_admin()
    await create(api, "bob", "bob-pw")
    uid = await api.make_user("carol", "carol-pw")
    await api.services.users.set_otp_secret(await api.services.users.get(uid), "JBSWY3DPEHPK3PXP")
    listing = await api.get("/api/admin/user/list")
    for user in listing["data"]["content"]:
        assert set(user) == USER_FIELDS
        assert user["password"] == ""
    assert_no_secrets(listing)
    single = await api.get("/api/admin/user/get", params={"id": uid})
    assert set(single["data"]) == USER_FIELDS
    assert single["data"]["password"] == ""
    assert_no_secrets(single)


async def test_get_returns_the_user(api: Api) -> None:
    uid = await api.make_user("dave", "pw", base_path="/d", permission=9)
    await api.as_admin()
    body = await api.get("/api/admin/user/get", params={"id": uid})
    assert body["code"] == 200
    assert body["data"] == {
        "id": uid,
        "username": "dave",
        "password": "",
        "base_path": "/d",
        "role": 0,
        "disabled": False,
        "permission": 9,
        "sso_id": "",
    }


async def test_get_missing_id_is_500(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/user/get", params={"id": 999})
    assert (body["code"], body["message"]) == (500, "failed get old user: record not found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/admin/user/get"),
        ("POST", "/api/admin/user/delete"),
        ("POST", "/api/admin/user/cancel_2fa"),
    ],
)
async def test_non_integer_id_is_400(api: Api, method: str, path: str) -> None:
    await api.as_admin()
    body = await api.call(method, path, params={"id": "abc"})
    assert body["code"] == 400
    assert body["message"].startswith("id: ")


async def test_non_admin_is_refused(api: Api) -> None:
    await api.make_user("erin", "pw")
    token = await api.login("erin", "pw")
    body = await api.get("/api/admin/user/list", token=token)
    assert (body["code"], body["message"]) == (403, "You are not an admin")


# --- create ----------------------------------------------------------------------


@pytest.mark.parametrize("role", [1, 2])
async def test_create_admin_or_guest_role_is_refused(api: Api, role: int) -> None:
    await api.as_admin()
    body = await create(api, "boss", role=role)
    assert (body["code"], body["message"]) == (400, "admin or guest user can not be created")
    assert "boss" not in await users_by_name(api)


async def test_create_duplicate_username_is_500_naming_the_user(api: Api) -> None:
    await api.as_admin()
    assert (await create(api, "frank"))["code"] == 200
    body = await create(api, "frank")
    assert body["code"] == 500
    assert "frank" in body["message"]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("a/../b//c/", "/b/c"),
        ("\\x\\y\\", "/x/y"),
        ("/p\\q/./r", "/p/q/r"),
        ("/../..", "/"),
        ("", "/"),
    ],
)
async def test_create_cleans_base_path(api: Api, given: str, stored: str) -> None:
    await api.as_admin()
    assert (await create(api, "gina", base_path=given))["code"] == 200
    assert (await users_by_name(api))["gina"]["base_path"] == stored


async def test_created_user_can_log_in(api: Api) -> None:
    await api.as_admin()
    assert (await create(api, "hank", "hank-pw"))["code"] == 200
    token = await api.login("hank", "hank-pw")
    me = await api.get("/api/me", token=token)
    assert me["data"]["username"] == "hank"
    wrong = await login_body(api, "hank", "nope")
    assert (wrong["code"], wrong["message"]) == (400, "password is incorrect")


# --- update ----------------------------------------------------------------------


def as_update(user: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**user, **changes}


async def test_update_role_change_is_refused(api: Api) -> None:
    uid = await api.make_user("ivy", "pw")
    await api.as_admin()
    user = (await api.get("/api/admin/user/get", params={"id": uid}))["data"]
    body = await api.post("/api/admin/user/update", as_update(user, role=2))
    assert (body["code"], body["message"]) == (400, "role can not be changed")
    assert (await api.get("/api/admin/user/get", params={"id": uid}))["data"]["role"] == 0


async def test_update_admin_disabled_is_refused(api: Api) -> None:
    await api.as_admin()
    admin = (await users_by_name(api))["admin"]
    body = await api.post("/api/admin/user/update", as_update(admin, disabled=True))
    assert (body["code"], body["message"]) == (400, "admin user can not be disabled")
    assert (await users_by_name(api))["admin"]["disabled"] is False


async def test_update_without_password_keeps_password_and_token(api: Api) -> None:
    uid = await api.make_user("jack", "jack-pw")
    token = await api.login("jack", "jack-pw")
    await api.as_admin()
    user = (await api.get("/api/admin/user/get", params={"id": uid}))["data"]
    changed = as_update(user, base_path="x//y/", permission=8, password="")
    assert (await api.post("/api/admin/user/update", changed))["code"] == 200
    stored = (await api.get("/api/admin/user/get", params={"id": uid}))["data"]
    assert (stored["base_path"], stored["permission"]) == ("/x/y", 8)
    assert await api.login("jack", "jack-pw")
    assert (await api.get("/api/me", token=token))["code"] == 200


async def test_update_with_password_replaces_it(api: Api) -> None:
    uid = await api.make_user("kate", "old-pw")
    old_token = await api.login("kate", "old-pw")
    await api.as_admin()
    user = (await api.get("/api/admin/user/get", params={"id": uid}))["data"]
    updated = await api.post("/api/admin/user/update", as_update(user, password="new-pw"))
    assert updated["code"] == 200, updated
    assert (await login_body(api, "kate", "old-pw"))["message"] == "password is incorrect"
    assert await api.login("kate", "new-pw")
    stale = await api.get("/api/me", token=old_token)
    assert (stale["code"], stale["message"]) == (401, "Password has been changed, login please")


async def test_update_can_rename_a_user(api: Api) -> None:
    uid = await api.make_user("liam", "pw")
    await api.as_admin()
    user = (await api.get("/api/admin/user/get", params={"id": uid}))["data"]
    updated = await api.post("/api/admin/user/update", as_update(user, username="lena"))
    assert updated["code"] == 200, updated
    assert await api.login("lena", "pw")
    gone = await login_body(api, "liam", "pw")
    assert (gone["code"], gone["message"]) == (400, "failed find user: record not found")


async def test_update_missing_id_is_500(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/user/update", {"id": 999, "username": "nobody"})
    assert (body["code"], body["message"]) == (500, "failed get old user: record not found")


# --- delete ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["admin", "guest"])
async def test_delete_admin_or_guest_is_refused(api: Api, name: str) -> None:
    await api.as_admin()
    uid = (await users_by_name(api))[name]["id"]
    body = await api.post("/api/admin/user/delete", params={"id": uid})
    assert (body["code"], body["message"]) == (500, "cannot delete admin or guest")
    assert name in await users_by_name(api)


async def test_delete_removes_the_user(api: Api) -> None:
    uid = await api.make_user("mia", "pw")
    await api.as_admin()
    assert (await api.post("/api/admin/user/delete", params={"id": uid}))["code"] == 200
    body = await api.get("/api/admin/user/get", params={"id": uid})
    assert (body["code"], body["message"]) == (500, "failed get old user: record not found")
    assert "mia" not in await users_by_name(api)


async def test_delete_missing_id_is_500(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/user/delete", params={"id": 999})
    assert (body["code"], body["message"]) == (500, "failed get old user: record not found")


async def test_delete_also_deletes_the_users_ssh_keys(api: Api) -> None:
    uid = await api.make_user("ned", "pw")
    token = await api.login("ned", "pw")
    added = await api.post("/api/me/sshkey/add", {"title": "t", "key": PUBLIC_KEY}, token=token)
    assert added["code"] == 200
    assert (await api.services.sshkeys.page_for(uid, 1, 0))[1] == 1
    await api.as_admin()
    assert (await api.post("/api/admin/user/delete", params={"id": uid}))["code"] == 200
    assert await api.services.sshkeys.page_for(uid, 1, 0) == ([], 0)


# --- cancel_2fa and del_cache ------------------------------------------------------


async def test_cancel_2fa_clears_the_secret(api: Api) -> None:
    uid = await api.make_user("olga", "pw")
    await api.services.users.set_otp_secret(await api.services.users.get(uid), "JBSWY3DPEHPK3PXP")
    refused = await login_body(api, "olga", "pw")
    assert (refused["code"], refused["message"]) == (402, "Invalid 2FA code")
    await api.as_admin()
    assert (await api.post("/api/admin/user/cancel_2fa", params={"id": uid}))["code"] == 200
    assert (await api.services.users.get(uid)).otp_secret == ""
    assert await api.login("olga", "pw")


async def test_cancel_2fa_missing_id_is_500(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/user/cancel_2fa", params={"id": 999})
    assert (body["code"], body["message"]) == (500, "failed get old user: record not found")


async def test_del_cache_empty_username_is_400(api: Api) -> None:
    await api.as_admin()
    for params in ({"username": ""}, None):
        body = await api.post("/api/admin/user/del_cache", params=params)
        assert (body["code"], body["message"]) == (400, "username is empty")


async def test_del_cache_unknown_username_is_500(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/user/del_cache", params={"username": "ghost"})
    assert (body["code"], body["message"]) == (500, "failed find user: record not found")


async def test_del_cache_known_username_succeeds(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/user/del_cache", params={"username": "admin"})
    assert (body["code"], body["message"], body["data"]) == (200, "success", None)
