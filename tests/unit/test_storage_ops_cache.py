"""The memory list cache: bounded in objects, least recently used out first, and
listings dropped by folder within one storage."""

from __future__ import annotations

from datetime import UTC, datetime

from manifold.models import Obj
from manifold.vfs.storage_ops import MemoryListCache

TTL = 600.0


def objs(count: int, tag: str = "o") -> list[Obj]:
    now = datetime.now(UTC)
    return [Obj(f"{tag}{n}", 0, False, now) for n in range(count)]


def test_the_cache_holds_at_most_its_objects() -> None:
    cache = MemoryListCache(max_objects=10)
    for n in range(20):
        cache.put("s", f"/f{n}", objs(3), TTL)
        assert cache.objects <= 10
    assert len(cache) == 3
    assert [cache.get("s", f"/f{n}") is not None for n in (16, 17, 18, 19)] == [
        False,
        True,
        True,
        True,
    ]


def test_the_least_recently_used_listing_goes_first() -> None:
    cache = MemoryListCache(max_objects=9)
    for name in ("/a", "/b", "/c"):
        cache.put("s", name, objs(3), TTL)
    assert cache.get("s", "/a") is not None  # /a is now used more recently than /b
    cache.put("s", "/d", objs(3), TTL)
    assert cache.get("s", "/b") is None
    assert all(cache.get("s", p) is not None for p in ("/a", "/c", "/d"))
    assert cache.objects == 9


def test_a_listing_put_again_counts_once() -> None:
    cache = MemoryListCache(max_objects=10)
    cache.put("s", "/a", objs(4), TTL)
    cache.put("s", "/a", objs(6), TTL)
    assert (len(cache), cache.objects) == (1, 6)
    cache.put("s", "/e", [], TTL)  # an empty listing still takes room
    assert (len(cache), cache.objects) == (2, 7)


def test_a_listing_bigger_than_the_cache_is_not_kept() -> None:
    cache = MemoryListCache(max_objects=10)
    cache.put("s", "/small", objs(2), TTL)
    cache.put("s", "/huge", objs(11), TTL)
    assert cache.get("s", "/huge") is None
    assert cache.get("s", "/small") is not None
    assert cache.objects == 2


def test_drop_prefix_drops_a_folder_and_below_in_one_storage_only() -> None:
    cache = MemoryListCache()
    paths = ("/a", "/a/b", "/a/b/c", "/ab", "/b")
    for scope in ("one", "two"):
        for path in paths:
            cache.put(scope, path, objs(1), TTL)
    cache.drop_prefix("one", "/a")
    kept = {(s, p) for s in ("one", "two") for p in paths if cache.get(s, p) is not None}
    assert kept == {("one", "/ab"), ("one", "/b")} | {("two", p) for p in paths}
    assert cache.objects == 7
    cache.drop_prefix("two", "/")
    assert {p for p in paths if cache.get("two", p) is not None} == set()
    assert (len(cache), cache.objects) == (2, 2)
    cache.drop_prefix("three", "/")  # a storage with nothing cached
    cache.drop("one", "/ab")
    assert (len(cache), cache.objects) == (1, 1)
