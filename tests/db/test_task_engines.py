"""Tasks on every engine: copies run, and a restart keeps them (running ones run again)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from manifold.models import TaskState
from manifold.services.runner import TaskContext
from tests.api.fs_helpers import make_tree, mount_local
from tests.conftest import started_api


async def test_tasks_survive_a_restart(database_url: str, tmp_path: Path) -> None:
    one = make_tree(tmp_path / "one", {"ünï.txt": "data", "sub/b.txt": "b"})
    two = make_tree(tmp_path / "two", {})
    gate, started = asyncio.Event(), asyncio.Event()
    async with started_api(tmp_path / "data", database_url) as api:
        services = api.services
        await api.as_admin()
        await mount_local(api, "/one", one)
        await mount_local(api, "/two", two)
        body = await api.post(
            "/api/fs/copy", {"src_dir": "/one", "dst_dir": "/two", "names": ["ünï.txt"]}
        )
        copied = body["data"]["tasks"][0]["id"]
        assert (await services.tasks.wait_done(copied)).state == TaskState.SUCCEEDED

        async def held(ctx: TaskContext, payload: dict[str, Any]) -> None:
            ctx.set_status("held")
            started.set()
            await gate.wait()

        services.tasks.register("copy", held, max_retry=0, threads_setting="copy_task_threads_num")
        running = await services.tasks.submit("copy", "held copy", None, {"src": "/one/sub"})
        await started.wait()
        assert services.tasks.get(running.id).state == TaskState.RUNNING

    again: list[dict[str, Any]] = []

    async def finish(ctx: TaskContext, payload: dict[str, Any]) -> None:
        again.append(payload)

    async with started_api(tmp_path / "data", database_url) as api:
        api.services.tasks.register(
            "copy", finish, max_retry=0, threads_setting="copy_task_threads_num"
        )
        await api.as_admin()
        assert (await api.services.tasks.wait_done(running.id)).state == TaskState.SUCCEEDED
        assert again == [{"src": "/one/sub"}]
        done = {t["id"]: t for t in (await api.get("/api/admin/task/copy/done"))["data"]}
        assert done[copied]["state"] == TaskState.SUCCEEDED
        assert done[copied]["name"] == "copy [/one](/ünï.txt) to [/two](/)"
        assert done[copied]["progress"] == 100
        assert (done[running.id]["state"], done[running.id]["name"]) == (
            TaskState.SUCCEEDED,
            "held copy",
        )
        assert (two / "ünï.txt").read_text() == "data"
