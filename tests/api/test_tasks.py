"""Task endpoints under /api/admin/task/<kind>/ and /api/task/<kind>/."""

from __future__ import annotations

from typing import Any

import pytest

from manifold.models import Task, TaskState, User
from manifold.services.runner import TASK_KINDS
from tests.conftest import Api
from tests.unit.test_tasks import Gate, settled, use_gate

ADMIN = "/api/admin/task/copy"
USER = "/api/task/copy"
TASK_FIELDS = {
    "id", "name", "creator", "creator_role", "state", "status", "progress",
    "start_time", "end_time", "total_bytes", "error",
}  # fmt: skip
NOT_FOUND = (404, "task not found")
BAD_FORMAT = (400, "invalid request format")


@pytest.fixture
def gate(api: Api) -> Gate:
    return use_gate(api.services, max_retry=0)


async def user(api: Api, name: str) -> tuple[User, str]:
    """A general user (made once) and a fresh token for it."""
    password = f"{name}-pw-9917"
    if await api.services.users.by_name(name) is None:
        await api.make_user(name, password)
    found = await api.services.users.by_name(name)
    assert found is not None
    return found, await api.login(name, password)


async def started(api: Api, gate: Gate, creator: User | None, **payload: Any) -> Task:
    task = await api.services.tasks.submit("copy", "copy [/a](/f) to [/b](/)", creator, payload, 40)
    assert await gate.next_start() == task.id
    return task


async def finished(api: Api, gate: Gate, creator: User | None, error: str | None = None) -> Task:
    task = await started(api, gate, creator)
    gate.finish(task.id, error)
    return await settled(api.services, task.id)


def answer(body: dict[str, Any]) -> tuple[int, str]:
    return body["code"], body["message"]


def ids(body: dict[str, Any]) -> list[str]:
    assert body["code"] == 200, body
    return [task["id"] for task in body["data"]]


async def post_raw(api: Api, path: str, content: bytes) -> dict[str, Any]:
    headers = {"Authorization": api.token, "Content-Type": "application/json"}
    response = await api.client.post(path, content=content, headers=headers)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def enable_guest(api: Api) -> None:
    admin = await api.login()
    users = (await api.get("/api/admin/user/list", token=admin))["data"]["content"]
    guest = next(found for found in users if found["role"] == 1)
    body = await api.post("/api/admin/user/update", {**guest, "disabled": False}, token=admin)
    assert body["code"] == 200, body


# -- the task JSON ----------------------------------------------------------------


async def test_an_undone_task_as_json(api: Api, gate: Gate) -> None:
    await api.as_admin()
    owner = await api.services.users.admin()
    task = await started(api, gate, owner)
    body = await api.get(f"{ADMIN}/undone")
    assert body["code"] == 200
    [shown] = body["data"]
    assert set(shown) == TASK_FIELDS
    assert shown["id"] == task.id and len(task.id) == 21
    assert shown["name"] == "copy [/a](/f) to [/b](/)"
    assert (shown["creator"], shown["creator_role"]) == ("admin", 2)
    assert (shown["state"], shown["status"], shown["error"]) == (1, "", "")
    assert shown["progress"] == 0 and isinstance(shown["progress"], int)
    assert shown["total_bytes"] == 40
    assert shown["start_time"].endswith("Z") and shown["end_time"] is None
    gate.contexts[task.id].set_progress(12.5)
    assert (await api.post(f"{ADMIN}/info", params={"tid": task.id}))["data"]["progress"] == 12.5
    assert (await api.get(f"{ADMIN}/done"))["data"] == []
    gate.finish(task.id)
    await settled(api.services, task.id)
    [done] = (await api.get(f"{ADMIN}/done"))["data"]
    assert (done["state"], done["progress"]) == (2, 100)
    assert isinstance(done["progress"], int)
    assert done["end_time"].endswith("Z")
    assert (await api.get(f"{ADMIN}/undone"))["data"] == []


async def test_a_task_without_creator(api: Api, gate: Gate) -> None:
    await api.as_admin()
    task = await started(api, gate, None)
    shown = (await api.post(f"{ADMIN}/info", params={"tid": task.id}))["data"]
    assert (shown["creator"], shown["creator_role"]) == ("", -1)
    gate.finish(task.id)


async def test_info_of_an_unknown_task(api: Api, gate: Gate) -> None:
    await api.as_admin()
    task = await finished(api, gate, None)
    assert answer(await api.post(f"{ADMIN}/info", params={"tid": "x" * 21})) == NOT_FOUND
    assert answer(await api.post(f"{ADMIN}/info")) == NOT_FOUND
    wrong_kind = await api.post("/api/admin/task/upload/info", params={"tid": task.id})
    assert answer(wrong_kind) == NOT_FOUND
    assert answer(await api.get("/api/admin/task/nonsense/undone"))[0] == 404


