"""User-supplied patterns can neither stall nor bloat the server.

Every endpoint that takes a pattern (regex_rename, meta hide lines, privacy_regs)
runs it on RE2: linear time, Go's syntax, Go's errors. A name the pattern would
take a backtracking engine longer than the age of the universe to refuse must be
answered, and regex_rename's matching must leave the event loop free.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.api.fs_helpers import add_meta, fs_list, names, save_settings
from tests.conftest import Api

USER_PW = "viewer-password-1"

# Nested quantifiers and ambiguous alternations, each with a name it matches; none matches
# SLOW_NAME, on which a backtracking engine tries some 2**64 ways before giving up.
CATASTROPHIC = {
    r"^(a+)+$": "aaaa",
    r"(a|a)*b": "aab",
    r"(a*)*b": "aab",
    r"^(a|aa)+$": "aaaa",
    r"^(\w+\w?)*$": "aaaa",
}
SLOW_NAME = "a" * 64 + "!"

REFUSED = {
    r"(a)\1": r"error parsing regexp: invalid escape sequence: `\1`",
    r"(?=a)a": "error parsing regexp: invalid or unsupported Perl syntax: `(?=`",
    r"a(?!b)": "error parsing regexp: invalid or unsupported Perl syntax: `(?!`",
    r"(?<=a)b": "error parsing regexp: invalid or unsupported Perl syntax: `(?<=`",
    r"(?<!a)b": "error parsing regexp: invalid or unsupported Perl syntax: `(?<!`",
}


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """Turn a request stuck in a backtracking match into a failure instead of a hang."""

    def stuck(_signum: int, _frame: FrameType | None) -> None:
        raise AssertionError("a pattern match never finished")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# What the `root` fixture makes (tests/api/conftest.py).
TREE: dict[str, bytes | str] = {SLOW_NAME: "slow", "keep.txt": "keep"}


async def regex_rename(api: Api, pattern: str, template: str) -> dict[str, Any]:
    body = {"src_dir": "/local", "src_name_regex": pattern, "new_name_regex": template}
    return await api.post("/api/fs/regex_rename", body)


async def viewer(api: Api) -> str:
    await api.make_user("viewer", USER_PW, permission=0)
    return await api.login("viewer", USER_PW)


# --- catastrophic patterns --------------------------------------------------------


@pytest.mark.parametrize(("pattern", "matching"), CATASTROPHIC.items())
async def test_regex_rename_answers_a_catastrophic_pattern(
    admin: Api, root: Path, pattern: str, matching: str
) -> None:
    (root / matching).write_text("match")
    body = await regex_rename(admin, pattern, "renamed")
    assert body["code"] == 200, body
    assert sorted(p.name for p in root.iterdir()) == sorted([SLOW_NAME, "keep.txt", "renamed"])
    assert (root / "renamed").read_text() == "match"


@pytest.mark.parametrize("pattern", CATASTROPHIC)
async def test_meta_hide_answers_a_catastrophic_pattern(admin: Api, pattern: str) -> None:
    await add_meta(admin, "/local", hide=f"{pattern}\n^keep")
    token = await viewer(admin)
    assert names(await fs_list(admin, "/local", token=token)) == [SLOW_NAME]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
async def test_privacy_regs_answer_a_catastrophic_pattern(admin: Api, pattern: str) -> None:
    await save_settings(admin, privacy_regs=f"{pattern}\nsecret")
    body = await admin.post("/api/fs/mkdir", {"path": f"/secret/{SLOW_NAME}"})
    assert body["code"] == 500
    assert body["message"].endswith(f"rawPath: /******/{SLOW_NAME}"), body


async def test_regex_rename_matches_off_the_event_loop(
    admin: Api, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a folder's names are being matched, /ping still answers."""
    from manifold.policy import patterns

    matching, release = threading.Event(), threading.Event()
    renames = patterns.renames

    def held(*args: Any) -> list[tuple[str, str]]:
        assert threading.current_thread() is not threading.main_thread()
        matching.set()
        release.wait()
        return renames(*args)

    monkeypatch.setattr(patterns, "renames", held)
    request = asyncio.create_task(regex_rename(admin, r"^keep\.txt$", "kept.txt"))
    try:
        while not matching.is_set():
            assert not request.done(), request.result()
            await asyncio.sleep(0.01)
        pings = await asyncio.gather(*(admin.client.get("/ping") for _ in range(3)))
        assert not request.done()
    finally:
        release.set()
    assert [p.text for p in pings] == ["pong"] * 3
    assert (await request)["code"] == 200
    assert (root / "kept.txt").read_text() == "keep"


# --- size caps --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "template"),
    [
        ("", "x" * 1_000_000),  # the case: refused before any expansion
        ("", "$0" * 500_000),
        ("^", "x" * 300),
        ("(.*)", "$1$1$1$1"),
        ("(?P<n>.+)", "${n}${n}${n}${n}"),
        ("a", "é" * 10),
    ],
)
async def test_regex_rename_refuses_a_name_or_template_too_long(
    admin: Api, root: Path, pattern: str, template: str
) -> None:
    body = await regex_rename(admin, pattern, template)
    assert body["code"] == 400, body
    assert "longer than" in body["message"]
    assert sorted(p.name for p in root.iterdir()) == sorted([SLOW_NAME, "keep.txt"])


# --- Go's syntax and templates ----------------------------------------------------


@pytest.mark.parametrize("template", ["$1", "${1}", "${9}", "$9", "${missing}", "$missing"])
async def test_regex_rename_expands_a_missing_group_to_nothing(
    admin: Api, root: Path, template: str
) -> None:
    body = await regex_rename(admin, r"^keep(\d)?\.txt$", f"kept{template}.txt")
    assert body["code"] == 200, body
    assert (root / "kept.txt").read_text() == "keep"


@pytest.mark.parametrize(("pattern", "message"), REFUSED.items())
async def test_regex_rename_refuses_what_go_refuses(
    admin: Api, root: Path, pattern: str, message: str
) -> None:
    body = await regex_rename(admin, pattern, "x")
    assert (body["code"], body["message"]) == (500, message)
    assert (root / "keep.txt").exists()


@pytest.mark.parametrize(("pattern", "message"), REFUSED.items())
async def test_meta_hide_refuses_what_go_refuses(admin: Api, pattern: str, message: str) -> None:
    body = await admin.post("/api/admin/meta/create", {"path": "/local", "hide": pattern})
    assert (body["code"], body["message"]) == (400, f"{pattern} is illegal: {message}")


@pytest.mark.parametrize(("pattern", "message"), REFUSED.items())
async def test_privacy_regs_refuse_what_go_refuses(admin: Api, pattern: str, message: str) -> None:
    items = [{"key": "privacy_regs", "value": pattern}]
    body = await admin.post("/api/admin/setting/save", items)
    assert (body["code"], body["message"]) == (400, f"setting [privacy_regs]: {message}")
