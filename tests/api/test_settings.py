"""The settings endpoints: public read, admin list/get/save/delete, token reset."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import insert

from manifold.container import Services
from manifold.db import tables
from manifold.services.admin.settings_defaults import DEFAULT_SETTINGS, Flag
from tests.conftest import Api, open_api, start_services
from tests.settings_reference import EXPECTED_PUBLIC, OFFLINE_TOOL_KEYS, SITE_KEYS

# AList's public settings, and Manifold's own version beside AList's ``version``.
# Beside AList's: Manifold's version and OpenList's share link settings.
SHARE_KEYS = {
    "share_preview_download_by_default",
    "share_preview_archives_by_default",
    "share_archive_preview",
    "share_summary_content",
}
MULTIPART_KEYS = {"multipart_enabled", "multipart_chunk_size"}
PUBLIC_KEYS = EXPECTED_PUBLIC | {"manifold_version"} | SHARE_KEYS | MULTIPART_KEYS

# Manifold's own version after every AList setting: AList's keep their places.
SITE_GROUP = [*SITE_KEYS, "manifold_version"]

SAVE = "/api/admin/setting/save"


async def public(api: Api) -> dict[str, Any]:
    body = await api.get("/api/public/settings", token="")
    assert body["code"] == 200
    data: dict[str, Any] = body["data"]
    return data


async def item(api: Api, key: str) -> dict[str, Any]:
    body = await api.get("/api/admin/setting/get", params={"key": key})
    assert body["code"] == 200, body
    found: dict[str, Any] = body["data"]
    return found


def without_index(entry: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in entry.items() if name != "index"}


def assert_error(body: dict[str, Any], code: int, message: str) -> None:
    assert body == {"code": code, "message": message, "data": None}


# -- public settings -------------------------------------------------------


async def test_public_settings_needs_no_token(api: Api) -> None:
    body = await api.get("/api/public/settings", token="")
    assert body["code"] == 200
    assert body["message"] == "success"
    assert set(body["data"]) == PUBLIC_KEYS
    assert len(body["data"]) == 37 + len(SHARE_KEYS) + len(MULTIPART_KEYS)


async def test_public_settings_values_are_strings(api: Api) -> None:
    data = await public(api)
    assert all(isinstance(value, str) for value in data.values())
    assert data["version"] == "v3.45.0"  # exactly: clients parse it
    assert data["manifold_version"].startswith("v3.45.0 (Manifold ")
    assert data["site_title"] == "Manifold"
    assert data["default_page_size"] == "30"
    assert data["allow_mounted"] == "true"


async def test_public_settings_hide_private_items(api: Api) -> None:
    data = await public(api)
    private = {"token", "privacy_regs", "sso_client_secret", "ldap_manager_password"}
    private |= {"s3_secret_access_key", "aria2_secret", "customize_head", "index_progress"}
    assert private & set(data) == set()
    response = await api.client.get("/api/public/settings")
    assert api.services.settings.get("token") not in response.text


async def test_public_settings_keys_are_sorted(api: Api) -> None:
    data = await public(api)
    assert list(data) == sorted(data)


async def test_public_settings_answer_post_too(api: Api) -> None:
    body = await api.post("/api/public/settings", token="")
    assert body["code"] == 200
    assert set(body["data"]) == PUBLIC_KEYS


# -- list -------------------------------------------------------------------


async def test_list_without_query_returns_every_item(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/list")
    assert body["code"] == 200
    keys = [entry["key"] for entry in body["data"]]
    assert keys == [default.key for default in DEFAULT_SETTINGS]
    token = next(entry for entry in body["data"] if entry["key"] == "token")
    assert token["value"] == api.services.settings.get("token")
    assert (token["group"], token["flag"], token["type"]) == (0, 1, "string")


async def test_list_items_carry_their_index(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/list", params={"group": "1"})
    fields = {"key", "value", "help", "type", "options", "group", "flag", "index"}
    assert set(body["data"][0]) == fields
    version = [item.key for item in DEFAULT_SETTINGS].index("manifold_version")
    assert [entry["index"] for entry in body["data"]] == [*range(8), version]


async def test_list_one_group_in_index_order(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/list", params={"group": "1"})
    assert body["code"] == 200
    assert [entry["key"] for entry in body["data"]] == SITE_GROUP
    assert {entry["group"] for entry in body["data"]} == {1}


async def test_list_several_groups(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/list", params={"groups": "5,0"})
    assert body["code"] == 200
    keys = [entry["key"] for entry in body["data"]]
    assert keys == ["token", "index_progress", *OFFLINE_TOOL_KEYS]


async def test_list_groups_wins_over_group(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/list", params={"group": "1", "groups": "8"})
    assert {entry["group"] for entry in body["data"]} == {8}


async def test_list_rejects_non_integer_group(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/list", params={"group": "site"})
    assert_error(body, 400, "invalid group list: 'site'")


async def test_list_rejects_non_integer_in_groups(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/list", params={"groups": "1,x"})
    assert_error(body, 400, "invalid group list: '1,x'")


# -- get --------------------------------------------------------------------


async def test_get_one_key(api: Api) -> None:
    await api.as_admin()
    assert without_index(await item(api, "site_title")) == {
        "key": "site_title",
        "value": "Manifold",
        "help": "",
        "type": "string",
        "options": "",
        "group": 1,
        "flag": 0,
    }


async def test_get_several_keys_keeps_their_order(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/get", params={"keys": "main_color,site_title,logo"})
    assert body["code"] == 200
    assert [entry["key"] for entry in body["data"]] == ["main_color", "site_title", "logo"]


async def test_get_missing_key(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/get", params={"key": "no_such_key"})
    assert_error(body, 400, "record not found")


async def test_get_keys_with_one_missing(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/get", params={"keys": "site_title,no_such_key"})
    assert_error(body, 400, "record not found")


async def test_get_without_key_or_keys(api: Api) -> None:
    await api.as_admin()
    body = await api.get("/api/admin/setting/get")
    assert_error(body, 400, "record not found")


# -- save -------------------------------------------------------------------


async def test_saved_value_is_public_at_once(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "site_title", "value": "My Files"}])
    assert body == {"code": 200, "message": "success", "data": None}
    assert (await public(api))["site_title"] == "My Files"
    assert (await item(api, "site_title"))["value"] == "My Files"


async def test_saving_a_group_as_listed_succeeds(api: Api) -> None:
    await api.as_admin()
    listed = (await api.get("/api/admin/setting/list", params={"group": "1"}))["data"]
    assert listed[0]["key"] == "version"
    for entry in listed:
        if entry["key"] == "announcement":
            entry["value"] = "hello"
    body = await api.post(SAVE, listed)
    assert body["code"] == 200, body
    data = await public(api)
    assert data["announcement"] == "hello"
    assert data["version"] == listed[0]["value"]


async def test_saving_every_item_as_listed_succeeds(api: Api) -> None:
    await api.as_admin()
    listed = (await api.get("/api/admin/setting/list"))["data"]
    body = await api.post(SAVE, listed)
    assert body["code"] == 200, body
    assert (await api.get("/api/admin/setting/list"))["data"] == listed


async def test_changing_version_is_refused(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "version", "value": "v9.9.9"}])
    assert_error(body, 400, "setting [version] is read-only")
    assert (await public(api))["version"].startswith("v3.45.0")


async def test_save_is_all_or_nothing(api: Api) -> None:
    await api.as_admin()
    changes = [
        {"key": "site_title", "value": "Should Not Stick"},
        {"key": "version", "value": "v0.0.1"},
    ]
    body = await api.post(SAVE, changes)
    assert_error(body, 400, "setting [version] is read-only")
    assert (await public(api))["site_title"] == "Manifold"
    assert api.services.settings.get("site_title") == "Manifold"


async def test_save_is_all_or_nothing_across_a_restart(api: Api) -> None:
    await api.as_admin()
    changes = [
        {"key": "main_color", "value": "#000000"},
        {"key": "default_page_size", "value": "many"},
    ]
    body = await api.post(SAVE, changes)
    assert body["code"] == 400
    await api.services.stop()
    restarted = await start_services(api.services.config.data_dir)
    try:
        assert restarted.settings.get("main_color") == "#1890ff"
    finally:
        await restarted.stop()


async def test_save_unknown_key(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "no_such_key", "value": "x"}])
    assert_error(body, 400, "setting [no_such_key] does not exist")
    assert (await api.get("/api/admin/setting/get", params={"key": "no_such_key"}))["code"] == 400


@pytest.mark.parametrize("value", ["abc", "3.5", "", "1e3", " 30"])
async def test_save_number_must_be_an_integer(api: Api, value: str) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "default_page_size", "value": value}])
    assert_error(body, 400, "setting [default_page_size] must be a whole number")


async def test_save_negative_number_is_accepted(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "max_client_download_speed", "value": "-1024"}])
    assert body["code"] == 200, body
    assert api.services.settings.get_int("max_client_download_speed", 0) == -1024


async def test_save_number_refuses_non_ascii_digits(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "default_page_size", "value": "\u0663\u0660"}])
    assert_error(body, 400, "setting [default_page_size] must be a whole number")


@pytest.mark.parametrize("value", ["yes", "True", "1", ""])
async def test_save_bool_must_be_true_or_false(api: Api, value: str) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "allow_indexed", "value": value}])
    assert_error(body, 400, "setting [allow_indexed] must be true or false")


async def test_save_select_outside_options(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "pagination_type", "value": "endless"}])
    message = "setting [pagination_type] must be one of all,pagination,load_more,auto_load_more"
    assert_error(body, 400, message)


async def test_save_select_inside_options(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "pagination_type", "value": "load_more"}])
    assert body["code"] == 200
    assert (await public(api))["pagination_type"] == "load_more"


async def test_save_char_mapping_not_json(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "filename_char_mapping", "value": "{/: |"}])
    assert_error(body, 400, "setting [filename_char_mapping] must be a JSON object")


@pytest.mark.parametrize("value", ['["/", "|"]', '{"/": 1}', '"text"'])
async def test_save_char_mapping_not_an_object_of_strings(api: Api, value: str) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "filename_char_mapping", "value": value}])
    assert_error(body, 400, "setting [filename_char_mapping] must map strings to strings")


async def test_save_char_mapping_valid_object(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "filename_char_mapping", "value": '{"?": "_"}'}])
    assert body["code"] == 200
    assert (await public(api))["filename_char_mapping"] == '{"?": "_"}'


async def test_save_privacy_regs_with_invalid_regex(api: Api) -> None:
    await api.as_admin()
    value = "secret=\\w+\n(unclosed"
    body = await api.post(SAVE, [{"key": "privacy_regs", "value": value}])
    assert_error(
        body, 400, "setting [privacy_regs]: error parsing regexp: missing closing ): `(unclosed`"
    )
    assert "secret=" not in api.services.settings.get("privacy_regs")


async def test_saved_privacy_regs_mask_error_messages(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "privacy_regs", "value": "no_such"}])
    assert body["code"] == 200
    body = await api.post(SAVE, [{"key": "no_such_key", "value": "x"}])
    assert_error(body, 400, "setting [*******_key] does not exist")


async def test_save_ignores_client_flag_type_and_group(api: Api) -> None:
    await api.as_admin()
    sent = {
        "key": "site_title",
        "value": "Renamed",
        "flag": 1,
        "type": "number",
        "group": 9,
        "help": "client help",
        "options": "a,b",
    }
    body = await api.post(SAVE, [sent])
    assert body["code"] == 200, body
    assert without_index(await item(api, "site_title")) == {
        "key": "site_title",
        "value": "Renamed",
        "help": "",
        "type": "string",
        "options": "",
        "group": 1,
        "flag": 0,
    }
    assert (await public(api))["site_title"] == "Renamed"


async def test_save_refuses_a_short_token(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "token", "value": "short"}])
    assert_error(body, 400, "setting [token] must be at least 16 characters")


async def test_save_body_must_be_a_list(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, {"key": "site_title", "value": "x"})
    assert body["code"] == 400
    assert api.services.settings.get("site_title") == "Manifold"


async def test_save_value_must_be_a_string(api: Api) -> None:
    await api.as_admin()
    body = await api.post(SAVE, [{"key": "default_page_size", "value": 50}])
    assert_error(body, 400, "0.value: Input should be a valid string")


async def test_saved_values_survive_a_restart(api: Api) -> None:
    await api.as_admin()
    changes = [
        {"key": "site_title", "value": "Kept"},
        {"key": "allow_indexed", "value": "true"},
        {"key": "customize_body", "value": "<b>hi</b>"},
    ]
    assert (await api.post(SAVE, changes))["code"] == 200
    await api.services.stop()
    restarted = await start_services(api.services.config.data_dir)
    try:
        assert restarted.settings.get("site_title") == "Kept"
        assert restarted.settings.get("allow_indexed") == "true"
        assert restarted.settings.get("customize_body") == "<b>hi</b>"
        async with open_api(restarted) as again:
            assert (await public(again))["site_title"] == "Kept"
    finally:
        await restarted.stop()


# -- delete -----------------------------------------------------------------


async def test_delete_refuses_a_current_key(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/setting/delete", params={"key": "site_title"})
    assert_error(body, 500, "setting [site_title] is not deprecated")
    assert api.services.settings.get("site_title") == "Manifold"


async def test_delete_missing_key(api: Api) -> None:
    await api.as_admin()
    body = await api.post("/api/admin/setting/delete", params={"key": "no_such_key"})
    assert_error(body, 500, "failed to get settingItem: record not found")


async def test_delete_a_deprecated_key(services: Services) -> None:
    async with services.engine.begin() as conn:
        await conn.execute(
            insert(tables.settings).values(
                key="legacy_temp_dir",
                value="/tmp/old",
                help="",
                type="string",
                options="",
                group=5,
                flag=Flag.PRIVATE,
                index=0,
            )
        )
    await services.stop()
    restarted = await start_services(services.config.data_dir)
    try:
        async with open_api(restarted) as api:
            await api.as_admin()
            listed = await item(api, "legacy_temp_dir")
            assert (listed["flag"], listed["value"]) == (Flag.DEPRECATED, "/tmp/old")
            body = await api.post("/api/admin/setting/delete", params={"key": "legacy_temp_dir"})
            assert body == {"code": 200, "message": "success", "data": {}}
            gone = await api.get("/api/admin/setting/get", params={"key": "legacy_temp_dir"})
            assert_error(gone, 400, "record not found")
    finally:
        await restarted.stop()
    again = await start_services(services.config.data_dir)
    try:
        assert "legacy_temp_dir" not in {i.key for i in again.settings.all_items()}
    finally:
        await again.stop()


# -- reset_token ------------------------------------------------------------


async def test_reset_token_returns_a_new_token(api: Api) -> None:
    await api.as_admin()
    old = api.services.settings.get("token")
    body = await api.post("/api/admin/setting/reset_token")
    assert body["code"] == 200
    new = body["data"]
    assert isinstance(new, str)
    assert new != old
    assert new.startswith("manifold-")
    assert len(new) == len("manifold-") + 36 + 64
    assert api.services.settings.get("token") == new


async def test_old_admin_token_stops_working_after_reset(api: Api) -> None:
    old = api.services.settings.get("token")
    assert (await api.get("/api/me", token=old))["data"]["username"] == "admin"
    new = (await api.post("/api/admin/setting/reset_token", token=old))["data"]
    assert_error(await api.get("/api/me", token=old), 401, "token is invalidated")
    body = await api.get("/api/admin/setting/list", token=new, params={"group": "1"})
    assert body["code"] == 200


@pytest.mark.parametrize("path", ["archive_extensions", "offline_download_tools"])
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_public_lists_the_web_page_reads_first_answer_without_a_token(
    api: Api, path: str, method: str
) -> None:
    body = await api.call(method, f"/api/public/{path}", token="")
    assert (body["code"], body["message"]) == (200, "success")
    if path == "archive_extensions":
        assert ".zip" in body["data"] and all(e.startswith(".") for e in body["data"])
    else:
        assert body["data"] == ["SimpleHttp"]  # the others once set up and answering


# -- load default settings --------------------------------------------------------


DEFAULT = "/api/admin/setting/default"


async def test_defaults_of_a_group_are_shown_not_saved(api: Api) -> None:
    await api.as_admin()
    changed = {**await item(api, "site_title"), "value": "My files"}
    assert (await api.post(SAVE, [changed]))["code"] == 200
    body = await api.post(DEFAULT, params={"group": "1"})
    assert body["code"] == 200, body
    assert [entry["key"] for entry in body["data"]] == SITE_GROUP
    shown = {entry["key"]: entry for entry in body["data"]}
    assert shown["site_title"]["value"] == "Manifold"
    listed = {e["key"]: e for e in (await api.get("/api/admin/setting/list"))["data"]}
    assert shown["version"] == listed["version"]  # what cannot change is as it is
    assert all(shown[key]["index"] == listed[key]["index"] for key in shown)
    # The page puts the defaults in its form; only a save stores them.
    assert (await item(api, "site_title"))["value"] == "My files"
    assert (await api.post(SAVE, body["data"]))["code"] == 200
    assert (await item(api, "site_title"))["value"] == "Manifold"


async def test_defaults_of_several_groups_come_group_by_group(api: Api) -> None:
    await api.as_admin()
    body = await api.post(DEFAULT, params={"groups": "5,1", "group": "3"})
    offline = [d for d in DEFAULT_SETTINGS if d.group == 5]
    assert len(offline) >= 6
    assert [entry["group"] for entry in body["data"]] == [1] * len(SITE_GROUP) + [5] * len(offline)
    token = (await item(api, "token"))["value"]
    single = (await api.post(DEFAULT, params={"group": "0"}))["data"]
    assert next(e for e in single if e["key"] == "token")["value"] == token
    everything = (await api.post(DEFAULT))["data"]
    assert len(everything) == len(DEFAULT_SETTINGS)
    assert_error(await api.post(DEFAULT, params={"group": "x"}), 400, "invalid group list: 'x'")


async def test_defaults_are_for_the_admin_only(api: Api) -> None:
    await api.make_user("plain", "plain-password-1", permission=0)
    body = await api.post(
        DEFAULT, params={"group": "1"}, token=await api.login("plain", "plain-password-1")
    )
    assert body["code"] == 403, body
