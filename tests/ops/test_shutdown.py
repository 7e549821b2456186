"""SIGTERM: requests under way finish within ``shutdown_seconds``; an upload still
unfinished at the deadline fails and leaves no file behind."""

from __future__ import annotations

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

from tests.fixtures.processes import free_port, port_open

PASSWORD = "shutdown-pw-1"
SIZE = 64 << 10


class Server:
    def __init__(self, process: subprocess.Popen[bytes], port: int, root: Path) -> None:
        self.process = process
        self.port = port
        self.root = root
        base = f"http://127.0.0.1:{port}"
        login = {"username": "admin", "password": PASSWORD}
        self.token = httpx.post(f"{base}/api/auth/login", json=login).json()["data"]["token"]
        storage = {"mount_path": "/local", "driver": "Local",
                   "addition": json.dumps({"root_folder_path": str(root)})}  # fmt: skip
        made = httpx.post(f"{base}/api/admin/storage/create", json=storage,
                          headers={"Authorization": self.token})  # fmt: skip
        assert made.json()["code"] == 200

    def start_upload(self, name: str) -> socket.socket:
        """An upload whose head and first half are sent; the rest is up to the test."""
        conn = socket.create_connection(("127.0.0.1", self.port))
        head = (f"PUT /api/fs/put HTTP/1.1\r\nHost: x\r\nAuthorization: {self.token}\r\n"
                f"File-Path: /local/{name}\r\nContent-Length: {SIZE}\r\n"
                "Content-Type: application/octet-stream\r\n\r\n")  # fmt: skip
        conn.sendall(head.encode() + b"a" * (SIZE // 2))
        return conn


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    port = free_port()
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "config.json").write_text(json.dumps({"shutdown_seconds": 3}))
    root = tmp_path / "root"
    root.mkdir()
    env = {**os.environ, "MANIFOLD_ADMIN_PASSWORD": PASSWORD,
           "PYTHONPATH": str(Path(__file__).parents[2])}  # fmt: skip
    command = [sys.executable, "-m", "manifold", "server", "--data", str(data),
               "--host", "127.0.0.1", "--port", str(port), "--no-ui"]  # fmt: skip
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not port_open(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        yield Server(process, port, root)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()


def test_uploads_under_way_finish_or_leave_nothing(server: Server) -> None:
    finishing = server.start_upload("finished.bin")
    stalled = server.start_upload("stalled.bin")
    time.sleep(0.5)  # both bodies are being read
    server.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert not port_open(server.port)  # no new connections once stopping
    # The first finishes within the deadline; the second is cut off at it.
    finishing.sendall(b"a" * (SIZE // 2))
    finishing.settimeout(30)
    answer = b""
    while chunk := finishing.recv(65536):  # the server closes once it answered
        answer += chunk
    assert b" 200 " in answer.split(b"\r\n", 1)[0]
    assert b'"code":200' in answer
    # uvicorn ends by raising the signal it caught again, once it has shut down.
    assert server.process.wait(timeout=60) in (0, -signal.SIGTERM)
    assert (server.root / "finished.bin").stat().st_size == SIZE
    assert sorted(p.name for p in server.root.iterdir()) == ["finished.bin"]
    finishing.close()
    stalled.close()
