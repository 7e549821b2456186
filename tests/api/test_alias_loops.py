"""An Alias whose tree holds itself is a loop: refused at init where it is plain, and
answered with a clear error wherever a request meets it, never a request that spins.

Only a guard against a hang is timed: every request must answer well within it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.conftest import Api

T = TypeVar("T")
# A request through a loop either answers within this or hangs for good.
HANG = 60.0
LOOP = "alias loop"


async def answered(call: Awaitable[T]) -> T:
    return await asyncio.wait_for(call, HANG)


async def alias(api: Api, mount_path: str, paths: str) -> dict[str, Any]:
    addition = json.dumps({"paths": paths, "writable": True})
    body = {"mount_path": mount_path, "driver": "Alias", "addition": addition}
    return await api.post("/api/admin/storage/create", body)


@pytest.fixture
async def storages(api: Api, tmp_path: Path) -> Path:
    await api.as_admin()
    make_tree(tmp_path / "m", {"m.txt": "m", "keep/": ""})
    make_tree(tmp_path / "f", {"f.txt": "f", "empty/": ""})
    await mount_local(api, "/m", tmp_path / "m")
    await mount_local(api, "/f", tmp_path / "f")
    return tmp_path


@pytest.mark.parametrize(
    ("mount_path", "paths", "complaint"),
    [
        ("/m/x", "/m", "holds the alias itself"),
        ("/m/x", "/", "holds the alias itself"),
        ("/m/x", "/m/x/y", "inside the alias itself"),
        ("/m/x", "one:/f\ntwo:/m", "holds the alias itself"),
    ],
)
async def test_a_target_holding_its_own_mount_is_refused(
    api: Api, storages: Path, mount_path: str, paths: str, complaint: str
) -> None:
    created = await alias(api, mount_path, paths)
    assert created["code"] == 500, created
    assert complaint in created["message"]


async def test_two_aliases_of_each_other_answer_a_loop(api: Api, storages: Path) -> None:
    assert (await alias(api, "/pa", "/pb"))["code"] == 200
    assert (await alias(api, "/pb", "/pa/sub"))["code"] == 200
    for route, body in (
        ("/api/fs/list", {"path": "/pa"}),
        ("/api/fs/list", {"path": "/pb"}),
        ("/api/fs/get", {"path": "/pa/x"}),
        ("/api/fs/dirs", {"path": "/pb"}),
        ("/api/fs/remove_empty_directory", {"src_dir": "/pa"}),
        ("/api/fs/mkdir", {"path": "/pa/new"}),
    ):
        answer = await answered(api.post(route, body))
        assert answer["code"] == 500, (route, answer)
        assert answer["message"].startswith(LOOP), (route, answer)


@pytest.fixture
async def ring(api: Api, storages: Path) -> Path:
    """``/m/a`` shows ``/f``, which holds ``/f/b``, which shows ``/m``, which holds ``/m/a``."""
    assert (await alias(api, "/m/a", "/f"))["code"] == 200
    assert (await alias(api, "/f/b", "/m"))["code"] == 200
    return storages


async def test_a_ring_of_aliases_answers_a_loop_where_it_closes(api: Api, ring: Path) -> None:
    first = await answered(api.post("/api/fs/list", {"path": "/m/a/b"}))
    assert first["code"] == 200, first  # /m, seen through two aliases
    again = await answered(api.post("/api/fs/list", {"path": "/m/a/b/a"}))
    assert again["code"] == 500, again
    assert again["message"] == f"{LOOP}: /m/a -> /f/b -> /m/a", again


@pytest.mark.parametrize("start", ["/", "/m", "/m/a", "/f", "/f/b"])
async def test_walks_over_a_ring_of_aliases_end(api: Api, ring: Path, start: str) -> None:
    answer = await answered(api.post("/api/fs/remove_empty_directory", {"src_dir": start}))
    assert answer["code"] == 200 or answer["message"].startswith(LOOP), answer
    assert (ring / "m/m.txt").is_file() and (ring / "f/f.txt").is_file()
    await answered(api.post("/api/fs/mkdir", {"path": "/m/flat"}))
    answer = await answered(
        api.post(
            "/api/fs/recursive_move",
            {"src_dir": start, "dst_dir": "/m/flat", "conflict_policy": "skip"},
        )
    )
    assert answer["code"] in (200, 500), answer


async def test_the_index_over_a_ring_of_aliases_ends(api: Api, ring: Path) -> None:
    await save_settings(api, search_index="database")
    built = await api.post("/api/admin/index/build", token=await api.login())
    assert built["code"] == 200, built
    await answered(api.services.search.indexer.settled())
    hits = await api.post(
        "/api/fs/search", {"parent": "/", "keywords": "m.txt", "page": 1, "per_page": 100}
    )
    assert hits["code"] == 200, hits


async def test_a_ring_of_three_aliases_answers_a_loop(
    api: Api, storages: Path, tmp_path: Path
) -> None:
    await mount_local(api, "/g", make_tree(tmp_path / "g", {"g.txt": "g"}))
    for mount_path, target in (("/m/a", "/f"), ("/f/b", "/g"), ("/g/c", "/m")):
        assert (await alias(api, mount_path, target))["code"] == 200
    through = await answered(api.post("/api/fs/list", {"path": "/m/a/b/c"}))
    assert through["code"] == 200, through
    again = await answered(api.post("/api/fs/list", {"path": "/m/a/b/c/a"}))
    assert again["message"] == f"{LOOP}: /m/a -> /f/b -> /g/c -> /m/a", again
    walked = await answered(api.post("/api/fs/remove_empty_directory", {"src_dir": "/m/a"}))
    assert walked["message"].startswith(LOOP), walked
