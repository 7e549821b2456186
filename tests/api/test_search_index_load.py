"""The search index under write load: a busy database delays index changes, never loses them."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from manifold.db import engine
from manifold.services.search import indexer
from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.api.test_fs_write import put
from tests.api.test_search import found, search
from tests.conftest import Api

WRITERS = 16
SECRET_NAME = "payroll-2024-secret"


@pytest.fixture(autouse=True)
def quick_lock_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set before the app opens its database: a held lock is then felt at once.
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_MS", 20)


@pytest.fixture
async def admin(api: Api, tmp_path: Path) -> Api:
    root = make_tree(tmp_path / "root", {"sub/": ""})
    await api.as_admin()
    await mount_local(api, "/local", root)
    await save_settings(api, search_index="database")
    return api


@contextmanager
def database_held(api: Api) -> Iterator[None]:
    """Another connection holds the write lock, as a long transaction would."""
    conn = sqlite3.connect(api.services.config.data_dir / "data.db", isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


async def mkdir(api: Api, path: str) -> dict[str, object]:
    return await api.post("/api/fs/mkdir", {"path": path})


CHANGES = {
    "put": lambda api, name: put(api, f"/local/sub/{name}", b"bytes"),
    "mkdir": lambda api, name: mkdir(api, f"/local/sub/{name}"),
}


class TestIndexUnderWriteLoad:
    @pytest.mark.parametrize("change", list(CHANGES))
    async def test_every_change_reaches_the_index(self, admin: Api, change: str) -> None:
        names = [f"{SECRET_NAME}-{i}" for i in range(WRITERS)]
        with database_held(admin):
            answers = await asyncio.gather(*(CHANGES[change](admin, n) for n in names))
            assert [a["code"] for a in answers] == [200] * WRITERS, answers
        await admin.services.search.indexer.settled()
        hits = found(await search(admin, keywords=SECRET_NAME))
        assert sorted(hits) == sorted(f"/local/sub/{n}" for n in names)

    async def test_a_busy_database_is_logged_by_class_only(
        self, admin: Api, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG)
        with database_held(admin):
            await asyncio.gather(*(put(admin, f"/local/{SECRET_NAME}-{i}", b"x") for i in range(4)))
            # The uploads have answered; the index writer meets the held lock after them.
            for _ in range(400):
                if any("OperationalError" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.025)
        await admin.services.search.indexer.settled()
        hits = found(await search(admin, keywords=SECRET_NAME))
        assert len(hits) == 4  # written once the lock was let go
        logged = [r.getMessage() for r in caplog.records if r.name.startswith("manifold")]
        busy = [line for line in logged if "OperationalError" in line]
        assert len(busy) == 1, logged
        for line in logged:
            assert SECRET_NAME not in line
            assert "SQL" not in line and "search_nodes" not in line, line


async def test_no_index_update_is_lost_under_concurrent_uploads(
    admin: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """Many uploads at once, with a busy timeout of 20 ms: every one is in the index
    afterwards (a count), and the database was never found busy."""
    caplog.set_level(logging.WARNING)
    names = [f"crowd-{i:03d}.bin" for i in range(120)]
    answers = await asyncio.gather(*(put(admin, f"/local/sub/{n}", b"c" * 10) for n in names))
    assert [a["code"] for a in answers] == [200] * len(names)
    hits = found(await search(admin, keywords="crowd-", per_page=1000))
    assert len(hits) == len(names)
    busy = [r.getMessage() for r in caplog.records if "busy" in r.getMessage()]
    assert busy == []


async def test_changes_wait_for_the_writer_past_the_pending_limit(
    admin: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that refuses writes for long does not grow the queue without bound:
    past the limit, the next change waits, and goes through once the writer catches up."""
    monkeypatch.setattr(indexer, "MAX_PENDING", 2)
    with database_held(admin):
        answers = [await put(admin, f"/local/sub/early-{i}", b"e") for i in range(2)]
        assert [a["code"] for a in answers] == [200] * 2
        late = asyncio.ensure_future(put(admin, "/local/sub/late", b"l"))
        await asyncio.sleep(0.3)
        assert not late.done()  # held: three changes wait and the database refuses them
    assert (await late)["code"] == 200
    hits = found(await search(admin, keywords="early-"))
    assert len(hits) == 2
    assert found(await search(admin, keywords="late")) == ["/local/sub/late"]
