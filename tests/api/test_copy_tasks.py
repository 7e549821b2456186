"""Copies between storages and uploads run as tasks: streamed, cancellable, restartable."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.drivers.base import LinkArgs
from manifold.models import Link, Obj, TaskState
from tests.api.fs_helpers import make_tree, mount_local
from tests.api.test_fs_write import leftovers, put
from tests.conftest import Api, started_api


@pytest.fixture
async def two(api: Api, tmp_path: Path) -> tuple[Path, Path]:
    one = make_tree(
        tmp_path / "one",
        {"a.txt": "alpha", "sub/b.txt": "beta", "sub/deeper/c.txt": "gamma", "sub/empty/": ""},
    )
    two = make_tree(tmp_path / "two", {"keep": "k"})
    await api.as_admin()
    await mount_local(api, "/one", one)
    await mount_local(api, "/two", two)
    return one, two


async def settle(api: Api) -> list[Any]:
    """Wait for every copy task (children included) to finish; the finished tasks."""
    while True:
        undone = await api.get("/api/admin/task/copy/undone")
        if not undone["data"]:
            return [
                api.services.tasks.get(t["id"])
                for t in (await api.get("/api/admin/task/copy/done"))["data"]
            ]
        for task in undone["data"]:
            await api.services.tasks.wait_done(task["id"])


async def test_copy_between_storages_runs_as_tasks(api: Api, two: tuple[Path, Path]) -> None:
    one, dst = two
    body = await api.post(
        "/api/fs/copy", {"src_dir": "/one", "dst_dir": "/two", "names": ["a.txt", "sub"]}
    )
    assert body["code"] == 200, body
    tasks = body["data"]["tasks"]
    assert [t["name"] for t in tasks] == [
        "copy [/one](/a.txt) to [/two](/)",
        "copy [/one](/sub) to [/two](/)",
    ]
    assert all(t["state"] in (0, 1, 2) for t in tasks)
    finished = await settle(api)
    assert {t.state for t in finished} == {TaskState.SUCCEEDED}
    assert (dst / "a.txt").read_text() == "alpha"
    assert (dst / "sub/b.txt").read_text() == "beta"
    assert (dst / "sub/deeper/c.txt").read_text() == "gamma"
    assert (dst / "sub/empty").is_dir()
    assert (one / "a.txt").read_text() == "alpha"
    done = await api.get("/api/admin/task/copy/done")
    assert done["code"] == 200
    assert len(done["data"]) == len(finished)
    assert all(t["progress"] == 100 for t in done["data"])


# More than an upload holds in memory before it writes a temporary: the copy is then
# visibly under way on the disk.
PAST_HELD = b"a" * ((1 << 20) + 1)


class Gate:
    """A source whose bytes arrive only when the test lets them: a FIFO behind a link."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "gate.fifo"
        os.mkfifo(self.path)
        self.writer: int | None = None

    async def open(self) -> None:
        self.writer = await asyncio.to_thread(os.open, self.path, os.O_WRONLY)

    async def send(self, data: bytes) -> None:
        assert self.writer is not None
        await asyncio.to_thread(os.write, self.writer, data)

    def close(self) -> None:
        if self.writer is not None:
            os.close(self.writer)
            self.writer = None


def gate_source(services: Services, mount: str, gate: Gate) -> None:
    """Make every link of the storage at ``mount`` read from ``gate``."""
    resolved = services.storages.resolve(mount)
    assert resolved is not None
    driver = resolved.target.require_ops().driver

    async def link(file: Obj, args: LinkArgs) -> Link:
        return Link(file_path=str(gate.path))

    driver.link = link  # type: ignore[method-assign]


async def wait_for(condition: Any) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never became true")


async def copy_part_way(api: Api, gate: Gate, dst: Path) -> str:
    """Start copying /one/a.txt into /two (``dst``) through ``gate``; its task id once
    part of it is written."""
    gate_source(api.services, "/one", gate)
    body = await api.post(
        "/api/fs/copy", {"src_dir": "/one", "dst_dir": "/two", "names": ["a.txt"]}
    )
    tid: str = body["data"]["tasks"][0]["id"]
    await gate.open()
    await gate.send(PAST_HELD)
    await wait_for(lambda: leftovers(dst))
    return tid


