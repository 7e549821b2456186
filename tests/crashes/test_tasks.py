"""A server killed (SIGKILL) while a task writes: a copy, a move, an archive extraction
and an offline download, each reading from a slow source. Started again on the same
data folder, the task runs again (or fails with a reason) at once rather than staying
"running" for a process that is gone; nothing partial is left under a real name or in
the data folder's temporary areas."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from manifold.models import TaskState
from manifold.paths import RESERVED_PREFIX
from tests.crashes.harness import Node, after_restart, arriving, running, wait_for
from tests.crashes.sources import SlowFtp, slow_ftp, trickle

BODY = bytes(range(256)) * (8 << 10)  # 2 MiB, 16 s at the slow rate
NAME = "big.bin"
# Longer than any test: a task of the killed process is taken over because its
# process is gone, not because its lease ran out.
LEASE = 3600
DONE = {int(TaskState.SUCCEEDED), int(TaskState.FAILED), int(TaskState.CANCELED)}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with running(tmp_path, task_lease_seconds=LEASE) as server:
        yield server


@pytest.fixture
def source(tmp_path: Path, node: Node) -> Iterator[SlowFtp]:
    """A slow FTP server holding ``NAME``, mounted at ``/src``."""
    with slow_ftp(tmp_path / "ftp") as server:
        (server.root / NAME).write_bytes(BODY)
        node.mount("/src", "FTP", server.addition)
        yield server


def settled(node: Node, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every task of ``kinds`` once none is left undone; each ended with a reason."""

    def quiet() -> list[dict[str, Any]] | None:
        if any(node.tasks(kind, "undone") for kind in kinds):
            return None
        return [task for kind in kinds for task in node.tasks(kind, "done")]

    tasks: list[dict[str, Any]] = wait_for(quiet, f"the {kinds} tasks to end")
    for task in tasks:
        assert task["state"] in DONE, task
        assert task["state"] == int(TaskState.SUCCEEDED) or task["error"], task
    return tasks


def restart(node: Node, *slow: Any) -> None:
    node.kill()
    for source in slow:
        source.fast()
    node.start()


def whole_or_none(node: Node, name: str, tasks: list[dict[str, Any]]) -> None:
    """``name`` is whole if every task succeeded, absent otherwise; and the checks of
    ``after_restart``, with the data folder's temporary areas empty."""
    after_restart(node, name, len(BODY))
    target = node.root / name
    if all(task["state"] == int(TaskState.SUCCEEDED) for task in tasks):
        assert target.read_bytes() == BODY
    else:
        assert not target.exists()
    assert node.temp_areas() == []


def test_copy_task(node: Node, source: SlowFtp) -> None:
    node.ok("/api/fs/copy", {"src_dir": "/src", "dst_dir": "/local", "names": [NAME]})
    arriving(node.root, f"{RESERVED_PREFIX}*")
    restart(node, source)
    whole_or_none(node, NAME, settled(node, ("copy",)))
    assert (source.root / NAME).read_bytes() == BODY


def test_move_task(node: Node, source: SlowFtp) -> None:
    node.ok("/api/fs/move", {"src_dir": "/src", "dst_dir": "/local", "names": [NAME]})
    arriving(node.root, f"{RESERVED_PREFIX}*")
    restart(node, source)
    tasks = settled(node, ("move",))
    whole_or_none(node, NAME, tasks)
    # The source goes only once the copy is whole: one of the two holds every byte.
    moved = (node.root / NAME).exists()
    assert (source.root / NAME).exists() != moved
    if not moved:
        assert (source.root / NAME).read_bytes() == BODY


def stored_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_archive_extraction(node: Node, source: SlowFtp) -> None:
    (source.root / "a.zip").write_bytes(stored_zip({NAME: BODY}))
    node.ok("/api/fs/mkdir", {"path": "/local/out"})
    body = {"src_dir": "/src", "dst_dir": "/local/out", "name": "a.zip"}
    node.ok("/api/fs/archive/decompress", body)
    arriving(node.data / "temp", "decompress-*/*", at_least=0)  # written in large blocks
    restart(node, source)
    tasks = settled(node, ("decompress", "decompress_upload"))
    whole_or_none(node, f"out/{NAME}", tasks)


def test_offline_download(node: Node) -> None:
    node.settings(offline_download_allow_private="true")
    with trickle(BODY) as server:
        body = {
            "urls": [server.url],
            "path": "/local",
            "tool": "SimpleHttp",
            "delete_policy": "delete_on_upload_succeed",
        }
        node.ok("/api/fs/add_offline_download", body)
        arriving(node.data / "temp" / "offline", "*")
        restart(node, server)
        tasks = settled(node, ("offline_download", "offline_download_transfer"))
    whole_or_none(node, NAME, tasks)
