"""User patterns: Go's syntax and errors, Go's ReplaceAll and Expand, and the size caps."""

from __future__ import annotations

import pytest

from manifold.errors import BadRequest
from manifold.policy.patterns import (
    MAX_NAME_BYTES,
    MAX_PATTERN_BYTES,
    MAX_TEMPLATE_BYTES,
    Pattern,
    PatternError,
    Template,
    rename,
)

# Patterns a backtracking engine needs exponential time for: a subject that fails, one that
# matches.
CATASTROPHIC = [
    (r"^(a+)+$", "a" * 5000 + "!", "a" * 5000),
    (r"(a|a)*b", "a" * 5000, "a" * 5000 + "b"),
    (r"(a*)*b", "a" * 5000, "a" * 5000 + "b"),
    (r"^(a|aa)+$", "a" * 5000 + "!", "a" * 5000),
    (r"(.*a){20}", "a" * 19 + "b" * 5000, "a" * 20),
    (r"^(\w+\s?)*$", "word " * 1000 + "!", "word " * 1000),
]


def renamed(pattern: str, template: str, name: str) -> str | None:
    compiled = Pattern(pattern)
    return rename(compiled, Template(template, compiled), name)


@pytest.mark.parametrize(("pattern", "failing", "matching"), CATASTROPHIC)
def test_catastrophic_patterns_answer(pattern: str, failing: str, matching: str) -> None:
    assert Pattern(pattern).search(failing) is False
    assert Pattern(pattern).search(matching) is True


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(a)\\1", "error parsing regexp: invalid escape sequence: `\\1`"),
        ("(?=a)", "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"),
        ("(?!a)", "error parsing regexp: invalid or unsupported Perl syntax: `(?!`"),
        ("(?<=a)b", "error parsing regexp: invalid or unsupported Perl syntax: `(?<=`"),
        ("(?<!a)b", "error parsing regexp: invalid or unsupported Perl syntax: `(?<!`"),
        ("(", "error parsing regexp: missing closing ): `(`"),
        ("[a", "error parsing regexp: missing closing ]: `[a`"),
        ("a**", "error parsing regexp: invalid nested repetition operator: `**`"),
        ("*", "error parsing regexp: missing argument to repetition operator: `*`"),
        ("a{1001}", "error parsing regexp: invalid repeat count: `{1001}`"),
        ("[z-a]", "error parsing regexp: invalid character class range: `z-a`"),
        ("\\C", "error parsing regexp: invalid escape sequence: `\\C`"),
    ],
)
def test_patterns_go_refuses_fail_with_gos_message(pattern: str, message: str) -> None:
    with pytest.raises(PatternError) as caught:
        Pattern(pattern)
    assert str(caught.value) == message


def test_a_pattern_over_the_size_cap_is_refused() -> None:
    with pytest.raises(PatternError, match="expression too large"):
        Pattern("a" * (MAX_PATTERN_BYTES + 1))


@pytest.mark.parametrize(
    ("pattern", "matching", "failing"),
    [
        (r"\Q\C\E", r"a\Cb", "C"),  # quoted: a literal backslash and C
        (r"(?P<n>x)", "axb", "ab"),
        ("(?U)a+", "baa", "bb"),
        ("[[:xdigit:]]+", "Fa0", "xyz"),
        (r"\pL", "1é2", "123"),
        (r"(?i)ABC", "xabcx", "ab"),
        (r"a\z", "ba", "ab"),
    ],
)
def test_go_syntax_compiles(pattern: str, matching: str, failing: str) -> None:
    compiled = Pattern(pattern)
    assert compiled.search(matching) is True
    assert compiled.search(failing) is False


@pytest.mark.parametrize(
    ("pattern", "template", "name", "expected"),
    [
        (r"a(x*)b", "${1}W", "-ab-axxb-", "-W-xxW-"),
        (r"a(x*)b", "$1W", "-ab-axxb-", "---"),  # Go reads the group name "1W"
        (r"a(x*)b", "$1", "-ab-axxb-", "--xx-"),
        (r"(?P<first>\w+) (?P<second>\w+)", "${second} ${first}", "Hello World", "World Hello"),
        (r"(?P<first>\w+) (?P<second>\w+)", "$second-$first", "Hello World", "World-Hello"),
        (r"x*", "-", "abxd", "-a-b-d-"),
        (r"a*", "X", "baaac", "XbXcX"),
        (r"", "-", "abc", "-a-b-c-"),
        (r"", "-", "é", "-é-"),
        (r"b", "$$", "abc", "a$c"),
        (r"b", "$", "abc", "a$c"),
        (r"b", "${", "abc", "a${c"),
        (r"b", "${1", "abc", "a${1c"),
        (r"(b)", "[$0]", "abc", "a[b]c"),
        (r"^", "x", "aaa", "xaaa"),
    ],
)
def test_replace_all_and_expand_as_go(
    pattern: str, template: str, name: str, expected: str
) -> None:
    assert renamed(pattern, template, name) == expected


@pytest.mark.parametrize(
    "template", ["$1", "${1}", "${9}", "$9", "${missing}", "$missing", "${01}"]
)
def test_a_missing_group_expands_to_nothing(template: str) -> None:
    assert renamed(r"a(b)?c", f"<{template}>", "ac") == "<>"
    assert renamed(r"ac", f"<{template}>", "ac") == "<>"


def test_no_match_is_none() -> None:
    assert renamed("z", "y", "abc") is None


def test_a_name_that_is_not_utf8_round_trips() -> None:
    name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    new = renamed(r"\.txt$", ".md", name)
    assert new is not None
    assert new.encode("utf-8", "surrogateescape") == b"caf\xe9.md"


def test_a_template_over_the_cap_is_refused_before_matching() -> None:
    with pytest.raises(BadRequest, match="longer than"):
        Template("x" * (MAX_TEMPLATE_BYTES + 1), Pattern(""))


@pytest.mark.parametrize(
    ("pattern", "template", "name"),
    [
        ("", "x" * 200, "ab"),
        ("^", "é" * 128, "a"),
        ("(.*)", "$1$1$1", "a" * 100),
        ("(?P<n>a)", "${n}" * 256, "a"),
        ("a", "bb", "a" * 200),
    ],
)
def test_a_name_over_255_bytes_is_refused_without_being_built(
    pattern: str, template: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*_args: object) -> bytes:
        raise AssertionError("the new name was built")

    monkeypatch.setattr(Template, "expand", never)
    with pytest.raises(BadRequest, match=f"longer than {MAX_NAME_BYTES} bytes"):
        renamed(pattern, template, name)


def test_a_name_of_exactly_255_bytes_is_allowed() -> None:
    assert renamed("^", "é" * 127, "a") == "é" * 127 + "a"


def test_mask_counts_bytes_and_follows_go_replace_all() -> None:
    assert Pattern("(?U)access_token=(.*)&").mask("access_token=é&x=1&") == "*" * 16 + "x=1&"
    assert Pattern("a*").mask("baaac") == "b***c"


@pytest.mark.parametrize("pattern", [r"\pL{1000}", r"(?:.{100}){5}" * 4, r"\pL{100}" * 400])
def test_a_pattern_compiling_to_a_huge_program_is_refused(pattern: str) -> None:
    with pytest.raises(PatternError, match=r"^error parsing regexp: expression too large"):
        Pattern(pattern)
