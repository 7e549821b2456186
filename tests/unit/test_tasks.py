"""The task manager: AList's states, retries, cancels, worker limits, and a restart."""

from __future__ import annotations

import asyncio
import string
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.db.task_repo import TaskRepo
from manifold.errors import BadRequest, NotFound, ServerError, TaskNotFound
from manifold.models import Task, TaskState, User
from manifold.services.auth.users import UserInput
from manifold.services.runner import (
    CANCELED_ERROR,
    ID_LENGTH,
    TaskContext,
    clean_percent,
    new_task_id,
)
from tests.conftest import start_services

# Only a guard against a hang; no test depends on how fast anything is.
WAIT = 10.0
COPY_THREADS = "copy_task_threads_num"


class Gate:
    """A task runner the test drives: every run waits until the test ends it."""

    def __init__(self) -> None:
        self.started: asyncio.Queue[str] = asyncio.Queue()
        self.runs: list[str] = []
        self.payloads: list[dict[str, Any]] = []
        self.contexts: dict[str, TaskContext] = {}
        self.cancelled: list[str] = []
        self.running: set[str] = set()
        self.peak = 0
        self._outcomes: dict[str, asyncio.Future[str | None]] = {}

    async def __call__(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        self.runs.append(ctx.task_id)
        self.payloads.append(payload)
        self.contexts[ctx.task_id] = ctx
        outcome: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._outcomes[ctx.task_id] = outcome
        self.running.add(ctx.task_id)
        self.peak = max(self.peak, len(self.running))
        self.started.put_nowait(ctx.task_id)
        try:
            error = await outcome
        except asyncio.CancelledError:
            self.cancelled.append(ctx.task_id)
            raise
        finally:
            self.running.discard(ctx.task_id)
        if error is not None:
            raise ServerError(error)

    async def next_start(self) -> str:
        return await asyncio.wait_for(self.started.get(), WAIT)

    def finish(self, task_id: str, error: str | None = None) -> None:
        self._outcomes.pop(task_id).set_result(error)


def use_gate(services: Services, kind: str = "copy", max_retry: int = 0) -> Gate:
    gate = Gate()
    setting = f"{kind}_task_threads_num"
    services.tasks.register(kind, gate, max_retry=max_retry, threads_setting=setting)
    return gate


async def settled(services: Services, task_id: str) -> Task:
    return await asyncio.wait_for(services.tasks.wait_done(task_id), WAIT)


async def stored(services: Services, task_id: str) -> Task:
    rows = {task.id: task for task in await TaskRepo(services.engine).all()}
    return rows[task_id]


async def submit(services: Services, creator: User | None = None, **payload: Any) -> Task:
    return await services.tasks.submit("copy", "copy [/a](/x) to [/b](/)", creator, payload)


async def admin(services: Services) -> User:
    return await services.users.admin()


# -- small pure pieces --------------------------------------------------------


def test_ids_are_nanoid_shaped_and_distinct() -> None:
    ids = {new_task_id() for _ in range(200)}
    assert len(ids) == 200
    alphabet = set(string.ascii_letters + string.digits + "_-")
    assert all(len(i) == ID_LENGTH == 21 and set(i) <= alphabet for i in ids)


@pytest.mark.parametrize(
    ("given", "shown"),
    [(float("nan"), 100.0), (42.5, 42.5), (-3.0, 0.0), (250.0, 100.0), (float("inf"), 100.0)],
)
def test_progress_is_cleaned(given: float, shown: float) -> None:
    assert clean_percent(given) == shown


def test_done_states_are_alists() -> None:
    now = datetime.now(UTC)
    done = {state for state in TaskState if Task("i", "copy", "", now, state=state).done}
    assert done == {TaskState.SUCCEEDED, TaskState.CANCELED, TaskState.FAILED}
    assert [int(state) for state in TaskState] == list(range(10))


# -- the life of one task -----------------------------------------------------


async def test_a_task_runs_and_succeeds(services: Services) -> None:
    gate = use_gate(services)
    creator = await admin(services)
    task = await submit(services, creator, src="/a/x")
    assert await gate.next_start() == task.id
    assert services.tasks.get(task.id).state == TaskState.RUNNING
    assert gate.payloads == [{"src": "/a/x"}]
    assert gate.contexts[task.id].creator == creator
    gate.finish(task.id)
    done = await settled(services, task.id)
    assert (done.state, done.error, done.progress) == (TaskState.SUCCEEDED, "", 100.0)
    assert done.start_time is not None and done.end_time is not None
    assert done.start_time <= done.end_time
    row = await stored(services, task.id)
    assert (row.state, row.creator, row.creator_id, row.creator_role) == (
        TaskState.SUCCEEDED, "admin", creator.id, 2,
    )  # fmt: skip
    assert row.payload == {"src": "/a/x"}


async def test_a_failure_without_retries_left_is_final(services: Services) -> None:
    gate = use_gate(services, max_retry=0)
    task = await submit(services)
    gate.finish(await gate.next_start(), "disk on fire")
    done = await settled(services, task.id)
    assert (done.state, done.error, done.retry) == (TaskState.FAILED, "disk on fire", 0)
    assert gate.runs == [task.id]
    assert (await stored(services, task.id)).error == "disk on fire"


async def test_a_plain_exception_gives_its_text(services: Services) -> None:
    async def broken(ctx: TaskContext, payload: dict[str, Any]) -> None:
        raise ValueError("bad payload")

    services.tasks.register("copy", broken, max_retry=0, threads_setting=COPY_THREADS)
    task = await submit(services)
    assert (await settled(services, task.id)).error == "bad payload"


async def test_failures_are_retried_until_none_are_left(services: Services) -> None:
    gate = use_gate(services, max_retry=2)
    task = await submit(services, n=1)
    for attempt, error in enumerate(["first", "second", "third"]):
        assert await gate.next_start() == task.id
        assert services.tasks.get(task.id).retry == attempt
        gate.finish(task.id, error)
    done = await settled(services, task.id)
    assert (done.state, done.error, done.retry) == (TaskState.FAILED, "third", 2)
    assert gate.runs == [task.id] * 3
    assert gate.payloads == [{"n": 1}] * 3


async def test_a_retry_that_succeeds_clears_the_error(services: Services) -> None:
    gate = use_gate(services, max_retry=2)
    task = await submit(services)
    gate.finish(await gate.next_start(), "flaky")
    assert await gate.next_start() == task.id
    gate.finish(task.id)
    done = await settled(services, task.id)
    assert (done.state, done.error, done.retry) == (TaskState.SUCCEEDED, "", 1)


async def test_cancel_while_running(services: Services) -> None:
    gate = use_gate(services)
    user = await admin(services)
    task = await submit(services, user)
    await gate.next_start()
    await services.tasks.cancel("copy", user, task.id)
    done = await settled(services, task.id)
    assert (done.state, done.error) == (TaskState.CANCELED, CANCELED_ERROR)
    assert gate.cancelled == [task.id]
    assert (await stored(services, task.id)).state == TaskState.CANCELED


async def test_cancel_while_queued_is_at_once_and_it_never_runs(services: Services) -> None:
    await services.settings.save([(COPY_THREADS, "1")])
    gate = use_gate(services)
    user = await admin(services)
    first, queued = await submit(services, user), await submit(services, user)
    assert await gate.next_start() == first.id
    await services.tasks.cancel("copy", user, queued.id)
    assert services.tasks.get(queued.id).state == TaskState.CANCELED
    assert (await stored(services, queued.id)).state == TaskState.CANCELED
    gate.finish(first.id)
    await settled(services, first.id)
    assert gate.runs == [first.id]
    assert gate.cancelled == []


async def test_cancel_of_a_finished_task_changes_nothing(services: Services) -> None:
    gate = use_gate(services)
    user = await admin(services)
    task = await submit(services, user)
    gate.finish(await gate.next_start())
    await settled(services, task.id)
    await services.tasks.cancel("copy", user, task.id)
    assert services.tasks.get(task.id).state == TaskState.SUCCEEDED


async def test_retry_runs_a_failed_task_again_with_a_fresh_counter(services: Services) -> None:
    gate = use_gate(services, max_retry=1)
    user = await admin(services)
    task = await submit(services, user, what="again")
    gate.finish(await gate.next_start(), "once")
    gate.finish(await gate.next_start(), "twice")
    assert (await settled(services, task.id)).retry == 1
    await services.tasks.retry("copy", user, task.id)
    assert services.tasks.get(task.id).error == ""
    assert await gate.next_start() == task.id
    assert services.tasks.get(task.id).retry == 0
    gate.finish(task.id)
    assert (await settled(services, task.id)).state == TaskState.SUCCEEDED
    assert gate.payloads == [{"what": "again"}] * 3


async def test_a_canceled_task_can_be_retried(services: Services) -> None:
    gate = use_gate(services)
    user = await admin(services)
    task = await submit(services, user)
    await gate.next_start()
    await services.tasks.cancel("copy", user, task.id)
    await settled(services, task.id)
    await services.tasks.retry("copy", user, task.id)
    gate.finish(await gate.next_start())
    assert (await settled(services, task.id)).state == TaskState.SUCCEEDED


async def test_retry_refuses_running_and_succeeded_tasks(services: Services) -> None:
    gate = use_gate(services)
    user = await admin(services)
    task = await submit(services, user)
    await gate.next_start()
    with pytest.raises(BadRequest):
        await services.tasks.retry("copy", user, task.id)
    gate.finish(task.id)
    await settled(services, task.id)
    with pytest.raises(BadRequest):
        await services.tasks.retry("copy", user, task.id)
    assert gate.runs == [task.id]


async def test_delete_of_a_running_task_cancels_it(services: Services) -> None:
    gate = use_gate(services)
    user = await admin(services)
    task = await submit(services, user)
    await gate.next_start()
    await services.tasks.delete("copy", user, task.id)
    with pytest.raises(TaskNotFound):
        services.tasks.get(task.id)
    assert await services.tasks.undone("copy", user) == []
    second = await submit(services, user)
    gate.finish(await gate.next_start())
    await settled(services, second.id)
    assert gate.cancelled == [task.id]
    assert [row.id for row in await TaskRepo(services.engine).all()] == [second.id]


# -- progress -------------------------------------------------------------------


async def test_progress_from_bytes_and_its_debounced_write(services: Services) -> None:
    services.tasks.flush_interval = 0.01
    gate = use_gate(services)
    task = await submit(services)
    await gate.next_start()
    ctx = gate.contexts[task.id]
    ctx.set_total(400)
    ctx.add_done(100)
    ctx.add_done(100)
    ctx.set_status("uploading")
    assert services.tasks.get(task.id).progress == 50.0
    row = await stored(services, task.id)
    for _ in range(1000):
        if row.progress == 50.0:
            break
        await asyncio.sleep(0.01)
        row = await stored(services, task.id)
    assert (row.progress, row.total_bytes, row.status, row.state) == (
        50.0, 400, "uploading", TaskState.RUNNING,
    )  # fmt: skip
    ctx.set_progress(float("nan"))
    assert services.tasks.get(task.id).progress == 100.0
    gate.finish(task.id)
    await settled(services, task.id)


async def test_spawned_children_keep_the_creator(services: Services) -> None:
    gate = use_gate(services)
    user = await admin(services)
    parent = await submit(services, user)
    await gate.next_start()
    child = await gate.contexts[parent.id].spawn("copy", "child", {"leaf": True}, 7)
    assert (child.creator, child.creator_id, child.total_bytes) == ("admin", user.id, 7)
    gate.finish(parent.id)
    assert await gate.next_start() == child.id
    assert gate.contexts[child.id].creator == user
    gate.finish(child.id)
    await settled(services, child.id)


# -- worker limits ----------------------------------------------------------------


async def test_one_worker_runs_tasks_one_after_another(services: Services) -> None:
    await services.settings.save([(COPY_THREADS, "1")])
    gate, other = use_gate(services), use_gate(services, "upload")
    tasks = [await submit(services) for _ in range(3)]
    assert await gate.next_start() == tasks[0].id
    # A task of another kind started after ours were queued: ours had their chance.
    fence = await services.tasks.submit("upload", "fence", None, {})
    assert await other.next_start() == fence.id
    assert [services.tasks.get(t.id).state for t in tasks[1:]] == [TaskState.PENDING] * 2
    for task in tasks:
        assert gate.running == {task.id}
        gate.finish(task.id)
        await settled(services, task.id)
        if task is not tasks[-1]:
            await gate.next_start()
    assert gate.runs == [t.id for t in tasks]
    assert gate.peak == 1
    other.finish(fence.id)


async def test_a_larger_worker_setting_takes_effect_without_a_task_ending(
    services: Services,
) -> None:
    services.tasks.flush_interval = 0.01
    await services.settings.save([(COPY_THREADS, "1")])
    gate = use_gate(services)
    first, second, third = [await submit(services) for _ in range(3)]
    assert await gate.next_start() == first.id
    await services.settings.save([(COPY_THREADS, "3")])
    assert {await gate.next_start(), await gate.next_start()} == {second.id, third.id}
    assert gate.running == {first.id, second.id, third.id}
    for task in (first, second, third):
        gate.finish(task.id)
        await settled(services, task.id)


async def test_a_worker_setting_below_one_still_runs_tasks(services: Services) -> None:
    await services.settings.save([(COPY_THREADS, "0")])
    gate = use_gate(services)
    task = await submit(services)
    gate.finish(await gate.next_start())
    assert (await settled(services, task.id)).state == TaskState.SUCCEEDED


# -- what a user sees -------------------------------------------------------------


async def test_users_see_only_their_own_tasks(services: Services) -> None:
    gate = use_gate(services)
    owner = await admin(services)
    alice = await services.users.create(UserInput("alice", "alice-pw-1"))
    bob = await services.users.create(UserInput("bob", "bob-pw-1"))
    mine = await submit(services, alice)
    theirs = await submit(services, bob)
    await gate.next_start()
    await gate.next_start()
    assert [t.id for t in await services.tasks.undone("copy", alice)] == [mine.id]
    assert {t.id for t in await services.tasks.undone("copy", owner)} == {mine.id, theirs.id}
    with pytest.raises(TaskNotFound):
        await services.tasks.find("copy", alice, theirs.id)
    with pytest.raises(TaskNotFound):
        await services.tasks.cancel("copy", alice, theirs.id)
    with pytest.raises(TaskNotFound):
        await services.tasks.find("upload", owner, mine.id)
    with pytest.raises(NotFound):
        await services.tasks.undone("nonsense", owner)
    assert await services.tasks.done("offline_download", owner) == []
    failed = await services.tasks.cancel_some("copy", alice, [theirs.id, mine.id, "nope"])
    assert failed == {theirs.id: "task not found", "nope": "task not found"}
    assert services.tasks.get(theirs.id).state == TaskState.RUNNING
    gate.finish(theirs.id)
    await settled(services, theirs.id)
    await settled(services, mine.id)


# -- a restart ------------------------------------------------------------------


async def test_a_restart_keeps_finished_tasks_and_runs_interrupted_ones_again(
    tmp_path: Path,
) -> None:
    first = await start_services(tmp_path / "data")
    try:
        gate = use_gate(first)
        user = await admin(first)
        ok = await submit(first, user, name="ok")
        gate.finish(await gate.next_start())
        await settled(first, ok.id)
        broken = await submit(first, user, name="broken")
        gate.finish(await gate.next_start(), "no space left")
        await settled(first, broken.id)
        await first.settings.save([(COPY_THREADS, "1")])
        running = await submit(first, user, name="running")
        await gate.next_start()
        queued = await submit(first, user, name="queued")
    finally:
        await first.stop()
    assert gate.cancelled == [running.id]

    second = await start_services(tmp_path / "data")
    try:
        gate = use_gate(second)
        user = await admin(second)
        shown = {t.id: t for t in await second.tasks.done("copy", user)}
        assert set(shown) == {ok.id, broken.id}
        assert (shown[ok.id].state, shown[ok.id].error) == (TaskState.SUCCEEDED, "")
        assert shown[broken.id].error == "no space left"
        # Let go of at the stop, both are taken up again, in the order they were made.
        assert await gate.next_start() == running.id
        assert gate.payloads == [{"name": "running"}]
        assert gate.contexts[running.id].creator == user
        gate.finish(running.id)
        assert (await settled(second, running.id)).state == TaskState.SUCCEEDED
        assert await gate.next_start() == queued.id
        gate.finish(queued.id)
        assert (await settled(second, queued.id)).state == TaskState.SUCCEEDED
        assert gate.runs == [running.id, queued.id]
    finally:
        await second.stop()


async def test_an_interrupted_task_of_an_unknown_kind_waits_for_a_server_that_runs_it(
    tmp_path: Path,
) -> None:
    first = await start_services(tmp_path / "data")
    try:
        gate = use_gate(first, "vanished")
        user = await admin(first)
        task = await first.tasks.submit("vanished", "fetch", user, {})
        await gate.next_start()
    finally:
        await first.stop()
    second = await start_services(tmp_path / "data")
    try:
        user = await admin(second)
        assert (await second.tasks.load(task.id)).state == TaskState.RUNNING
        with pytest.raises(NotFound):
            await second.tasks.retry("vanished", user, task.id)
    finally:
        await second.stop()
