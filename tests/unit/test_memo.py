"""DerivedMemo: values kept while their source object is the current one."""

from __future__ import annotations

from manifold.vfs.memo import DerivedMemo


def test_a_value_is_kept_for_its_own_source_only() -> None:
    memo: DerivedMemo[str] = DerivedMemo(budget=10)
    source = [1, 2]
    memo.put("k", source, "derived", weight=2)
    assert memo.get("k", source) == "derived"
    assert memo.get("k", [1, 2]) is None  # an equal list is another listing
    assert memo.get("other", source) is None


def test_derive_builds_once_per_source() -> None:
    memo: DerivedMemo[list[int]] = DerivedMemo(budget=100)
    builds = []

    def build() -> list[int]:
        builds.append(1)
        return [len(builds)]

    first, second = [0], [0]
    assert memo.derive("k", first, build, len) == [1]
    assert memo.derive("k", first, build, len) == [1]
    assert memo.derive("k", second, build, len) == [2]
    assert memo.get("k", first) is None  # replaced, not kept beside
    assert len(memo) == 1


def test_least_recently_used_go_first_past_the_budget() -> None:
    memo: DerivedMemo[str] = DerivedMemo(budget=5)
    a, b, c = object(), object(), object()
    memo.put("a", a, "A", weight=2)
    memo.put("b", b, "B", weight=2)
    assert memo.get("a", a) == "A"  # now b is the least recently used
    memo.put("c", c, "C", weight=2)
    assert memo.get("b", b) is None
    assert (memo.get("a", a), memo.get("c", c)) == ("A", "C")


def test_one_value_over_budget_is_still_kept() -> None:
    memo: DerivedMemo[str] = DerivedMemo(budget=1)
    big = object()
    memo.put("big", big, "B", weight=50)
    assert memo.get("big", big) == "B"
    memo.drop("big")
    assert memo.get("big", big) is None
    assert len(memo) == 0


def test_peek_shows_a_stale_value() -> None:
    memo: DerivedMemo[str] = DerivedMemo(budget=10)
    old = object()
    memo.put("k", old, "old value", weight=1)
    assert memo.get("k", object()) is None
    assert memo.peek("k") == "old value"
    assert memo.peek("missing") is None