@pytest.mark.parametrize("kind", [k for k in TASK_KINDS if k not in ("copy", "upload")])
@pytest.mark.parametrize("base", ["/api/admin/task", "/api/task"])
async def test_kinds_without_runners_are_empty(api: Api, kind: str, base: str) -> None:
    await api.as_admin()
    assert (await api.get(f"{base}/{kind}/undone"))["data"] == []
    assert (await api.get(f"{base}/{kind}/done"))["data"] == []
    assert answer(await api.post(f"{base}/{kind}/info", params={"tid": "abc"})) == NOT_FOUND
    assert answer(await api.post(f"{base}/{kind}/clear_done")) == (200, "success")


# -- acting on one task -------------------------------------------------------------


async def test_cancel_a_running_task(api: Api, gate: Gate) -> None:
    await api.as_admin()
    task = await started(api, gate, await api.services.users.admin())
    body = await api.post(f"{ADMIN}/cancel", params={"tid": task.id})
    assert body == {"code": 200, "message": "success", "data": None}
    await settled(api.services, task.id)
    [shown] = (await api.get(f"{ADMIN}/done"))["data"]
    assert (shown["state"], shown["error"]) == (TaskState.CANCELED, "context canceled")
    assert gate.cancelled == [task.id]
    assert answer(await api.post(f"{ADMIN}/cancel", params={"tid": "nope"})) == NOT_FOUND


async def test_delete_a_finished_and_a_running_task(api: Api, gate: Gate) -> None:
    await api.as_admin()
    done = await finished(api, gate, None)
    running = await started(api, gate, None)
    assert answer(await api.post(f"{ADMIN}/delete", params={"tid": done.id})) == (200, "success")
    assert answer(await api.post(f"{ADMIN}/delete", params={"tid": running.id}))[0] == 200
    assert ids(await api.get(f"{ADMIN}/done")) == []
    assert ids(await api.get(f"{ADMIN}/undone")) == []
    assert gate.cancelled == [running.id]
    assert answer(await api.post(f"{ADMIN}/delete", params={"tid": done.id})) == NOT_FOUND


async def test_retry_a_failed_task(api: Api, gate: Gate) -> None:
    await api.as_admin()
    task = await finished(api, gate, None, error="network down")
    shown = (await api.post(f"{ADMIN}/info", params={"tid": task.id}))["data"]
    assert (shown["state"], shown["error"]) == (7, "network down")
    assert answer(await api.post(f"{ADMIN}/retry", params={"tid": task.id})) == (200, "success")
    assert await gate.next_start() == task.id
    assert ids(await api.get(f"{ADMIN}/undone")) == [task.id]
    gate.finish(task.id)
    assert (await settled(api.services, task.id)).state == TaskState.SUCCEEDED
    assert answer(await api.post(f"{ADMIN}/retry", params={"tid": "nope"})) == NOT_FOUND


# -- many at once ---------------------------------------------------------------------


async def test_cancel_some(api: Api, gate: Gate) -> None:
    await api.as_admin()
    tasks = [await started(api, gate, None) for _ in range(2)]
    body = await api.post(f"{ADMIN}/cancel_some", [tasks[0].id, "nope", tasks[1].id])
    assert body["code"] == 200
    assert body["data"] == {"nope": "task not found"}
    for task in tasks:
        assert (await settled(api.services, task.id)).state == TaskState.CANCELED
    assert (await api.post(f"{ADMIN}/cancel_some", []))["data"] == {}


async def test_delete_some(api: Api, gate: Gate) -> None:
    await api.as_admin()
    tasks = [await finished(api, gate, None) for _ in range(3)]
    body = await api.post(f"{ADMIN}/delete_some", [tasks[0].id, tasks[2].id])
    assert (body["code"], body["data"]) == (200, {})
    assert ids(await api.get(f"{ADMIN}/done")) == [tasks[1].id]


async def test_retry_some(api: Api, gate: Gate) -> None:
    await api.as_admin()
    failed = await finished(api, gate, None, error="boom")
    body = await api.post(f"{ADMIN}/retry_some", [failed.id, "gone"])
    assert body["data"] == {"gone": "task not found"}
    gate.finish(await gate.next_start())
    assert (await settled(api.services, failed.id)).state == TaskState.SUCCEEDED


@pytest.mark.parametrize("action", ["cancel_some", "delete_some", "retry_some"])
@pytest.mark.parametrize(
    "content",
    [b"not json", b'{"tid": "x"}', b"[1, 2]", b'"abc"', b"", b"null", b'["a", 3]'],
    ids=["garbage", "object", "numbers", "string", "empty", "null", "mixed"],
)
async def test_some_refuses_a_bad_body(api: Api, action: str, content: bytes) -> None:
    await api.as_admin()
    assert answer(await post_raw(api, f"{ADMIN}/{action}", content)) == BAD_FORMAT


