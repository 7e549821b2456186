"""Moves between kinds of storage, each on its real server, as move tasks: the bytes
arrive whole and the source goes. A folder of S3 (which moves a key at a time) is
renamed as a move task whose progress rises while the request has long answered."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from manifold.models import TaskState
from tests.api.fs_helpers import fs_get, make_tree, mount_local, save_settings
from tests.api.test_copy_tasks import Gate, gate_source
from tests.api.test_move_tasks import settle
from tests.api.test_remote_matrix import (  # noqa: F401  (fixtures used by name)
    BUCKET,
    NOTE,
    PAYLOAD,
    download,
    fill,
    mounted,
    remote_manifold,
    s3,
    servers,
)
from tests.conftest import Api
from tests.drivers import s3_server

PAIRS = [
    ("local", "bucket"),
    ("bucket", "sftp"),
    ("sftp", "local"),
    ("webdav", "ftp"),
    ("smb", "alist"),
    ("ftp", "bucket"),
]
# Keys of the S3 folder renamed as a task: enough that a move holds the store for a
# while, few enough that the module stays quick on moto.
KEYS = 1000


@pytest.mark.parametrize(("source", "target"), PAIRS)
async def test_a_folder_moves_from_one_kind_to_another(
    api: Api,
    mounted: dict[str, str],  # noqa: F811
    source: str,
    target: str,
) -> None:
    await fill(api, mounted[source])
    body = {"src_dir": mounted[source], "dst_dir": mounted[target], "names": ["src"]}
    answer = await api.post("/api/fs/move", body)
    assert answer["code"] == 200, answer
    assert answer["data"]["message"] == "Successfully created 1 move task(s)"
    [task] = await settle(api)
    assert task.state == TaskState.SUCCEEDED, task.error
    assert task.total_bytes == len(PAYLOAD) + len(NOTE)
    assert await download(api, f"{mounted[target]}/src/a.bin") == PAYLOAD
    assert await download(api, f"{mounted[target]}/src/sub/b.txt") == NOTE
    gone = await fs_get(api, f"{mounted[source]}/src")
    assert gone["code"] == 500 and gone["message"].endswith("object not found"), gone


async def plant(server: s3_server.S3Server, prefix: str, count: int) -> None:
    """``count`` small keys below ``prefix``, put straight into the store."""
    for start in range(0, count, 50):
        batch = range(start, min(count, start + 50))
        await asyncio.gather(
            *(
                server.client.put_object(Bucket=BUCKET, Key=f"{prefix}k{i:04}", Body=b"%04d" % i)
                for i in batch
            )
        )


async def test_an_s3_folder_renamed_becomes_a_task_with_rising_progress(
    api: Api,
    mounted: dict[str, str],  # noqa: F811
    s3: s3_server.S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    run = mounted["bucket"].removeprefix("/bucket/")
    await plant(s3, f"{run}/big/", KEYS)
    # One move worker, held by a move through a gate: the rename's task can only wait
    # while the rename answers.
    await save_settings(api, move_task_threads_num="1")
    await mount_local(api, "/gated", make_tree(tmp_path / "gated", {"held.bin": "h"}))
    gate = Gate(tmp_path)
    gate_source(api.services, "/gated", gate)
    move = {"src_dir": "/gated", "dst_dir": mounted["local"], "names": ["held.bin"]}
    held = (await api.post("/api/fs/move", move))["data"]["tasks"][0]["id"]

    answer = await api.post("/api/fs/rename", {"path": f"{mounted['bucket']}/big", "name": "moved"})
    assert (answer["code"], answer["data"]) == (200, None), answer
    [waiting] = [
        t for t in (await api.get("/api/admin/task/move/undone"))["data"] if t["id"] != held
    ]
    assert waiting["name"] == f"move [/bucket](/{run}/big) to [/bucket](/{run}) as moved"
    assert waiting["state"] == TaskState.PENDING
    try:
        await gate.open()
        await gate.send(b"h")
    finally:
        gate.close()

    task = api.services.tasks.get(waiting["id"])
    seen = [task.progress]
    while seen[-1] == 0:
        await asyncio.sleep(0.01)
        seen.append(task.progress)
    with s3.daemon.paused():  # the store answers nothing: the progress holds still
        assert 0 < task.progress < 100
    while not task.done:
        await asyncio.sleep(0.02)
        seen.append(task.progress)
    assert task.state == TaskState.SUCCEEDED, task.error
    assert seen == sorted(seen) and task.progress == 100
    moved = [key for key in await s3.keys(BUCKET, f"{run}/moved/") if "/k" in key]
    assert len(moved) == KEYS
    assert await s3.keys(BUCKET, f"{run}/big/") == []
    assert await download(api, f"{mounted['bucket']}/moved/k0999") == b"0999"
