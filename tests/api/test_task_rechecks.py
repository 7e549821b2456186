"""A retried task runs only while its creator, as they are now, may do what it does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from manifold.models import Perm, Task, TaskState, User
from tests.api.fs_helpers import add_meta, make_tree, mount_local
from tests.conftest import Api
from tests.unit.test_tasks import Gate, settled

PASSWORD = "dora-pw-5521"
DENIED = (403, "permission denied")
ALL_BITS = int(Perm(0x3FFF))


@pytest.fixture
async def dora(api: Api, tmp_path: Path) -> tuple[User, str]:
    """Storages /one and /two; a general user with every bit, and her token."""
    await api.as_admin()
    await mount_local(api, "/one", make_tree(tmp_path / "one", {"a.txt": "alpha"}))
    await mount_local(api, "/two", make_tree(tmp_path / "two", {}))
    await api.make_user("dora", PASSWORD, permission=ALL_BITS, base_path="/")
    user = await api.services.users.by_name("dora")
    assert user is not None
    return user, await api.login("dora", PASSWORD)


async def failed(api: Api, kind: str, creator: User, payload: dict[str, Any]) -> Task:
    """A task of ``kind`` by ``creator`` that fails on every attempt."""
    task = await api.services.tasks.submit(kind, f"{kind} that fails", creator, payload)
    done = await api.services.tasks.wait_done(task.id)
    assert done.state == TaskState.FAILED, done
    return done


async def change(api: Api, user: User, **fields: Any) -> None:
    admin = await api.login()
    current = (await api.get("/api/admin/user/get", params={"id": user.id}, token=admin))["data"]
    body = await api.post("/api/admin/user/update", {**current, **fields}, token=admin)
    assert body["code"] == 200, body


async def retry(api: Api, kind: str, task: Task, token: str) -> tuple[int, str]:
    body = await api.post(f"/api/task/{kind}/retry", params={"tid": task.id}, token=token)
    return body["code"], body["message"]


KINDS = [
    ("copy", {"src": "/one/missing.txt", "dst_dir": "/two"}, Perm.COPY),
    ("upload", {"spool": "/nonexistent/spool", "path": "/two/up.txt", "size": 1}, Perm.WRITE),
    ("decompress", {"src": "/one/missing.zip", "dst_dir": "/two"}, Perm.DECOMPRESS),
    (
        "decompress_upload",
        {"file": "/nonexistent/x", "name": "x", "dst_dir": "/two", "in_place": False},
        Perm.DECOMPRESS,
    ),
    (
        "offline_download",
        {"url": "http://127.0.0.1:1/x", "dst_dir": "/two", "tool": "SimpleHttp", "policy": ""},
        Perm.OFFLINE_DOWNLOAD,
    ),
    (
        "offline_download_transfer",
        {"file": "/nonexistent/x", "name": "x", "dst_dir": "/two", "policy": ""},
        Perm.OFFLINE_DOWNLOAD,
    ),
]


@pytest.mark.parametrize(("kind", "payload", "bit"), KINDS, ids=[k[0] for k in KINDS])
async def test_a_retry_needs_the_bit_the_kind_needs_now(
    api: Api, dora: tuple[User, str], kind: str, payload: dict[str, Any], bit: Perm
) -> None:
    user, token = dora
    task = await failed(api, kind, user, payload)
    await change(api, user, permission=ALL_BITS & ~bit)
    assert await retry(api, kind, task, token) == DENIED
    assert api.services.tasks.get(task.id).state == TaskState.FAILED
    await change(api, user, permission=ALL_BITS)
    assert await retry(api, kind, task, token) == (200, "success")


@pytest.mark.parametrize("kind", ["copy", "upload", "offline_download"])
async def test_a_retry_stays_inside_the_base_path_of_now(
    api: Api, dora: tuple[User, str], kind: str
) -> None:
    user, token = dora
    payload = next(p for k, p, _ in KINDS if k == kind)
    task = await failed(api, kind, user, payload)
    await change(api, user, base_path="/one")
    code, _ = await retry(api, kind, task, token)
    assert code == 403
    assert api.services.tasks.get(task.id).state == TaskState.FAILED


async def test_a_copy_retried_runs_as_its_creator_is_now(
    api: Api, dora: tuple[User, str], tmp_path: Path
) -> None:
    user, token = dora
    task = await failed(api, "copy", user, {"src": "/one/late.txt", "dst_dir": "/two"})
    (tmp_path / "one" / "late.txt").write_text("late")
    await change(api, user, permission=ALL_BITS & ~Perm.COPY)
    body = await api.post("/api/task/copy/retry_failed", token=token)
    assert (body["code"], body["message"]) == DENIED
    await change(api, user, permission=ALL_BITS)
    assert await retry(api, "copy", task, token) == (200, "success")
    done = await api.services.tasks.wait_done(task.id)
    assert done.state == TaskState.SUCCEEDED, done.error
    assert (tmp_path / "two" / "late.txt").read_text() == "late"


@pytest.mark.parametrize("ending", ["disabled", "deleted"])
async def test_a_task_of_a_disabled_or_deleted_user_is_not_retried(
    api: Api, dora: tuple[User, str], ending: str
) -> None:
    user, _ = dora
    task = await failed(api, "copy", user, {"src": "/one/missing.txt", "dst_dir": "/two"})
    if ending == "disabled":
        await change(api, user, disabled=True)
    else:
        admin = await api.login()
        body = await api.post("/api/admin/user/delete", params={"id": user.id}, token=admin)
        assert body["code"] == 200, body
    admin = await api.login()
    body = await api.post("/api/admin/task/copy/retry", params={"tid": task.id}, token=admin)
    assert (body["code"], body["message"]) == DENIED
    assert api.services.tasks.get(task.id).state == TaskState.FAILED


async def test_an_automatic_retry_is_checked_again_too(api: Api, dora: tuple[User, str]) -> None:
    user, _ = dora
    gate = Gate()
    recheck = api.services.writer.task_recheck(Perm.COPY, "src", "dst_dir")
    api.services.tasks.register(
        "copy", gate, max_retry=1, threads_setting="copy_task_threads_num", recheck=recheck
    )
    payload = {"src": "/one/a.txt", "dst_dir": "/two"}
    task = await api.services.tasks.submit("copy", "copy [/one](/a.txt)", user, payload)
    assert await gate.next_start() == task.id
    await change(api, user, permission=ALL_BITS & ~Perm.COPY)
    gate.finish(task.id, "the first attempt failed")
    done = await settled(api.services, task.id)
    assert (done.state, done.error) == (TaskState.FAILED, "permission denied")
    assert gate.runs == [task.id]


@pytest.mark.parametrize("kind", ["decompress", "decompress_upload"])
async def test_an_extraction_into_a_password_folder_is_retried_with_the_requests_password(
    api: Api, dora: tuple[User, str], tmp_path: Path, kind: str
) -> None:
    """The folder password the request gave is the one its retry is checked with (not
    the archive's password, which the payload keeps under another key)."""
    user, token = dora
    await change(api, user, permission=ALL_BITS & ~Perm.ACCESS_WITHOUT_PASSWORD)
    (tmp_path / "two" / "locked").mkdir()
    await add_meta(api, "/two/locked", password="folder-pw", p_sub=True)
    payload = {
        **next(p for k, p, _ in KINDS if k == kind),
        "dst_dir": "/two/locked",
        "password": "archive-pw",
        "dst_password": "folder-pw",
    }
    task = await failed(api, kind, user, payload)
    assert await retry(api, kind, task, token) == (200, "success")
    without = await failed(api, kind, user, {**payload, "dst_password": ""})
    assert (await retry(api, kind, without, token))[0] == 403


async def test_a_copy_retried_without_overwrite_keeps_a_file_made_meanwhile(
    api: Api, dora: tuple[User, str], tmp_path: Path
) -> None:
    user, token = dora
    task = await failed(api, "copy", user, {"src": "/one/late.txt", "dst_dir": "/two"})
    (tmp_path / "one" / "late.txt").write_text("late")
    (tmp_path / "two" / "late.txt").write_text("made meanwhile")
    assert await retry(api, "copy", task, token) == (200, "success")
    await api.services.tasks.wait_done(task.id)
    assert (tmp_path / "two" / "late.txt").read_text() == "made meanwhile"
