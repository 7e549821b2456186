"""``manifold server --workers 2`` on the embedded SQLite: the workers share tokens,
changes, login counters and tasks as two instances do. The kernel hands each new
connection to either worker, so every check is made over several connections."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD
from tests.fixtures.processes import free_port
from tests.multi.conftest import (
    FTP_BYTES_PER_SECOND,
    LEASE_SECONDS,
    SOON,
    WAIT,
    WRITER,
    FtpServer,
    Node,
    manifold_daemon,
    wait_until,
    write_config,
)

PASSWORD = "worker-user-pw-1"
ROUNDS = 8  # connections per check, spread by the kernel over both workers
SUCCEEDED = 2


class Workers:
    def __init__(self, node: Node, data: Path, ftp: FtpServer, pid: int) -> None:
        self.node = node
        self.data = data
        self.ftp = ftp
        self.pid = pid
        self.admin = node.login("admin", ADMIN_PASSWORD)

    def everywhere(self, check: object) -> bool:
        """Whether ``check`` holds on ROUNDS new connections in a row."""
        return all(check() for _ in range(ROUNDS))  # type: ignore[operator]

    def user(self) -> str:
        name = "w" + secrets.token_hex(3)
        body = {"username": name, "password": PASSWORD, "base_path": "/", "permission": WRITER}
        self.node.ok("/api/admin/user/create", body, self.admin)
        return name

    def folder(self, files: dict[str, bytes]) -> str:
        name = "w" + secrets.token_hex(3)
        (self.ftp.root / name).mkdir()
        for file, data in files.items():
            (self.ftp.root / name / file).write_bytes(data)
        return name

    def owner_pid(self, task_id: str) -> int | None:
        """The pid of the worker holding the task's lease (host:pid/... in its row)."""
        with sqlite3.connect(self.data / "data.db") as db:
            row = db.execute("SELECT owner FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if not row or not row[0]:
            return None
        return int(row[0].split("/", 1)[0].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def workers(
    tmp_path_factory: pytest.TempPathFactory, throttled_ftp: FtpServer
) -> Iterator[Workers]:
    base = tmp_path_factory.mktemp("workers")
    port = free_port()
    write_config(base / "data", task_lease_seconds=LEASE_SECONDS, trusted_proxies=["127.0.0.1"])
    daemon = manifold_daemon("workers", base / "data", port, workers=2).start()
    try:
        assert daemon.proc is not None
        found = Workers(Node("workers", f"http://127.0.0.1:{port}"), base / "data",
                        throttled_ftp, daemon.proc.pid)  # fmt: skip
        found.node.ok("/api/admin/storage/create", throttled_ftp.storage("/ftp"), found.admin)
        wait_until(lambda: found.everywhere(lambda: found.node.shows("ftp", found.admin)),
                   SOON * 5, "the storage in both workers")  # fmt: skip
        yield found
    finally:
        daemon.stop()


def test_a_token_works_on_every_worker_until_logged_out(workers: Workers) -> None:
    name = workers.user()
    token = workers.node.login(name, PASSWORD)
    assert workers.everywhere(lambda: workers.node.ok("/api/me", token=token)["username"] == name)
    workers.node.ok("/api/auth/logout", token=token)
    # Without Redis the other worker hears of it at its next poll of the database.
    refused = lambda: workers.everywhere(  # noqa: E731
        lambda: workers.node.call("/api/me", token=token)["code"] == 401
    )
    wait_until(refused, SOON, "the token refused by every worker")


def test_a_rename_and_a_setting_reach_every_worker(workers: Workers) -> None:
    folder = "/ftp/" + workers.folder({"one.txt": b"1"})
    node, admin = workers.node, workers.admin
    assert workers.everywhere(lambda: node.names(folder, admin) == ["one.txt"])  # warm
    node.ok("/api/fs/rename", {"path": f"{folder}/one.txt", "name": "uno.txt"}, admin)
    seen = lambda: workers.everywhere(lambda: node.names(folder, admin) == ["uno.txt"])  # noqa: E731
    wait_until(seen, SOON, "the new name in every worker")
    title = "Workers " + secrets.token_hex(3)
    node.ok("/api/admin/setting/save", [{"key": "site_title", "value": title}], admin)
    shown = lambda: workers.everywhere(  # noqa: E731
        lambda: node.ok("/api/public/settings")["site_title"] == title
    )
    wait_until(shown, SOON, "the new title in every worker")


def test_five_wrong_passwords_over_the_workers_lock_the_account(workers: Workers) -> None:
    name = workers.user()
    attacker = Node("workers", workers.node.base, client="10.23.0.1")
    wrong = {"username": name, "password": "not-the-password"}
    for _ in range(5):
        assert attacker.call("/api/auth/login", wrong)["code"] == 400
    right = {"username": name, "password": PASSWORD}
    assert workers.everywhere(lambda: attacker.call("/api/auth/login", right)["code"] == 429)
    stranger = Node("workers", workers.node.base, client="10.23.0.2")
    assert workers.everywhere(lambda: stranger.call("/api/auth/login", right)["code"] == 429)


def test_a_copy_whose_worker_is_killed_is_finished(workers: Workers, tmp_path: Path) -> None:
    data = os.urandom(3 * FTP_BYTES_PER_SECOND)
    source = workers.folder({"big.bin": data})
    (tmp_path / "target").mkdir()
    node, admin = workers.node, workers.admin
    body = {"mount_path": "/target", "driver": "Local",
            "addition": json.dumps({"root_folder_path": str(tmp_path / "target")})}  # fmt: skip
    node.ok("/api/admin/storage/create", body, admin)
    copy = {"src_dir": f"/ftp/{source}", "dst_dir": "/target", "names": ["big.bin"]}
    wait_until(lambda: node.call("/api/fs/copy", copy, admin)["code"] == 200, SOON * 5,
               "the target storage in the worker that copies")  # fmt: skip
    (task,) = [
        t for t in node.ok("/api/admin/task/copy/undone", token=admin) if source in t["name"]
    ]

    def under_way() -> bool:
        info = node.ok(f"/api/admin/task/copy/info?tid={task['id']}", {}, admin)
        return bool(info["state"] == 1 and info["progress"] > 0)

    wait_until(under_way, WAIT, "the copy under way")
    owner = workers.owner_pid(task["id"])
    assert owner is not None
    os.kill(owner, signal.SIGKILL)

    def done() -> bool:
        info = node.ok(f"/api/admin/task/copy/info?tid={task['id']}", {}, admin)
        assert info["state"] in (0, 1, 8, 9, SUCCEEDED), info
        return bool(info["state"] == SUCCEEDED)

    wait_until(done, WAIT, "the copy finished by the other worker")
    copied = (tmp_path / "target" / "big.bin").read_bytes()
    assert hashlib.sha256(copied).digest() == hashlib.sha256(data).digest()
    assert workers.ftp.reads(f"{source}/big.bin") == [False, True]
    assert workers.owner_pid(task["id"]) != owner
