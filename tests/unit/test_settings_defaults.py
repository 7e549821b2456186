from __future__ import annotations

import json
import re

from manifold.services.admin.settings_defaults import (
    ALIST_SETTINGS,
    DEFAULT_SETTINGS,
    SHARE_SETTINGS,
    TOKEN_KEY,
    VERSION_KEY,
    Flag,
    Group,
    SettingDefault,
    public_keys,
)
from tests.settings_reference import EXPECTED_ORDER, EXPECTED_PUBLIC, OFFLINE_TOOL_KEYS

EXPECTED_IFRAME_PREVIEWS = (
    "{\n"
    '\t"doc,docx,xls,xlsx,ppt,pptx": {\n'
    '\t\t"Microsoft":"https://view.officeapps.live.com/op/view.aspx?src=$e_url",\n'
    '\t\t"Google":"https://docs.google.com/gview?url=$e_url&embedded=true"\n'
    "\t},\n"
    '\t"pdf": {\n'
    '\t\t"PDF.js":"https://alist-org.github.io/pdf.js/web/viewer.html?file=$e_url"\n'
    "\t},\n"
    '\t"epub": {\n'
    '\t\t"EPUB.js":"https://alist-org.github.io/static/epub.js/viewer.html?url=$e_url"\n'
    "\t}\n"
    "}"
)


def _item(key: str) -> SettingDefault:
    matches = [item for item in ALIST_SETTINGS if item.key == key]
    assert len(matches) == 1, key
    return matches[0]


def test_table_has_95_items() -> None:
    assert len(ALIST_SETTINGS) == 95


def test_keys_are_unique() -> None:
    keys = [item.key for item in ALIST_SETTINGS]
    assert len(set(keys)) == len(keys)


def test_keys_follow_reference_order() -> None:
    assert tuple(item.key for item in ALIST_SETTINGS) == EXPECTED_ORDER


def test_offline_tool_items_close_the_table_in_fixed_order() -> None:
    tail = [item.key for item in ALIST_SETTINGS[89:]]
    assert tail == list(OFFLINE_TOOL_KEYS)
    assert all(item.group == Group.OFFLINE_DOWNLOAD for item in ALIST_SETTINGS[89:])


def test_public_keys_match_reference_set() -> None:
    assert len(EXPECTED_PUBLIC) == 36
    shares = {item.key for item in SHARE_SETTINGS}
    multipart = {"multipart_enabled", "multipart_chunk_size"}
    assert public_keys() == EXPECTED_PUBLIC | {"manifold_version"} | shares | multipart


def test_no_default_is_deprecated() -> None:
    assert all(item.flag != Flag.DEPRECATED for item in ALIST_SETTINGS)


def test_types_are_known() -> None:
    allowed = {"string", "text", "number", "bool", "select"}
    assert {item.type for item in ALIST_SETTINGS} <= allowed


def test_select_defaults_are_among_options() -> None:
    selects = [item for item in ALIST_SETTINGS if item.type == "select"]
    assert len(selects) == 5
    for item in selects:
        assert item.options, item.key
        if item.value:
            assert item.value in item.options.split(","), item.key


def test_only_select_items_carry_options() -> None:
    assert all(not item.options for item in ALIST_SETTINGS if item.type != "select")


def test_bool_defaults_are_literal_true_or_false() -> None:
    for item in ALIST_SETTINGS:
        if item.type == "bool":
            assert item.value in {"true", "false"}, item.key


def test_number_defaults_are_integers() -> None:
    numbers = [item for item in ALIST_SETTINGS if item.type == "number"]
    assert numbers
    not_integers = [item.key for item in numbers if not re.fullmatch(r"-?[0-9]+", item.value)]
    assert not_integers == []


def test_iframe_previews_text_is_exact() -> None:
    value = _item("iframe_previews").value
    assert value == EXPECTED_IFRAME_PREVIEWS
    assert len(value.split("\n")) == 12
    assert set(json.loads(value)) == {"doc,docx,xls,xlsx,ppt,pptx", "pdf", "epub"}


