"""Which index hits a caller sees, and the stored index progress; no database."""

from __future__ import annotations

from typing import Any

import pytest

from manifold.db.search_repo import Node
from manifold.models import Meta, Perm, User
from manifold.paths import clean_path
from manifold.services.search.indexer import Progress, read_progress
from manifold.services.search.service import Visibility


def user(base: str = "/", permission: int = 0) -> User:
    return User(1, "u", "", 0, base, 0, False, permission, "", "")


def meta(path: str, **fields: Any) -> Meta:
    return Meta(id=0, path=path, password=fields.pop("password", ""), **fields)


def view(metas: list[Meta], who: User | None = None, password: str = "") -> Visibility:
    by_path = {m.path: m for m in metas}

    def nearest(path: str) -> Meta | None:
        path = clean_path(path)
        while path not in by_path and path != "/":
            path = path.rsplit("/", 1)[0] or "/"
        return by_path.get(path)

    return Visibility(who or user(), password, nearest)


def node(path: str, is_dir: bool = False) -> Node:
    parent, _, name = path.rpartition("/")
    return Node(parent or "/", name, is_dir, 0)


def test_only_hits_below_the_base_path_show() -> None:
    seen = view([], user("/team"))
    assert seen.shows(node("/team/a.txt"))
    assert seen.shows(node("/team/x/y/b.txt"))
    assert not seen.shows(node("/teammate/c.txt"))
    assert not seen.shows(node("/d.txt"))


@pytest.mark.parametrize("p_sub", [True, False])
def test_a_password_folder_hides_everything_below_it(p_sub: bool) -> None:
    metas = [meta("/vault", password="pw", p_sub=p_sub), meta("/vault/open", readme="hi")]
    locked = view(metas)
    assert locked.shows(node("/vault", is_dir=True))
    assert not locked.shows(node("/vault/a.txt"))
    # A deeper meta without a password does not open a folder one cannot reach.
    assert not locked.shows(node("/vault/open/b.txt"))
    assert view(metas, password="pw").shows(node("/vault/open/b.txt"))
    trusted = user(permission=Perm.ACCESS_WITHOUT_PASSWORD)
    assert view(metas, trusted).shows(node("/vault/a.txt"))


def test_hidden_names_hide_their_subtrees() -> None:
    metas = [meta("/", hide="^\\.", h_sub=True)]
    seen = view(metas)
    assert not seen.shows(node("/.git", is_dir=True))
    assert not seen.shows(node("/src/.env"))
    assert not seen.shows(node("/src/.cache/deep/file.txt"))
    assert seen.shows(node("/src/main.py"))
    assert view(metas, user(permission=Perm.SEE_HIDDEN)).shows(node("/src/.env"))


def test_a_hide_rule_without_h_sub_applies_to_its_folder_only() -> None:
    seen = view([meta("/docs", hide="secret")])
    assert not seen.shows(node("/docs/secret.txt"))
    assert not seen.shows(node("/docs/secret/inner.txt"))
    assert seen.shows(node("/docs/sub/secret.txt"))


def test_the_plan_excludes_locked_folders_below_the_search() -> None:
    metas = [
        meta("/a/locked", password="pw"),
        meta("/a/open", password="right"),
        meta("/elsewhere", password="pw"),
        meta("/a", password="x"),
    ]
    excluded, check_names = view(metas, password="right").plan("/a", metas)
    assert excluded == ("/a/locked",)
    assert check_names is False


@pytest.mark.parametrize(
    ("hide_at", "h_sub", "checked"),
    [("/a/b", False, True), ("/a", False, True), ("/", True, True), ("/", False, False)],
)
def test_the_plan_checks_names_when_a_hide_rule_reaches_the_search(
    hide_at: str, h_sub: bool, checked: bool
) -> None:
    metas = [meta(hide_at, hide="x", h_sub=h_sub)]
    assert view(metas).plan("/a", metas)[1] is checked
    assert view(metas, user(permission=Perm.SEE_HIDDEN)).plan("/a", metas)[1] is False


class Settings:
    def __init__(self, value: str) -> None:
        self.value = value

    def get(self, key: str, default: str = "") -> str:
        return self.value


@pytest.mark.parametrize(
    "stored", ["", "{}", "not json", "[1, 2]", '{"obj_count": "many"}', '{"obj_count": null}']
)
def test_unreadable_progress_counts_as_none(stored: str) -> None:
    assert read_progress(Settings(stored)) == Progress()  # type: ignore[arg-type]


def test_progress_reads_what_was_written() -> None:
    stored = '{"obj_count": 12, "is_done": true, "last_done_time": "2024-05-01T10:00:00Z"}'
    progress = read_progress(Settings(stored))  # type: ignore[arg-type]
    assert progress == Progress(12, True, "2024-05-01T10:00:00Z", "")
