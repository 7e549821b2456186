"""Names sort in "human" order when a storage orders by name."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from manifold.vfs.storage_ops import natural_key


def test_numbers_compare_as_numbers() -> None:
    names = ["file10.txt", "file2.txt", "file1.txt", "File3", "a", "file02.txt", "10", "9"]
    assert sorted(names, key=natural_key) == [
        "9",
        "10",
        "File3",
        "a",
        "file1.txt",
        "file2.txt",
        "file02.txt",
        "file10.txt",
    ]


@given(st.lists(st.text(alphabet="ab01 9.", max_size=8), max_size=20))
def test_any_names_sort_without_error_and_stably(names: list[str]) -> None:
    once = sorted(names, key=natural_key)
    assert sorted(once, key=natural_key) == once
    assert sorted(once) == sorted(names)