async def test_clear_done_and_clear_succeeded(api: Api, gate: Gate) -> None:
    await api.as_admin()
    succeeded = await finished(api, gate, None)
    failed = await finished(api, gate, None, error="x")
    running = await started(api, gate, None)
    assert answer(await api.post(f"{ADMIN}/clear_succeeded")) == (200, "success")
    assert ids(await api.get(f"{ADMIN}/done")) == [failed.id]
    assert succeeded.id not in ids(await api.get(f"{ADMIN}/undone"))
    assert answer(await api.post(f"{ADMIN}/clear_done")) == (200, "success")
    assert ids(await api.get(f"{ADMIN}/done")) == []
    assert ids(await api.get(f"{ADMIN}/undone")) == [running.id]
    gate.finish(running.id)


async def test_retry_failed_retries_only_failed_tasks(api: Api, gate: Gate) -> None:
    await api.as_admin()
    succeeded = await finished(api, gate, None)
    failed = await finished(api, gate, None, error="x")
    assert answer(await api.post(f"{ADMIN}/retry_failed")) == (200, "success")
    assert await gate.next_start() == failed.id
    gate.finish(failed.id)
    await settled(api.services, failed.id)
    assert gate.runs == [succeeded.id, failed.id, failed.id]


# -- who may see what -------------------------------------------------------------------


async def test_a_user_sees_and_acts_on_own_tasks_only(api: Api, gate: Gate) -> None:
    alice, alice_token = await user(api, "alice")
    bob, _ = await user(api, "bob")
    mine = await started(api, gate, alice)
    theirs = await started(api, gate, bob)
    api.token = alice_token
    assert ids(await api.get(f"{USER}/undone")) == [mine.id]
    shown = (await api.post(f"{USER}/info", params={"tid": mine.id}))["data"]
    assert (shown["creator"], shown["creator_role"]) == ("alice", 0)
    for action in ("info", "cancel", "delete", "retry"):
        body = await api.post(f"{USER}/{action}", params={"tid": theirs.id})
        assert answer(body) == NOT_FOUND, action
    body = await api.post(f"{USER}/cancel_some", [theirs.id, mine.id])
    assert body["data"] == {theirs.id: "task not found"}
    await settled(api.services, mine.id)
    await api.post(f"{USER}/clear_done")
    assert api.services.tasks.get(theirs.id).state == TaskState.RUNNING
    assert ids(await api.get(f"{USER}/done")) == []

    api.token = await api.login()
    assert ids(await api.get(f"{USER}/undone")) == [theirs.id]
    assert ids(await api.get(f"{ADMIN}/undone")) == [theirs.id]
    gate.finish(theirs.id)
    await settled(api.services, theirs.id)


async def test_a_new_user_does_not_inherit_a_deleted_users_tasks(api: Api, gate: Gate) -> None:
    # SQLite hands a deleted user's id to the next user made.
    dave, _ = await user(api, "dave")
    failed = await finished(api, gate, dave, error="dave's private reason")
    admin = await api.login()
    body = await api.post("/api/admin/user/delete", params={"id": dave.id}, token=admin)
    assert body["code"] == 200, body
    eve, eve_token = await user(api, "eve")
    api.token = eve_token
    assert ids(await api.get(f"{USER}/done")) == []
    for action in ("info", "retry", "delete"):
        body = await api.post(f"{USER}/{action}", params={"tid": failed.id})
        assert answer(body) == NOT_FOUND, (action, eve.id == dave.id)
    api.token = admin
    assert ids(await api.get(f"{ADMIN}/done")) == [failed.id]
    # Nor does a retry run it as the new holder of the id, or as nobody in particular.
    assert answer(await api.post(f"{ADMIN}/retry", params={"tid": failed.id})) == (200, "success")
    retried = await settled(api.services, failed.id)
    assert retried.state == TaskState.FAILED


async def test_the_admin_mount_refuses_a_user(api: Api, gate: Gate) -> None:
    alice, token = await user(api, "alice")
    task = await started(api, gate, alice)
    not_admin = (403, "You are not an admin")
    assert answer(await api.get(f"{ADMIN}/undone", token=token)) == not_admin
    assert answer(await api.post(f"{ADMIN}/cancel", params={"tid": task.id}, token=token)) == (
        not_admin
    )
    assert api.services.tasks.get(task.id).state == TaskState.RUNNING
    gate.finish(task.id)


async def test_the_guest_is_refused(api: Api, gate: Gate) -> None:
    assert answer(await api.get(f"{USER}/undone", token=""))[0] == 401
    await enable_guest(api)
    assert (await api.get("/api/me", token=""))["data"]["username"] == "guest"
    guest = (403, "You are a guest")
    assert answer(await api.get(f"{USER}/undone", token="")) == guest
    assert answer(await api.post(f"{USER}/cancel_some", [], token="")) == guest
    assert answer(await api.get(f"{ADMIN}/undone", token="")) == (403, "You are not an admin")