async def test_copy_cancelled_mid_copy_leaves_nothing(
    api: Api, two: tuple[Path, Path], tmp_path: Path
) -> None:
    _, dst = two
    gate = Gate(tmp_path)
    tid = await copy_part_way(api, gate, dst)
    body = await api.post("/api/admin/task/copy/cancel", params={"tid": tid})
    assert body["code"] == 200, body
    gate.close()
    task = await api.services.tasks.wait_done(tid)
    assert task.state == TaskState.CANCELED
    assert leftovers(dst) == []
    assert not (dst / "a.txt").exists()


async def test_restart_mid_copy_takes_the_copy_up_again(tmp_path: Path) -> None:
    one = make_tree(tmp_path / "one", {"a.txt": "alpha"})
    dst = make_tree(tmp_path / "two", {})
    gate = Gate(tmp_path)
    try:
        async with started_api(tmp_path / "data") as api:
            await api.as_admin()
            await mount_local(api, "/one", one)
            await mount_local(api, "/two", dst)
            tid = await copy_part_way(api, gate, dst)
    finally:
        gate.close()
    assert leftovers(dst) == []

    async with started_api(tmp_path / "data") as api:
        services = api.services
        await api.as_admin()
        task = await services.tasks.wait_done(tid)
        assert task.state == TaskState.SUCCEEDED, task.error
        assert (dst / "a.txt").read_text() == "alpha"
        body = await api.post("/api/admin/task/copy/info", params={"tid": tid})
        assert (body["data"]["state"], body["data"]["progress"]) == (TaskState.SUCCEEDED, 100)


async def test_upload_as_task(api: Api, two: tuple[Path, Path]) -> None:
    _, dst = two
    body = await put(api, "/two/deep/t.bin", b"task-bytes", **{"As-Task": "true"})
    assert body["code"] == 200, body
    task = body["data"]["task"]
    assert task["name"] == "upload t.bin to [/two](/deep)"
    finished = await api.services.tasks.wait_done(task["id"])
    assert finished.state == TaskState.SUCCEEDED, finished.error
    assert (dst / "deep/t.bin").read_bytes() == b"task-bytes"
    assert list((api.services.config.data_dir / "temp").iterdir()) == []
    undone = await api.get("/api/task/upload/undone")
    assert undone["data"] == []


async def test_copy_of_a_missing_name_is_refused_before_any_task(
    api: Api, two: tuple[Path, Path]
) -> None:
    body = await api.post("/api/fs/copy", {"src_dir": "/one", "dst_dir": "/two", "names": ["nope"]})
    assert body["code"] == 500
    assert body["message"].endswith("object not found")
    assert (await api.get("/api/admin/task/copy/undone"))["data"] == []


async def test_form_upload_as_task(api: Api, two: tuple[Path, Path]) -> None:
    _, dst = two
    response = await api.client.put(
        "/api/fs/form",
        files={"file": ("f.bin", b"form-task-bytes", "application/octet-stream")},
        headers={"File-Path": "/two/f.bin", "Authorization": api.token, "As-Task": "true"},
    )
    body = response.json()
    assert body["code"] == 200, body
    finished = await api.services.tasks.wait_done(body["data"]["task"]["id"])
    assert finished.state == TaskState.SUCCEEDED, finished.error
    assert finished.total_bytes == len(b"form-task-bytes")
    assert (dst / "f.bin").read_bytes() == b"form-task-bytes"


async def test_large_upload_as_task_is_exact(api: Api, two: tuple[Path, Path]) -> None:
    _, dst = two
    data = os.urandom((3 << 20) + 12345)
    body = await put(api, "/two/big.bin", data, **{"As-Task": "true"})
    assert body["code"] == 200, body
    finished = await api.services.tasks.wait_done(body["data"]["task"]["id"])
    assert finished.state == TaskState.SUCCEEDED, finished.error
    assert (dst / "big.bin").read_bytes() == data
