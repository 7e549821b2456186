"""``manifold server --workers N`` as a real process tree: one port, N processes,
a dead worker replaced, SIGTERM stopping them all; and the ``cluster`` refusal."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from manifold.cli import main
from tests.fixtures.processes import free_port, port_open

PASSWORD = "workers-pw-1"
WAIT = 60.0


def children(pid: int) -> set[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return {int(p) for p in found}


def serving(pid: int) -> set[int]:
    """The workers: children of the parent that answer as servers (not helpers)."""
    return {c for c in children(pid) if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()}


def connections_held(pid: int, port: int, state: str = "01") -> int:
    """How many sockets on local ``port`` process ``pid`` holds in ``state`` (the
    kernel's code: 01 established, 0A listening)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, found, inode = fields[1], fields[3], fields[9]
            if found == state and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{inode}]")
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            held += os.readlink(fd) in inodes
    return held


def listening(parent: int, port: int) -> int:
    """How many of ``parent``'s workers listen on ``port``."""
    workers = serving(parent)
    return sum(connections_held(pid, port, "0A") > 0 for pid in workers)


def wait_for(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "config.json").write_text(json.dumps({"metrics": "127.0.0.1"}))
    env = {
        **os.environ,
        "MANIFOLD_ADMIN_PASSWORD": PASSWORD,
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }
    command = [sys.executable, "-m", "manifold", "server", "--data", str(data),
               "--host", "127.0.0.1", "--port", str(port), "--workers", "2", "--no-ui"]  # fmt: skip
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: listening(process.pid, port) == 2, "two workers listening")
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()


def test_two_workers_serve_one_port_and_share_logins(
    two_workers: tuple[subprocess.Popen[bytes], int],
) -> None:
    port = two_workers[1]
    base = f"http://127.0.0.1:{port}"
    body = {"username": "admin", "password": PASSWORD}
    token = httpx.post(f"{base}/api/auth/login", json=body).json()["data"]["token"]
    # New connections each time: the kernel spreads them over both workers.
    for _ in range(10):
        me = httpx.get(f"{base}/api/me", headers={"Authorization": token}).json()
        assert me["data"]["username"] == "admin"
    metrics = httpx.get(f"{base}/metrics").text
    me_counter = 'manifold_http_requests_total{method="GET",route="/api/me"'
    counted = [line for line in metrics.splitlines() if line.startswith(me_counter)]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in counted) == 10


def test_connections_are_spread_over_the_workers(
    two_workers: tuple[subprocess.Popen[bytes], int],
) -> None:
    """On one listening socket shared by both, the worker that woke first took most of
    the connections waiting (80 of 100 here); each has a socket of its own now, and the
    kernel hands connections out by a hash of their addresses (below 30 of 100 for one:
    a chance of about 1 in 20,000)."""
    process, port = two_workers
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
    try:
        for conn in conns:
            conn.sendall(b"GET /api/public/settings HTTP/1.1\r\nHost: x\r\n\r\n")
        for conn in conns:
            assert conn.recv(12) == b"HTTP/1.1 200"
        held = sorted(connections_held(pid, port) for pid in serving(process.pid))
        assert sum(held) == 100, held
        assert held[0] >= 30, held
    finally:
        for conn in conns:
            conn.close()


def test_a_dead_worker_is_replaced_and_sigterm_stops_all(
    two_workers: tuple[subprocess.Popen[bytes], int],
) -> None:
    process, port = two_workers
    before = serving(process.pid)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: len(serving(process.pid)) == 2 and victim not in serving(process.pid),
             "a new worker")  # fmt: skip
    assert httpx.get(f"http://127.0.0.1:{port}/ping").text == "pong"
    workers = serving(process.pid)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=WAIT) == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    assert not port_open(port)


def test_cluster_without_a_server_database_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "config.json").write_text(json.dumps({"cluster": True}))
    assert main(["server", "--data", str(data), "--port", str(free_port())]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "server database" in err[0]
    (data / "config.json").write_text(
        json.dumps({"cluster": True, "database_url": "postgresql+asyncpg://u:p@127.0.0.1/x"})
    )
    assert main(["server", "--data", str(data), "--port", str(free_port())]) == 2
    assert "redis_url" in capsys.readouterr().err
