"""A real ``manifold server`` process on a data folder of its own, killed with SIGKILL
mid-write and started again on the same folder; and what the crash tests check after.

``Node`` owns the data folder, a Local storage's folder (``root``, mounted at
``/local``) and the ports of every protocol server; ``kill`` is a crash (the whole
process group at once), ``start`` brings the server back on the same folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from manifold.paths import RESERVED_PREFIX
from tests.fixtures.processes import Daemon, free_port, port_open

PASSWORD = "crash-admin-pw-1"
# A user of every front end (the admin's default bits leave out WebDAV and FTP, as AList's).
USER, USER_PASSWORD = "writer", "crash-writer-pw-1"
WAIT = 90.0  # seconds: a loaded machine is slow, never this slow
S3_KEY_ID = "crash-key"
S3_SECRET = "crash-secret-0123456789abcdef"
BUCKET = "files"


def wait_for(check: Callable[[], object], what: str, seconds: float = WAIT) -> Any:
    """``check()``'s first true answer; fails the test after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def landed(folder: Path, at_least: int, pattern: str = "*") -> Path | None:
    """A file under ``folder`` (any depth) matching ``pattern`` and holding
    ``at_least`` bytes, if one does."""
    for path in folder.rglob(pattern):
        try:
            if path.is_file() and path.stat().st_size >= at_least:
                return path
        except FileNotFoundError:
            continue
    return None


def arriving(folder: Path, pattern: str, at_least: int = 256 << 10) -> Path:
    """``landed``, waited for."""
    found: Path = wait_for(
        lambda: landed(folder, at_least, pattern), f"bytes arriving in {folder}/**/{pattern}"
    )
    return found


@contextlib.contextmanager
def running(folder: Path, **config: object) -> Iterator[Node]:
    """A server on ``folder`` with its Local storage mounted, stopped at the end."""
    server = Node(folder, **config)
    server.start()
    server.mount_local()
    try:
        yield server
    finally:
        server.stop()


def temporaries(folder: Path) -> list[Path]:
    """Every entry under ``folder`` named with the reserved prefix."""
    return [p for p in folder.rglob("*") if p.name.casefold().startswith(RESERVED_PREFIX)]


class Node:
    """One server's data folder and storage folder, across its starts."""

    def __init__(self, folder: Path, **config: object) -> None:
        self.data = folder / "data"
        self.data.mkdir(mode=0o700)
        self.root = folder / "root"
        self.root.mkdir()
        self.port, self.ftp_port = free_port(), free_port()
        self.sftp_port, self.s3_port = free_port(), free_port()
        config |= {
            "ftp_port": self.ftp_port,
            "sftp_port": self.sftp_port,
            "s3_port": self.s3_port,
            "shutdown_seconds": 2,
        }
        (self.data / "config.json").write_text(json.dumps(config))
        env = {**os.environ, "MANIFOLD_ADMIN_PASSWORD": PASSWORD,
               "PYTHONPATH": str(Path(__file__).parents[2])}  # fmt: skip
        argv = [sys.executable, "-m", "manifold", "server", "--data", str(self.data),
                "--host", "127.0.0.1", "--port", str(self.port), "--no-ui"]  # fmt: skip
        self.daemon = Daemon("manifold", argv, self._ready, folder / "server.log", env=env)
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = ""

    def _ready(self) -> bool:
        ports = (self.port, self.ftp_port, self.sftp_port, self.s3_port)
        return all(port_open(port) for port in ports)

    def start(self) -> None:
        self.daemon.start()
        login = {"username": "admin", "password": PASSWORD}
        self.token = httpx.post(f"{self.base}/api/auth/login", json=login).json()["data"]["token"]

    def kill(self) -> None:
        """SIGKILL: no shutdown, no cleanup, as a crash or the OOM killer ends it."""
        self.daemon.kill()

    def stop(self) -> None:
        self.daemon.stop()

    def call(self, path: str, body: Any = None, method: str = "POST") -> dict[str, Any]:
        answer = httpx.request(method, self.base + path, json=body, timeout=WAIT,
                               headers={"Authorization": self.token})  # fmt: skip
        result: dict[str, Any] = answer.json()
        return result

    def ok(self, path: str, body: Any = None, method: str = "POST") -> Any:
        answer = self.call(path, body, method)
        assert answer["code"] == 200, answer
        return answer["data"]

    def mount(self, mount_path: str, driver: str, addition: dict[str, Any]) -> None:
        storage = {"mount_path": mount_path, "driver": driver, "addition": json.dumps(addition)}
        self.ok("/api/admin/storage/create", storage)

    def mount_local(self) -> None:
        self.mount("/local", "Local", {"root_folder_path": str(self.root)})
        user = {"username": USER, "password": USER_PASSWORD, "base_path": "/",
                "permission": 0xFFFF}  # fmt: skip
        self.ok("/api/admin/user/create", user)

    def settings(self, **values: str) -> None:
        self.ok("/api/admin/setting/save", [{"key": k, "value": v} for k, v in values.items()])

    def listed(self, path: str) -> list[str]:
        content = self.ok("/api/fs/list", {"path": path, "refresh": True})["content"]
        return sorted(entry["name"] for entry in content or [])

    def get_code(self, path: str) -> int:
        return int(self.call("/api/fs/get", {"path": path})["code"])

    def tasks(self, kind: str, which: str) -> list[dict[str, Any]]:
        return list(self.ok(f"/api/task/{kind}/{which}", method="GET") or [])

    def raw(self, head: str) -> socket.socket:
        """A connection to the main port with ``head`` (a request's head) sent."""
        conn = socket.create_connection(("127.0.0.1", self.port))
        conn.sendall(head.encode())
        return conn

    def temp_areas(self) -> list[Path]:
        """What lies in the data folder's temporary folder, at any depth (empty folders
        of the layout aside)."""
        temp = self.data / "temp"
        return sorted(p for p in temp.rglob("*") if p.is_file()) if temp.exists() else []


def after_restart(node: Node, name: str, size: int) -> None:
    """What every crash test checks once the server runs again: no temporary is left
    in the storage's folder, none is served by its name, and ``name`` is either absent
    or whole (``size`` bytes) on disk and through the API alike."""
    assert temporaries(node.root) == []
    target = node.root / name
    if target.exists():
        assert target.stat().st_size == size
    folder = "/local/" + str(Path(name).parent).removeprefix(".")
    listed = node.listed(folder.rstrip("/"))
    assert all(not n.startswith(RESERVED_PREFIX) for n in listed), listed
    assert (target.name in listed) == target.exists()
    database_sound(node.data / "data.db")


def served_by_name(node: Node, temp: Path) -> bool:
    """Whether ``/api/fs/get`` of a temporary by its exact name answers other than for
    a name that is not there."""
    missing = node.call("/api/fs/get", {"path": "/local/no-such-name"})
    found = node.call("/api/fs/get", {"path": "/local/" + str(temp.relative_to(node.root))})
    return (found["code"], found["message"]) != (missing["code"], missing["message"])


def database_sound(path: Path) -> None:
    """SQLite's own check passes and no row points at what is gone."""
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def leftovers(node: Node) -> Iterator[Path]:
    """Temporaries in the data folder's temporary areas after a start."""
    yield from node.temp_areas()
