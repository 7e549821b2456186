"""Two instances on one database (SQLite, and PostgreSQL): each task runs on exactly
one of them, either one lists, cancels and retries any task, and a task whose
instance died is finished by the other once its lease has run out."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.db.task_repo import TaskRepo
from manifold.models import Task, TaskState, User
from manifold.services.fs.transfers import UPLOAD_GONE
from manifold.services.runner import TaskContext
from tests.api.fs_helpers import make_tree, mount_local
from tests.api.test_copy_tasks import Gate as FifoGate
from tests.api.test_copy_tasks import copy_part_way, leftovers
from tests.conftest import open_api, start_services
from tests.db.conftest import _fresh_database

WAIT = 30.0  # only a guard against a hang
COPY_THREADS = "copy_task_threads_num"


@pytest.fixture(params=("sqlite", "postgresql"))
async def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    server = request.getfixturevalue("postgresql_server")
    return await _fresh_database(server.url)


def quick(services: Services) -> Services:
    """Leases and polls short enough for a test to wait them out."""
    services.tasks.lease_seconds = 0.6
    services.tasks.heartbeat_seconds = 0.1
    services.tasks.poll_seconds = 0.1
    services.tasks.flush_interval = 0.05
    return services


@asynccontextmanager
async def instance(data: Path, url: str) -> AsyncIterator[Services]:
    services = quick(await start_services(data, url))
    try:
        yield services
    finally:
        await services.stop()


class Gate:
    """A runner the test ends: which instance ran what, and what was cancelled."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started: asyncio.Queue[str] = asyncio.Queue()
        self.runs: list[str] = []
        self.cancelled: list[str] = []
        self.ends: dict[str, asyncio.Event] = {}

    async def __call__(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        self.runs.append(ctx.task_id)
        end = self.ends.setdefault(ctx.task_id, asyncio.Event())
        ctx.set_status(f"on {self.name}")
        self.started.put_nowait(ctx.task_id)
        try:
            await end.wait()
        except asyncio.CancelledError:
            self.cancelled.append(ctx.task_id)
            raise

    async def next_start(self) -> str:
        return await asyncio.wait_for(self.started.get(), WAIT)

    def finish(self, task_id: str) -> None:
        self.ends.setdefault(task_id, asyncio.Event()).set()


def gated(services: Services, name: str) -> Gate:
    gate = Gate(name)
    services.tasks.register("copy", gate, max_retry=0, threads_setting=COPY_THREADS)
    return gate


async def settled(services: Services, task_id: str) -> Task:
    return await asyncio.wait_for(services.tasks.wait_done(task_id), WAIT)


async def until(check: Any) -> None:
    for _ in range(3000):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def admin(services: Services) -> User:
    return await services.users.admin()


async def test_a_task_from_one_instance_is_listed_cancelled_and_retried_on_the_other(
    shared_url: str, tmp_path: Path
) -> None:
    async with (
        instance(tmp_path / "a", shared_url) as a,
        instance(tmp_path / "b", shared_url) as b,
    ):
        on_a, on_b = gated(a, "a"), gated(b, "b")
        task = await a.tasks.submit("copy", "copy [/x](/f) to [/y](/)", await admin(a), {"n": 1})
        assert await on_a.next_start() == task.id
        async with open_api(b) as api:
            await api.as_admin()
            (shown,) = (await api.get("/api/admin/task/copy/undone"))["data"]
            assert (shown["id"], shown["state"], shown["creator"]) == (
                task.id,
                TaskState.RUNNING,
                "admin",
            )
            await until(lambda: _status(api, task.id, "on a"))  # written through
            body = await api.post("/api/admin/task/copy/cancel", params={"tid": task.id})
            assert body["code"] == 200, body
            assert (await settled(a, task.id)).state == TaskState.CANCELED
            assert on_a.cancelled == [task.id]
            done = (await api.get("/api/admin/task/copy/done"))["data"]
            assert [(t["id"], t["state"]) for t in done] == [(task.id, TaskState.CANCELED)]

            body = await api.post("/api/admin/task/copy/retry", params={"tid": task.id})
            assert body["code"] == 200, body
            ran_on = await asyncio.wait_for(_first_start(on_a, on_b), WAIT)
            (on_a if ran_on == "a" else on_b).finish(task.id)
            assert (await settled(b, task.id)).state == TaskState.SUCCEEDED
            assert on_a.runs.count(task.id) + on_b.runs.count(task.id) == 2


async def _status(api: Any, task_id: str, status: str) -> bool:
    body = await api.post("/api/admin/task/copy/info", params={"tid": task_id})
    return bool(body["data"]["status"] == status)


async def _first_start(*gates: Gate) -> str:
    waits = {asyncio.ensure_future(gate.next_start()): gate.name for gate in gates}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for job in pending:
        job.cancel()
    return waits[done.pop()]


async def test_each_task_runs_on_exactly_one_instance(shared_url: str, tmp_path: Path) -> None:
    async with (
        instance(tmp_path / "a", shared_url) as a,
        instance(tmp_path / "b", shared_url) as b,
    ):
        on_a, on_b = gated(a, "a"), gated(b, "b")
        for services in (a, b):
            await services.settings.save([(COPY_THREADS, "2")])
        user = await admin(a)
        made = [await a.tasks.submit("copy", f"t{i}", user, {}) for i in range(3)]
        made += [await b.tasks.submit("copy", f"u{i}", user, {}) for i in range(3)]
        for task in made:
            await until(lambda t=task: _started(t.id, on_a, on_b))
            on_a.finish(task.id)
            on_b.finish(task.id)
            assert (await settled(a, task.id)).state == TaskState.SUCCEEDED
        assert sorted(on_a.runs + on_b.runs) == sorted(t.id for t in made)


async def _started(task_id: str, *gates: Gate) -> bool:
    return any(task_id in gate.runs for gate in gates)


async def test_a_dead_instances_task_is_finished_by_the_other_after_its_lease(
    shared_url: str, tmp_path: Path
) -> None:
    async with instance(tmp_path / "b", shared_url) as b:
        on_b = gated(b, "b")
        a = quick(await start_services(tmp_path / "a", shared_url))
        try:
            on_a = gated(a, "a")
            task = await a.tasks.submit("copy", "held", await admin(a), {"n": 2})
            assert await on_a.next_start() == task.id
            await a.tasks.stop(release=False)  # as if the process died
            assert on_a.cancelled == [task.id]
            assert await on_b.next_start() == task.id
            on_b.finish(task.id)
            assert (await settled(b, task.id)).state == TaskState.SUCCEEDED
            assert on_a.runs == [task.id] and on_b.runs == [task.id]
        finally:
            await a.stop()


async def test_a_start_leaves_a_live_instances_tasks_alone(shared_url: str, tmp_path: Path) -> None:
    async with instance(tmp_path / "a", shared_url) as a:
        on_a = gated(a, "a")
        await a.settings.save([(COPY_THREADS, "1")])
        user = await admin(a)
        held = await a.tasks.submit("copy", "held", user, {})
        assert await on_a.next_start() == held.id
        queued = await a.tasks.submit("copy", "queued", user, {})
        async with instance(tmp_path / "c", shared_url) as c:
            on_c = gated(c, "c")
            # The new instance takes what nobody holds, and only that.
            assert await on_c.next_start() == queued.id
            assert (await c.tasks.load(held.id)).state == TaskState.RUNNING
            on_c.finish(queued.id)
            await settled(c, queued.id)
            on_a.finish(held.id)
            assert (await settled(c, held.id)).state == TaskState.SUCCEEDED
            assert on_a.runs == [held.id] and on_c.runs == [queued.id]


async def test_a_stopping_instance_lets_go_of_its_tasks_for_the_other(
    shared_url: str, tmp_path: Path
) -> None:
    async with instance(tmp_path / "b", shared_url) as b:
        on_b = gated(b, "b")
        a = quick(await start_services(tmp_path / "a", shared_url))
        on_a = gated(a, "a")
        # Long enough that only letting go (not the lease) can hand the task over.
        a.tasks.lease_seconds = 600.0
        task = await a.tasks.submit("copy", "handed over", await admin(a), {})
        assert await on_a.next_start() == task.id
        await a.stop()
        assert await on_b.next_start() == task.id
        on_b.finish(task.id)
        assert (await settled(b, task.id)).state == TaskState.SUCCEEDED


async def test_a_copy_taken_over_ends_byte_exact(shared_url: str, tmp_path: Path) -> None:
    payload = os.urandom(3 << 20)
    one = make_tree(tmp_path / "one", {})
    (one / "a.txt").write_bytes(payload)
    dst = make_tree(tmp_path / "two", {})
    gate = FifoGate(tmp_path)
    a = quick(await start_services(tmp_path / "a", shared_url))
    try:
        async with open_api(a) as api:
            await api.as_admin()
            await mount_local(api, "/one", one)
            await mount_local(api, "/two", dst)
            tid = await copy_part_way(api, gate, dst)
            async with instance(tmp_path / "b", shared_url) as b:
                await a.tasks.stop(release=False)  # dies mid-copy, part of it written
                gate.close()
                assert leftovers(dst) == []
                task = await settled(b, tid)
                assert task.state == TaskState.SUCCEEDED, task.error
                assert (dst / "a.txt").read_bytes() == payload
                rows = {t.id: t for t in await TaskRepo(b.engine).all()}
                assert (rows[tid].state, rows[tid].progress) == (TaskState.SUCCEEDED, 100.0)
    finally:
        gate.close()
        await a.stop()


@pytest.mark.parametrize("shared_folder", [False, True])
async def test_an_upload_taken_over_needs_its_spooled_body(
    shared_url: str, tmp_path: Path, shared_folder: bool
) -> None:
    dst = make_tree(tmp_path / "two", {})
    a = quick(await start_services(tmp_path / "a", shared_url))
    try:
        async with open_api(a) as api:
            await api.as_admin()
            await mount_local(api, "/two", dst)
        held = Gate("a")
        a.tasks.register("upload", held, max_retry=0, threads_setting="upload_task_threads_num")
        spool = a.config.data_dir / "temp" / "upload-0123456789abcdef01234567"
        spool.write_bytes(b"spooled")
        payload = {"spool": str(spool), "path": "/two/f.bin", "size": 7, "overwrite": False}
        task = await a.tasks.submit("upload", "upload f.bin to [/two](/)", await admin(a), payload)
        assert await held.next_start() == task.id
        await a.tasks.stop(release=False)
        if not shared_folder:
            spool.unlink()  # it was on the dead instance's disk only
        async with instance(tmp_path / "b", shared_url) as b:
            done = await settled(b, task.id)
        if shared_folder:
            assert done.state == TaskState.SUCCEEDED, done.error
            assert (dst / "f.bin").read_bytes() == b"spooled"
        else:
            assert (done.state, done.error) == (TaskState.FAILED, UPLOAD_GONE)
            assert "its instance stopped; upload again" in done.error
            assert not (dst / "f.bin").exists()
    finally:
        await a.stop()
