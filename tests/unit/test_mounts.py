"""Property tests of the mount table: resolution, virtual folders, balancing."""

from __future__ import annotations

import posixpath

from hypothesis import given
from hypothesis import strategies as st

from manifold.paths import clean_path, is_sub_path
from manifold.vfs.mounts import MountTable, actual_mount_path

segment = st.sampled_from(["a", "b", "bc", "ab", "c", "x y", "é", "a.b", "d"])
paths = st.lists(segment, max_size=4).map(lambda parts: "/" + "/".join(parts))
mount_sets = st.lists(paths, min_size=1, max_size=6, unique=True)


def whole_segment_prefix(prefix: str, path: str) -> bool:
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


@given(mount_sets, paths)
def test_resolve_picks_longest_whole_segment_prefix(mounts: list[str], path: str) -> None:
    table = MountTable((m, m) for m in mounts)
    resolved = table.resolve(path)
    covering = [m for m in mounts if whole_segment_prefix(m, path)]
    if not covering:
        assert resolved is None
        return
    assert resolved is not None
    assert resolved.target == resolved.mount_path
    assert whole_segment_prefix(resolved.mount_path, path)
    assert resolved.mount_path == max(covering, key=len)
    assert resolved.sub_path.startswith("/")
    assert clean_path(posixpath.join(resolved.mount_path, resolved.sub_path.lstrip("/"))) == path


@given(mount_sets, paths)
def test_resolve_ignores_spelling_of_the_path(mounts: list[str], path: str) -> None:
    table = MountTable((m, m) for m in mounts)
    messy = path.replace("/", "//") + "/./"
    plain, other = table.resolve(path), table.resolve(messy)
    assert (plain is None) == (other is None)
    if plain is not None and other is not None:
        assert (plain.mount_path, plain.sub_path) == (other.mount_path, other.sub_path)


def test_partial_segment_is_not_a_prefix() -> None:
    table = MountTable([("/a/b", "b"), ("/a/bc", "bc")])
    found = table.resolve("/a/bc/x")
    assert found is not None
    assert (found.target, found.sub_path) == ("bc", "/x")
    found = table.resolve("/a/b/x")
    assert found is not None
    assert (found.target, found.sub_path) == ("b", "/x")
    assert table.resolve("/a/bcd") is None
    assert table.resolve("/a") is None


def test_root_mount_serves_everything() -> None:
    table = MountTable([("/", "root")])
    found = table.resolve("/any/deep/path")
    assert found is not None
    assert (found.mount_path, found.sub_path) == ("/", "/any/deep/path")


@given(mount_sets, paths)
def test_virtual_children_are_next_segments_of_deeper_mounts(mounts: list[str], path: str) -> None:
    table = MountTable((m, m) for m in mounts)
    children = table.virtual_children(path)
    expected = set()
    for mount in mounts:
        if mount != path and is_sub_path(path, mount):
            rest = mount[len(path) :].lstrip("/") if path != "/" else mount.lstrip("/")
            expected.add(rest.split("/", 1)[0])
    assert set(children) == expected
    assert len(children) == len(set(children))
    for name in children:
        assert "/" not in name
        assert name
        child = clean_path(posixpath.join(path, name))
        assert any(is_sub_path(child, m) for m in mounts)


def test_virtual_children_example() -> None:
    table = MountTable((m, m) for m in ["/a/b", "/a/c", "/a/d/e", "/av"])
    assert sorted(table.virtual_children("/")) == ["a", "av"]
    assert sorted(table.virtual_children("/a")) == ["b", "c", "d"]
    assert table.virtual_children("/a/d") == ["e"]
    assert table.virtual_children("/a/b") == []
    assert table.is_virtual("/a/d")
    assert not table.is_virtual("/a/b")
    assert not table.is_virtual("/zzz")


@given(paths, st.integers(min_value=0, max_value=5))
def test_actual_mount_path_cuts_balance_suffix(base: str, n: int) -> None:
    suffix = ".balance" + (str(n) if n else "")
    assert actual_mount_path(base) == base
    assert actual_mount_path(base.rstrip("/") + suffix) == base


def test_actual_mount_path_examples() -> None:
    assert actual_mount_path("/x.balance1") == "/x"
    assert actual_mount_path("/x.balance") == "/x"
    assert actual_mount_path("/a/x.balance2/") == "/a/x"
    assert actual_mount_path("/x.balance1.balance2") == "/x.balance1"
    assert actual_mount_path("/plain") == "/plain"


@given(paths, st.integers(min_value=1, max_value=5), st.integers(min_value=1, max_value=4))
def test_balance_group_round_robin(base: str, members: int, rounds: int) -> None:
    stem = base.rstrip("/") if base != "/" else ""
    entries = [(stem or "/", 0)] + [(f"{stem}.balance{i}", i) for i in range(1, members)]
    table = MountTable(entries)
    assert len(table) == 1
    seen = []
    for _ in range(members * rounds):
        found = table.resolve(base)
        assert found is not None
        assert found.mount_path == base
        seen.append(found.target)
    assert sorted(seen) == sorted(list(range(members)) * rounds)
    # Each member is used once per round, in turn.
    for r in range(rounds):
        assert sorted(seen[r * members : (r + 1) * members]) == list(range(members))


def test_balance_groups_are_independent() -> None:
    table = MountTable([("/x", "x0"), ("/x.balance1", "x1"), ("/y", "y0")])
    assert len(table) == 2
    xs = [table.resolve("/x/f") for _ in range(4)]
    assert [r.target for r in xs if r is not None] == ["x0", "x1", "x0", "x1"]
    ys = [table.resolve("/y") for _ in range(3)]
    assert [r.target for r in ys if r is not None] == ["y0", "y0", "y0"]


def test_empty_table() -> None:
    table: MountTable[str] = MountTable()
    assert len(table) == 0
    assert table.resolve("/") is None
    assert table.virtual_children("/") == []