def test_privacy_regs_mask_secrets_not_addresses() -> None:
    """Manifold's default masks passwords, keys and tokens only; AList's three patterns
    (every IPv4 and IPv6 address, an access token) are what an install still carrying them
    is moved off at its next start."""
    item = _item("privacy_regs")
    lines = item.value.split("\n")
    assert lines[0] == "(?U)access_token=(.*)&"
    assert any("password" in line for line in lines)
    assert not any("xdigit" in line or r"\d" in line for line in lines)
    assert item.pre_default is not None
    alist = item.pre_default.split("\n")
    assert len(alist) == 3
    assert alist[0].startswith(r"(?:(?:\d|[1-9]\d")
    assert alist[1].startswith("([[:xdigit:]]{1,4}(?::[[:xdigit:]]{1,4}){7}|::|")
    assert alist[2] == "(?U)access_token=(.*)&"


def test_token_item() -> None:
    item = _item(TOKEN_KEY)
    assert (item.group, item.flag, item.value) == (Group.SINGLE, Flag.PRIVATE, "")


def test_version_item() -> None:
    item = _item(VERSION_KEY)
    assert (item.group, item.flag, item.value) == (Group.SITE, Flag.READONLY, "")


def test_search_index_item() -> None:
    item = _item("search_index")
    assert item.group == Group.INDEX
    assert item.value == "none"
    assert item.options == "database,database_non_full_text,bleve,meilisearch,none"


def test_customize_head_resets_old_polyfill_default() -> None:
    item = _item("customize_head")
    assert item.value == ""
    assert item.pre_default is not None
    assert "polyfill.min.js" in item.pre_default
    others = [i.key for i in ALIST_SETTINGS if i.pre_default is not None]
    assert others == ["customize_head", "privacy_regs"]


def test_selected_literal_defaults() -> None:
    assert _item("site_title").value == "Manifold"
    assert _item("announcement").value == "### repo\nhttps://github.com/alist-org/alist"
    assert _item("robots_txt").value == "User-agent: *\nAllow: /"
    assert _item("hide_files").value == "/\\/README.md/i"
    assert json.loads(_item("filename_char_mapping").value) == {"/": "|"}
    assert _item("favicon").value == _item("logo").value
    assert _item("home_icon").value == "\N{HOUSE BUILDING}"


def test_help_texts() -> None:
    assert _item("ignore_paths").help == "one path per line"
    assert _item("max_index_depth").help == "max depth of index"
    assert _item("link_expiration").help


def test_task_thread_defaults_are_five() -> None:
    threads = [item for item in ALIST_SETTINGS if item.key.endswith("_task_threads_num")]
    assert len(threads) == 6
    assert all(item.value == "5" and item.group == Group.TRAFFIC for item in threads)


def test_index_progress_is_hidden_single_item() -> None:
    item = _item("index_progress")
    assert (item.group, item.flag, item.value) == (Group.SINGLE, Flag.PRIVATE, "{}")


def test_manifold_adds_its_own_settings_after_alists() -> None:
    assert DEFAULT_SETTINGS[: len(ALIST_SETTINGS)] == ALIST_SETTINGS
    assert [item.key for item in DEFAULT_SETTINGS[len(ALIST_SETTINGS) :]] == [
        "manifold_version",
        "offline_download_allow_private",
        "offline_download_max_size",
        "link_redirect_public",
        "archive_list_max_size",
        "archive_extract_max_size",
        "archive_max_ratio",
        "archive_max_entries",
        "move_task_threads_num",
        "ldap_start_tls",
        *(item.key for item in SHARE_SETTINGS),
        "multipart_enabled",
        "multipart_chunk_size",
        "multipart_max_sessions",
        "multipart_staging_budget",
        "multipart_idle_seconds",
    ]
