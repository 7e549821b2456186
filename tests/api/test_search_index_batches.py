"""The index writer under a stream of mixed changes: whatever waits goes in one
transaction, and the index ends as a fresh build of the same tree would be."""

from __future__ import annotations

from pathlib import Path

import pytest

from manifold.db import engine
from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.api.test_fs_write import put
from tests.api.test_search import build, found, search
from tests.api.test_search_index_load import database_held
from tests.conftest import Api

ROUNDS = 12


@pytest.fixture(autouse=True)
def quick_lock_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_MS", 20)


@pytest.fixture
async def admin(api: Api, tmp_path: Path) -> Api:
    root = make_tree(tmp_path / "root", {"sub/mixkeep.txt": "k", "sub/mixold/mixinner.txt": "i"})
    await api.as_admin()
    await mount_local(api, "/local", root)
    await save_settings(api, search_index="database")
    await build(api)
    return api


async def ok(body: object) -> None:
    assert isinstance(body, dict) and body["code"] == 200, body


async def indexed(api: Api) -> list[str]:
    return sorted(found(await search(api, keywords="mix", per_page=1000)))


async def churn(api: Api) -> None:
    """Uploads, folders made, renamed, filled and removed, and files written twice."""
    for i in range(ROUNDS):
        await ok(await put(api, f"/local/sub/mixfile{i}.bin", b"f"))
        await ok(await api.post("/api/fs/mkdir", {"path": f"/local/sub/mixd{i}"}))
        await ok(
            await api.post("/api/fs/rename", {"path": f"/local/sub/mixd{i}", "name": f"mixr{i}"})
        )
        await ok(await put(api, f"/local/sub/mixr{i}/mixin{i}.txt", b"in"))
        await ok(await put(api, f"/local/sub/mixr{i}/mixin{i}.txt", b"again"))
        if i % 2:
            await ok(
                await api.post("/api/fs/remove", {"dir": "/local/sub", "names": [f"mixr{i - 1}"]})
            )
    await ok(await api.post("/api/fs/rename", {"path": "/local/sub/mixold", "name": "mixnew"}))
    await ok(await api.post("/api/fs/remove", {"dir": "/local/sub", "names": ["mixkeep.txt"]}))


async def test_changes_that_waited_are_written_in_one_transaction(admin: Api) -> None:
    indexer = admin.services.search.indexer
    await indexer.settled()
    before = indexer.writer_stats()
    with database_held(admin):
        await churn(admin)
        assert indexer.writer_stats().pending >= 5 * ROUNDS
    await indexer.settled()
    after = indexer.writer_stats()
    assert after.pending == 0
    assert after.batches - before.batches <= 2
    assert after.changes - before.changes >= 5 * ROUNDS


async def test_a_mixed_batch_leaves_the_index_a_build_would_make(admin: Api) -> None:
    with database_held(admin):
        await churn(admin)
    await admin.services.search.indexer.settled()
    written = await indexed(admin)
    assert "/local/sub/mixnew/mixinner.txt" in written
    assert "/local/sub/mixkeep.txt" not in written
    assert f"/local/sub/mixr{ROUNDS - 1}/mixin{ROUNDS - 1}.txt" in written
    await build(admin)
    assert written == await indexed(admin)


async def test_changes_told_one_by_one_leave_the_same_index(admin: Api) -> None:
    await churn(admin)
    await admin.services.search.indexer.settled()
    written = await indexed(admin)
    await build(admin)
    assert written == await indexed(admin)


async def test_a_new_folder_filled_in_the_same_batch_is_indexed_once(admin: Api) -> None:
    with database_held(admin):
        await ok(await admin.post("/api/fs/mkdir", {"path": "/local/sub/mixfresh"}))
        await ok(await put(admin, "/local/sub/mixfresh/mixfilled.txt", b"f"))
    await admin.services.search.indexer.settled()
    written = await indexed(admin)
    assert written.count("/local/sub/mixfresh/mixfilled.txt") == 1
    await build(admin)
    assert written == await indexed(admin)
