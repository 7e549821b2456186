"""Virtual path logic: cleaning, joining onto a base path, and prefix tests."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from manifold.errors import InvalidRequest, NameTooLong, RelativePath
from manifold.paths import (
    MAX_NAME_BYTES,
    RESERVED_PREFIX,
    all_shown_names,
    child_path,
    clean_path,
    has_relative_segment,
    is_listable_name,
    is_reserved_name,
    is_sub_path,
    join_base,
    safe_name,
    split_path,
    validate_name,
    validate_new_name,
)

# Path-ish text: mostly the characters that matter to cleaning, with anything else mixed in.
PIECES = st.sampled_from(["/", "\\", ".", "..", "a", "b", "é", " ", "%2e", "\x00", "//"])
PATHISH = st.one_of(st.lists(PIECES, max_size=12).map("".join), st.text(max_size=30))
NAME = st.text(
    alphabet=st.characters(exclude_characters="/\\\x00", exclude_categories=["Cs"]),
    min_size=1,
    max_size=8,
).filter(lambda n: n not in (".", ".."))


def segments(path: str) -> list[str]:
    return [] if path == "/" else path[1:].split("/")


# --- clean_path ------------------------------------------------------------------


@given(PATHISH)
def test_clean_path_is_idempotent(path: str) -> None:
    once = clean_path(path)
    assert clean_path(once) == once


@given(PATHISH)
@example("//a")
@example("///a//")
@example("\\\\a")
def test_clean_path_shape(path: str) -> None:
    cleaned = clean_path(path)
    assert cleaned.startswith("/")
    assert "//" not in cleaned
    assert "\\" not in cleaned
    assert cleaned == "/" or not cleaned.endswith("/")
    for segment in segments(cleaned):
        assert segment not in ("", ".", "..")


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("", "/"),
        ("/", "/"),
        ("a", "/a"),
        ("a/../b//c/", "/b/c"),
        ("\\a\\b\\", "/a/b"),
        ("//a", "/a"),
        ("/./a/.", "/a"),
        ("/../../a", "/a"),
        ("/a/b/..", "/a"),
        ("/a..b/...", "/a..b/..."),
        ("/%2e%2e", "/%2e%2e"),
    ],
)
def test_clean_path_cases(raw: str, cleaned: str) -> None:
    assert clean_path(raw) == cleaned


# --- join_base ---------------------------------------------------------------------


@given(base=PATHISH, requested=PATHISH)
def test_join_base_never_leaves_the_base(base: str, requested: str) -> None:
    try:
        joined = join_base(base, requested)
    except RelativePath:
        return
    assert is_sub_path(clean_path(base), joined)
    assert joined == clean_path(joined)


@given(base=PATHISH, requested=PATHISH)
def test_join_base_accepts_any_request_without_dotdot_or_nul(base: str, requested: str) -> None:
    if "\x00" in requested or has_relative_segment(requested):
        return
    joined = join_base(base, requested)
    assert joined == clean_path(clean_path(base) + "/" + clean_path(requested))


@given(base=PATHISH, before=PATHISH, after=PATHISH)
@pytest.mark.parametrize("climb", ["/../", "\\..\\", "\x00"])
def test_join_base_refuses_dotdot_and_nul(base: str, before: str, after: str, climb: str) -> None:
    with pytest.raises(RelativePath) as raised:
        join_base(base, before + climb + after)
    assert raised.value.code == 403
    assert raised.value.message == "access using relative path is not allowed"


@given(base=PATHISH, names=st.lists(NAME, max_size=5))
def test_join_base_of_plain_names_appends_them(base: str, names: list[str]) -> None:
    joined = join_base(base, "/".join(names))
    root = clean_path(base)
    expected = root if not names else (root.rstrip("/") + "/" + "/".join(names))
    assert joined == expected


@pytest.mark.parametrize(
    "requested",
    ["..", "../x", "a/../../x", "a/../b", "..\\x", "a\\..\\b", "/a/..", "/..", "x/..", "a\x00b"],
)
def test_join_base_refused_cases(requested: str) -> None:
    with pytest.raises(RelativePath):
        join_base("/base", requested)


@pytest.mark.parametrize(
    ("base", "requested", "joined"),
    [
        ("/base", "", "/base"),
        ("/base", "/", "/base"),
        ("/base", "x/y", "/base/x/y"),
        ("/base", "/x//y/", "/base/x/y"),
        ("/base", "x\\y", "/base/x/y"),
        ("/base", "./x/.", "/base/x"),
        ("/base", "%2e%2e", "/base/%2e%2e"),
        ("/base", "%2e%2e/x", "/base/%2e%2e/x"),
        ("/base", "a..b", "/base/a..b"),
        ("/base", "...", "/base/..."),
        ("/base", "..x", "/base/..x"),
        ("base\\", "x", "/base/x"),
        ("/", "x", "/x"),
        ("", "x", "/x"),
    ],
)
def test_join_base_accepted_cases(base: str, requested: str, joined: str) -> None:
    assert join_base(base, requested) == joined


# --- is_sub_path and split_path ------------------------------------------------------


@pytest.mark.parametrize(
    ("parent", "path", "inside"),
    [
        ("/a/b", "/a/bc", False),
        ("/a/b", "/a", False),
        ("/a/b", "/a/b", True),
        ("/a/b", "/a/b/c", True),
        ("/a/b/", "/a/b/c", True),
        ("/", "/anything", True),
        ("/", "/", True),
        ("/a", "/b", False),
    ],
)
def test_is_sub_path(parent: str, path: str, inside: bool) -> None:
    assert is_sub_path(parent, path) is inside


@given(PATHISH, PATHISH)
def test_is_sub_path_matches_whole_segments(parent: str, path: str) -> None:
    p, q = segments(clean_path(parent)), segments(clean_path(path))
    assert is_sub_path(parent, path) == (q[: len(p)] == p)


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("/", ("/", "")),
        ("", ("/", "")),
        ("/a", ("/", "a")),
        ("/a/b", ("/a", "b")),
        ("/a/b/", ("/a", "b")),
        ("a\\b\\c", ("/a/b", "c")),
        ("/a/./b/../c", ("/a", "c")),
    ],
)
def test_split_path(path: str, parts: tuple[str, str]) -> None:
    assert split_path(path) == parts


@given(PATHISH)
def test_split_path_rejoins_to_the_clean_path(path: str) -> None:
    parent, name = split_path(path)
    cleaned = clean_path(path)
    if cleaned == "/":
        assert (parent, name) == ("/", "")
    else:
        assert clean_path(parent + "/" + name) == cleaned
        assert "/" not in name
        assert name


@pytest.mark.parametrize(
    "name", [".manifold-upload-x", ".MANIFOLD-UPLOAD-x", ".Manifold-Upload-1.part"]
)
def test_reserved_prefix_is_refused_in_any_case(name: str) -> None:
    with pytest.raises(InvalidRequest):
        validate_name(name)


@pytest.mark.parametrize(
    "name", ["a\nb", "evil\u202etxt.exe", "tab\there", "bell\x07", "c1\x85", "zw\u200bsp", "\x7f"]
)
def test_control_and_bidi_characters(name: str) -> None:
    assert validate_name(name) == name  # existing entries stay reachable
    with pytest.raises(InvalidRequest):
        validate_new_name(name)
    cleaned = safe_name(name)
    assert len(cleaned) == len(name) and "_" in cleaned
    assert validate_new_name(cleaned) == cleaned


def test_safe_name_keeps_ordinary_unicode() -> None:
    for name in ["résumé.pdf", "日本語.txt", "emoji 😀.png", "a b"]:
        assert safe_name(name) == name
        assert validate_new_name(name) == name


# --- names a back end gives, and new names' length ---------------------------------


@given(st.sampled_from(["/", "/a", "/a/b/"]), NAME)
def test_child_path_of_a_plain_name_is_directly_below(parent: str, name: str) -> None:
    joined = child_path(parent, name)
    assert split_path(joined) == (clean_path(parent), name)


@pytest.mark.parametrize(
    "name", ["", ".", "..", "../../../secret", "a/b", "a/../../b", "..\\..\\x", "a\\b", "n\x00"]
)
def test_child_path_refuses_names_that_leave_or_miss_the_folder(name: str) -> None:
    with pytest.raises(RelativePath):
        child_path("/u/esftp/evil", name)
    assert not is_listable_name(name)


@given(st.sampled_from(["/", "/u", "/u/esftp/evil"]), PATHISH)
def test_child_path_never_leaves_its_parent(parent: str, name: str) -> None:
    try:
        joined = child_path(parent, name)
    except RelativePath:
        return
    assert split_path(joined)[0] == clean_path(parent)


@pytest.mark.parametrize("name", ["rtl\u202etxt.exe", "bell\x07", "line\nbreak", "c1\x85"])
def test_names_no_client_may_give_are_not_listed(name: str) -> None:
    assert not is_listable_name(name)
    assert child_path("/a", name) == f"/a/{name}"  # a tree name all the same


@pytest.mark.parametrize("unit", ["a", "é", "日", "😀"])
def test_new_names_hold_at_most_255_bytes(unit: str) -> None:
    size = len(unit.encode())
    longest = unit * (MAX_NAME_BYTES // size) + "a" * (MAX_NAME_BYTES % size)
    assert validate_new_name(longest) == longest
    with pytest.raises(NameTooLong) as refused:
        validate_new_name(longest + "a")
    assert refused.value.code == 400
    assert refused.value.message == "file name too long: 256 bytes, at most 255"
    assert validate_name(longest + "a") == longest + "a"  # existing entries stay reachable
    assert is_listable_name(longest + "a")


def test_a_lone_surrogate_counts_and_never_breaks_the_check() -> None:
    with pytest.raises(NameTooLong):
        validate_new_name("\ud800" * 86)


# Names near every edge of the listing rule: empty, dot names, separators, controls,
# text-reordering marks, reserved in any letter case, and a letter that folds to two ("İ").
ODD_PIECES = ["", ".", "..", "/", "\\", "\x00", "\n", "\x85", "\u202e", "\udcff"]
NAME_PIECES = st.sampled_from(
    [*ODD_PIECES, "a", "é", "ß", "I", "\u0130", RESERVED_PREFIX, RESERVED_PREFIX.upper()]
)
NAMES = st.lists(st.lists(NAME_PIECES, max_size=3).map("".join), max_size=6)


def shown_one_by_one(names: list[str]) -> bool:
    return all(is_listable_name(n) and not is_reserved_name(n) for n in names)


@given(NAMES)
@example([])
@example(["a", ""])
@example(["a", "..", "b"])
@example(["a/b"])
@example(["x", ".Manifold-Upload-part"])
@example(["ok", "report.pdf"])
def test_a_whole_listing_is_checked_as_each_name_is(names: list[str]) -> None:
    assert all_shown_names(names) is shown_one_by_one(names)
