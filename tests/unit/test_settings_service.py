"""The settings service without a database: the start-up merge and privacy masking."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from manifold import VERSION_STRING
from manifold.models import SettingItem
from manifold.policy.patterns import PatternError
from manifold.services.admin.settings import (
    SettingsService,
    compile_privacy_regs,
    merge_defaults,
)
from manifold.services.admin.settings_defaults import DEFAULT_SETTINGS, Flag, SettingDefault

OLD_HEAD = next(d.pre_default or "" for d in DEFAULT_SETTINGS if d.key == "customize_head")
DEFAULT_REGS = next(d.value for d in DEFAULT_SETTINGS if d.key == "privacy_regs")
# AList's default, addresses included: what an admin may still choose to keep.
ALIST_REGS = next(d.pre_default or "" for d in DEFAULT_SETTINGS if d.key == "privacy_regs")
# AList's rules and one of the admin's own: kept at start, unlike AList's alone.
CHOSEN_ALIST_REGS = ALIST_REGS + "\nsecret-word"


def stored(key: str, value: str, **fields: object) -> SettingItem:
    item = SettingItem(key, value, "", "string", "", 1, Flag.PUBLIC, 0)
    for name, field_value in fields.items():
        setattr(item, name, field_value)
    return item


def merge(*items: SettingItem) -> dict[str, SettingItem]:
    return merge_defaults({item.key: item for item in items}, DEFAULT_SETTINGS)


class StoredSettings:
    """A settings store holding what a database would, for a service started on it."""

    def __init__(self, *items: SettingItem) -> None:
        self.items = list(items)

    async def all(self) -> list[SettingItem]:
        return self.items

    async def upsert(self, items: Iterable[SettingItem]) -> None:
        self.items = list(items)


async def masker(regs: str = DEFAULT_REGS) -> SettingsService:
    repo = StoredSettings(stored("privacy_regs", regs))
    service = SettingsService(repo=repo)  # type: ignore[arg-type]
    await service.start()
    return service


# -- merge_defaults ---------------------------------------------------------


def test_merge_without_stored_items_gives_the_defaults_in_order() -> None:
    merged = merge()
    assert list(merged) == [d.key for d in DEFAULT_SETTINGS]
    assert [item.index for item in merged.values()] == list(range(len(DEFAULT_SETTINGS)))
    assert merged["site_title"].value == "Manifold"


def test_merge_keeps_a_value_the_admin_changed() -> None:
    merged = merge(stored("site_title", "Home Files"))
    assert merged["site_title"].value == "Home Files"


def test_merge_keeps_a_stored_empty_value() -> None:
    merged = merge(stored("announcement", ""))
    assert merged["announcement"].value == ""


def test_merge_replaces_a_stored_version() -> None:
    merged = merge(
        stored("version", "v3.40.0", flag=Flag.READONLY),
        stored("manifold_version", "v3.45.0 (Manifold 0.1)", flag=Flag.READONLY),
    )
    assert merged["version"].value == "v3.45.0"
    assert merged["manifold_version"].value == VERSION_STRING


def test_merge_sets_the_version_without_a_stored_row() -> None:
    # Exactly AList's: clients parse it as a version number.
    assert merge()["version"].value == "v3.45.0"
    assert merge()["manifold_version"].value == VERSION_STRING


def test_merge_resets_customize_head_equal_to_its_old_default() -> None:
    assert OLD_HEAD
    merged = merge(stored("customize_head", OLD_HEAD, group=4, flag=Flag.PRIVATE))
    assert merged["customize_head"].value == ""


def test_merge_keeps_a_customized_head() -> None:
    head = OLD_HEAD + "<style>body{}</style>"
    merged = merge(stored("customize_head", head, group=4, flag=Flag.PRIVATE))
    assert merged["customize_head"].value == head


def test_merge_resets_flag_type_help_group_and_options() -> None:
    old = stored(
        "pagination_type",
        "load_more",
        help="old help",
        type="string",
        options="x,y",
        group=9,
        flag=Flag.PRIVATE,
        index=70,
    )
    merged = merge(old)["pagination_type"]
    assert merged == SettingItem(
        "pagination_type",
        "load_more",
        "",
        "select",
        "all,pagination,load_more,auto_load_more",
        1,
        Flag.PUBLIC,
        3,
    )


def test_merge_resets_help_to_the_code_text() -> None:
    old = stored("max_index_depth", "10", help="", type="number", group=6, flag=Flag.PRIVATE)
    assert merge(old)["max_index_depth"].help == "max depth of index"


def test_merge_flags_unknown_keys_deprecated_after_the_defaults() -> None:
    legacy = stored("115_temp_dir", "/cloud/tmp", group=5, flag=Flag.PRIVATE, index=3)
    merged = merge(legacy)
    assert list(merged)[-1] == "115_temp_dir"
    item = merged["115_temp_dir"]
    assert (item.flag, item.value, item.group) == (Flag.DEPRECATED, "/cloud/tmp", 5)
    assert item.index == len(DEFAULT_SETTINGS)


def test_merge_gives_each_deprecated_key_its_own_index() -> None:
    merged = merge(stored("old_a", "1"), stored("old_b", "2"))
    last = len(DEFAULT_SETTINGS)
    assert (merged["old_a"].index, merged["old_b"].index) == (last, last + 1)


def test_merge_keeps_an_already_deprecated_key() -> None:
    merged = merge(stored("old_a", "1", flag=Flag.DEPRECATED))
    assert merged["old_a"].flag == Flag.DEPRECATED


def test_merge_with_a_custom_table_uses_pre_default() -> None:
    table = (SettingDefault("motd", "new", "text", 1, Flag.PUBLIC, pre_default="old"),)
    assert merge_defaults({"motd": stored("motd", "old")}, table)["motd"].value == "new"
    assert merge_defaults({"motd": stored("motd", "mine")}, table)["motd"].value == "mine"


def test_merge_keeps_a_stored_token() -> None:
    token = "manifold-" + "a" * 100
    merged = merge(stored("token", token, group=0, flag=Flag.PRIVATE))
    assert merged["token"].value == token


# -- privacy_regs on RE2 -----------------------------------------------------


def test_xdigit_class_reads_as_go_reads_it() -> None:
    (pattern,) = compile_privacy_regs("^[[:xdigit:]]{2}$")
    assert pattern.search("aF")
    assert not pattern.search("x:")


def test_ungreedy_access_token_rule_stops_at_the_first_ampersand() -> None:
    (pattern,) = compile_privacy_regs("(?U)access_token=(.*)&")
    assert pattern.mask("access_token=abc&x=1&") == "*" * len("access_token=abc&") + "x=1&"


@pytest.mark.parametrize("line", ["(?=a)", r"(a)\1", "(?<!x)y", "("])
def test_privacy_regs_go_refuses_are_refused(line: str) -> None:
    with pytest.raises(PatternError, match=r"^error parsing regexp: "):
        compile_privacy_regs(f"ok\n{line}")


def test_default_privacy_regs_compile_without_warnings() -> None:
    assert len(compile_privacy_regs(DEFAULT_REGS)) == 4
    assert len(compile_privacy_regs(ALIST_REGS)) == 3


def test_alist_s_ipv6_rule_matches_a_full_address() -> None:
    ipv6 = compile_privacy_regs(ALIST_REGS)[1]
    address = "2001:0db8:85a3:0000:0000:8a2e:0370:7334"
    assert ipv6.mask(f"from {address} now") == f"from {'*' * len(address)} now"


# -- mask_private -----------------------------------------------------------


async def test_mask_access_token_only_up_to_the_first_ampersand() -> None:
    masked = (await masker()).mask_private("access_token=abc&x=1&")
    assert masked == "*" * len("access_token=abc&") + "x=1&"


async def test_mask_ipv4_with_same_length_stars() -> None:
    masked = (await masker(CHOSEN_ALIST_REGS)).mask_private("login failed from 203.0.113.7 again")
    assert masked == "login failed from *********** again"


async def test_mask_ipv6_with_same_length_stars() -> None:
    address = "fe80:0000:0000:0000:0204:61ff:fe9d:f156"
    masked = (await masker(CHOSEN_ALIST_REGS)).mask_private(f"peer {address} refused")
    assert masked == f"peer {'*' * len(address)} refused"


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        (
            "cannot connect to 203.0.113.7:2222: refused",
            "cannot connect to 203.0.113.7:2222: refused",
        ),
        ("peer [fe80::1]:445 reset", "peer [fe80::1]:445 reset"),
        ("GET /x?sig=abc&password=hunter2 failed", "GET /x?*******&**************** failed"),
        ("Authorization: Bearer eyJ.abc", "Authorization: " + "*" * 14),
        ("http://bob:s3cret@10.0.0.1/dav refused", "http" + "*" * 14 + "10.0.0.1/dav refused"),
    ],
)
async def test_the_default_masks_secrets_and_leaves_addresses(said: str, shown: str) -> None:
    assert (await masker()).mask_private(said) == shown


def test_an_install_holding_alist_s_rules_gets_the_new_default() -> None:
    assert merge(stored("privacy_regs", ALIST_REGS))["privacy_regs"].value == DEFAULT_REGS
    assert merge(stored("privacy_regs", "chosen"))["privacy_regs"].value == "chosen"


async def test_mask_counts_utf8_bytes_not_characters() -> None:
    masked = (await masker()).mask_private("access_token=\u00e9\u00e9&rest")
    assert masked == "*" * (len("access_token=&") + 4) + "rest"


async def test_mask_leaves_a_clean_message_alone() -> None:
    assert (await masker()).mask_private("password is incorrect") == "password is incorrect"


async def test_mask_with_no_rules() -> None:
    assert (await masker("")).mask_private("from 10.0.0.1") == "from 10.0.0.1"
