"""Moves into another storage run as ``move`` tasks: the bytes are streamed, each
source removed once its copy is whole, and a cancel or a failure leaves every source
not moved where it was and nothing half-written at the destination."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from manifold.models import TaskState
from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.api.test_copy_tasks import PAST_HELD, Gate, gate_source, wait_for
from tests.api.test_fs_write import leftovers
from tests.conftest import Api


@pytest.fixture
async def disks(api: Api, tmp_path: Path) -> tuple[Path, Path]:
    one = make_tree(
        tmp_path / "one",
        {
            "dir/a.txt": "alpha",
            "dir/b.txt": "beta",
            "dir/sub/c.txt": "gamma",
            "dir/sub/empty/": "",
            "single.txt": "single",
        },
    )
    two = make_tree(tmp_path / "two", {"keep": "k"})
    await api.as_admin()
    await mount_local(api, "/one", one)
    await mount_local(api, "/two", two)
    return one, two


async def settle(api: Api) -> list[Any]:
    """Wait for every move task to finish; the finished tasks."""
    while undone := (await api.get("/api/admin/task/move/undone"))["data"]:
        for task in undone:
            await api.services.tasks.wait_done(task["id"])
    done = (await api.get("/api/admin/task/move/done"))["data"]
    return [api.services.tasks.get(t["id"]) for t in done]


async def move(api: Api, src_dir: str, dst_dir: str, *names: str, **fields: Any) -> Any:
    body = {"src_dir": src_dir, "dst_dir": dst_dir, "names": list(names), **fields}
    return await api.post("/api/fs/move", body)


async def test_a_move_into_another_storage_answers_tasks_and_moves_everything(
    api: Api, disks: tuple[Path, Path]
) -> None:
    one, two = disks
    answer = await move(api, "/one", "/two", "dir", "single.txt")
    assert answer["code"] == 200, answer
    assert answer["data"]["message"] == "Successfully created 2 move task(s)"
    assert [t["name"] for t in answer["data"]["tasks"]] == [
        "move [/one](/dir) to [/two](/)",
        "move [/one](/single.txt) to [/two](/)",
    ]
    finished = await settle(api)
    assert [(t.state, t.progress) for t in finished] == [(TaskState.SUCCEEDED, 100.0)] * 2
    assert (two / "dir/a.txt").read_text() == "alpha"
    assert (two / "dir/sub/c.txt").read_text() == "gamma"
    assert (two / "dir/sub/empty").is_dir()
    assert (two / "single.txt").read_text() == "single"
    assert sorted(p.name for p in one.iterdir()) == []
    dir_task = next(t for t in finished if t.name.endswith("(/dir) to [/two](/)"))
    assert dir_task.total_bytes == len("alpha") + len("beta") + len("gamma")


async def test_a_move_inside_one_storage_still_answers_nothing(
    api: Api, disks: tuple[Path, Path]
) -> None:
    one, _ = disks
    answer = await move(api, "/one", "/one/dir", "single.txt")
    assert (answer["code"], answer["data"]) == (200, None)
    assert (one / "dir/single.txt").read_text() == "single"
    assert (await api.get("/api/admin/task/move/undone"))["data"] == []


async def test_a_taken_name_is_refused_before_any_task(api: Api, disks: tuple[Path, Path]) -> None:
    one, two = disks
    (two / "single.txt").write_text("taken")
    answer = await move(api, "/one", "/two", "single.txt")
    assert (answer["code"], answer["message"]) == (403, "file [single.txt] exists")
    assert (await api.get("/api/admin/task/move/undone"))["data"] == []
    answer = await move(api, "/one", "/two", "single.txt", overwrite=True)
    assert answer["code"] == 200, answer
    await settle(api)
    assert (two / "single.txt").read_text() == "single"
    assert not (one / "single.txt").exists()


async def test_a_cancelled_move_leaves_every_source_and_no_partial_file(
    api: Api, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    one, two = disks
    gate = Gate(tmp_path)
    gate_source(api.services, "/one", gate)
    answer = await move(api, "/one", "/two", "dir")
    tid = answer["data"]["tasks"][0]["id"]
    try:
        await gate.open()
        await gate.send(PAST_HELD)
        await wait_for(lambda: leftovers(two))  # the first file is on its way
        cancelled = await api.post("/api/admin/task/move/cancel", params={"tid": tid})
        assert cancelled["code"] == 200, cancelled
    finally:
        gate.close()
    task = await api.services.tasks.wait_done(tid)
    assert task.state == TaskState.CANCELED
    assert leftovers(two) == []
    assert [p for p in (two / "dir").rglob("*") if p.is_file()] == []
    assert (one / "dir/a.txt").read_text() == "alpha"
    assert (one / "dir/b.txt").read_text() == "beta"
    assert (one / "dir/sub/c.txt").read_text() == "gamma"


async def test_a_failing_destination_keeps_the_source_file_and_a_retry_finishes(
    api: Api, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    one, two = disks
    # One worker, held by a move through a gate, so the clash below is in place
    # before the move under test starts.
    await save_settings(api, move_task_threads_num="1")
    gated = make_tree(tmp_path / "gated", {"held.bin": "h"})
    await mount_local(api, "/gated", gated)
    gate = Gate(tmp_path)
    gate_source(api.services, "/gated", gate)
    held = (await move(api, "/gated", "/two", "held.bin"))["data"]["tasks"][0]["id"]
    answer = await move(api, "/one", "/two", "dir")
    tid = answer["data"]["tasks"][0]["id"]
    make_tree(two, {"dir/b.txt": "in the way"})
    try:
        await gate.open()
        await gate.send(b"h")
    finally:
        gate.close()
    assert (await api.services.tasks.wait_done(held)).state == TaskState.SUCCEEDED
    task = await api.services.tasks.wait_done(tid)
    assert task.state == TaskState.FAILED
    assert task.error == "failed to move [/one/dir/b.txt]: file [b.txt] exists"
    assert (one / "dir/b.txt").read_text() == "beta"
    assert (two / "dir/b.txt").read_text() == "in the way"
    assert not (one / "dir/a.txt").exists()
    assert (two / "dir/a.txt").read_text() == "alpha"
    info = await api.post("/api/admin/task/move/info", params={"tid": tid})
    assert (info["data"]["state"], info["data"]["error"]) == (TaskState.FAILED, task.error)

    (two / "dir/b.txt").unlink()
    retried = await api.post("/api/admin/task/move/retry", params={"tid": tid})
    assert retried["code"] == 200, retried
    assert (await api.services.tasks.wait_done(tid)).state == TaskState.SUCCEEDED
    assert (two / "dir/b.txt").read_text() == "beta"
    assert (two / "dir/sub/c.txt").read_text() == "gamma"
    assert not (one / "dir").exists()


async def test_a_user_sees_and_retries_only_their_own_move_tasks(
    api: Api, disks: tuple[Path, Path]
) -> None:
    await move(api, "/one", "/two", "single.txt")
    [task] = await settle(api)
    token = await api.login()
    await api.make_user("mover", "a-password-9", permission=0xFF)
    mine = await api.login("mover", "a-password-9")
    assert (await api.get("/api/task/move/done", token=mine))["data"] == []
    other = await api.post("/api/task/move/retry", params={"tid": task.id}, token=mine)
    assert other["code"] != 200
    assert (await api.get("/api/task/move/done", token=token))["data"][0]["id"] == task.id


async def test_recursive_move_into_another_storage_makes_a_task_per_file(
    api: Api, disks: tuple[Path, Path]
) -> None:
    one, two = disks
    body = {"src_dir": "/one/dir", "dst_dir": "/two", "conflict_policy": "cancel"}
    answer = await api.post("/api/fs/recursive_move", body)
    assert answer["code"] == 200, answer
    assert answer["data"]["message"] == "Successfully created 3 move task(s)"
    finished = await settle(api)
    assert {t.state for t in finished} == {TaskState.SUCCEEDED}
    assert sorted(p.name for p in two.iterdir() if p.is_file()) == [
        "a.txt",
        "b.txt",
        "c.txt",
        "keep",
    ]
    assert [p for p in (one / "dir").rglob("*") if p.is_file()] == []


async def test_links_stay_with_their_folder_and_what_they_point_at_stays_too(
    api: Api, disks: tuple[Path, Path]
) -> None:
    one, two = disks
    (one / "dir/to-single").symlink_to(one / "single.txt")
    (one / "dir/to-sub").symlink_to(one / "dir/sub", target_is_directory=True)
    answer = await move(api, "/one", "/two", "dir")
    assert answer["code"] == 200, answer
    [task] = await settle(api)
    assert (task.state, task.status) == (TaskState.SUCCEEDED, "2 entries stay at the source")
    assert (two / "dir/a.txt").read_text() == "alpha"
    assert (two / "dir/sub/c.txt").read_text() == "gamma"
    assert not (two / "dir/to-single").exists()
    assert (one / "single.txt").read_text() == "single"
    assert sorted(p.name for p in (one / "dir").iterdir()) == ["to-single", "to-sub"]


async def test_a_finished_move_shows_no_step_and_a_failed_one_what_it_moved(
    api: Api, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    one, two = disks
    # One worker, held by a gated move, so the clash below is in place before the
    # move of single.txt starts: its bytes then stream whole and its name is refused.
    await save_settings(api, move_task_threads_num="1")
    await mount_local(api, "/gated", make_tree(tmp_path / "gated", {"held.bin": "h"}))
    gate = Gate(tmp_path)
    gate_source(api.services, "/gated", gate)
    await move(api, "/gated", "/two", "held.bin")
    await move(api, "/one/dir", "/two", "a.txt")
    await move(api, "/one", "/two", "single.txt")
    make_tree(two, {"single.txt": "in the way"})
    try:
        await gate.open()
        await gate.send(b"h")
    finally:
        gate.close()
    await settle(api)
    done = (await api.get("/api/admin/task/move/done"))["data"]
    shown = {t["name"]: (t["state"], t["status"], t["progress"]) for t in done}
    assert shown["move [/one](/dir/a.txt) to [/two](/)"] == (TaskState.SUCCEEDED, "", 100)
    failed = shown["move [/one](/single.txt) to [/two](/)"]
    assert failed == (TaskState.FAILED, "uploading", 0)
    assert (one / "single.txt").read_text() == "single"
    assert (two / "single.txt").read_text() == "in the way"
