"""Helpers for the benchmarks: start Manifold and nginx on loopback, run wrk, read its numbers.

Every benchmark runs its peer in the same run on the same machine and prints ratios,
because absolute numbers on a shared machine mean little.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from manifold.drivers.rclone.process import RCLONE  # the pinned one, not Debian's

ROOT = Path(__file__).resolve().parent.parent
ADMIN_PASSWORD = "bench-admin-pw"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def manifold_server(data: Path, extra_env: dict[str, str] | None = None) -> Iterator[int]:
    port = free_port()
    env = {**os.environ, "MANIFOLD_ADMIN_PASSWORD": ADMIN_PASSWORD, "MANIFOLD_LOG_LEVEL": "warning"}
    env.update(extra_env or {})
    argv = [sys.executable, "-m", "manifold.cli", "server", "--data", str(data)]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL, cwd=ROOT
    )
    try:
        wait_for_port(port)
        yield port
    finally:
        stop(process)


NGINX_CONF = """
worker_processes 1;
daemon off;
pid {base}/nginx.pid;
error_log {base}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    client_body_temp_path {base}/body;
    proxy_temp_path {base}/proxy;
    fastcgi_temp_path {base}/fastcgi;
    uwsgi_temp_path {base}/uwsgi;
    scgi_temp_path {base}/scgi;
    default_type application/json;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        {extra}
    }}
}}
"""


@contextlib.contextmanager
def nginx_server(root: Path, extra: str = "") -> Iterator[int]:
    """nginx with one worker, as Manifold runs one process in these benchmarks."""
    port = free_port()
    base = Path(tempfile.mkdtemp(prefix="nginx-"))
    # nginx's workers drop root; they must be able to walk down to the files.
    for folder in (root, *root.parents):
        if folder == Path("/"):
            break
        folder.chmod(folder.stat().st_mode | 0o055)
    conf = base / "nginx.conf"
    conf.write_text(NGINX_CONF.format(base=base, port=port, root=root, extra=extra))
    process = subprocess.Popen(["nginx", "-c", str(conf), "-p", str(base)], start_new_session=True)
    try:
        wait_for_port(port)
        yield port
    finally:
        stop(process)


@contextlib.contextmanager
def rclone_serve(kind: str, root: Path, *flags: str) -> Iterator[int]:
    """``rclone serve KIND ROOT`` on a free loopback port, with ``flags``; its port."""
    port = free_port()
    argv = [RCLONE, "serve", kind, str(root), "--addr", f"127.0.0.1:{port}", *flags]
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        wait_for_port(port)
        yield port
    finally:
        stop(process)


def wrk(
    url: str, seconds: int = 5, connections: int = 32, script: str = "", header: str = ""
) -> float:
    """Requests per second that wrk measured (one thread: the machine has two cores)."""
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    if header:
        argv += ["-H", header]
    if script:
        argv += ["-s", script]
    out = subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if match is None:
        raise RuntimeError(f"wrk printed no rate:\n{out}")
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"wrk saw {errors.group(1)} failed responses for {url}")
    return float(match.group(1))


def http(method: str, url: str, body: object = None, token: str = "") -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", token)
    with urllib.request.urlopen(request, timeout=10) as response:
        return bytes(response.read())


def report(rows: list[tuple[str, float, float]]) -> None:
    print(f"{'endpoint':<28}{'manifold req/s':>16}{'nginx req/s':>14}{'ratio':>8}")
    for name, ours, peer in rows:
        print(f"{name:<28}{ours:>16.0f}{peer:>14.0f}{ours / peer:>8.2f}")


# --- helpers for benchmarks that watch the server process (bench_upload) --------------

MIB = 1024 * 1024


@contextlib.contextmanager
def manifold_process(
    data: Path, extra_env: dict[str, str] | None = None
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """As ``manifold_server``, also yielding the process, for measuring its memory."""
    port = free_port()
    env = {**os.environ, "MANIFOLD_ADMIN_PASSWORD": ADMIN_PASSWORD, "MANIFOLD_LOG_LEVEL": "warning"}
    env.update(extra_env or {})
    argv = [sys.executable, "-m", "manifold.cli", "server", "--data", str(data)]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL, cwd=ROOT
    )
    try:
        wait_for_port(port)
        yield port, process
    finally:
        stop(process)


def admin_token(base: str) -> str:
    login = {"username": "admin", "password": ADMIN_PASSWORD}
    token: str = json.loads(http("POST", f"{base}/api/auth/login", login))["data"]["token"]
    return token


def mount_local(base: str, token: str, mount_path: str, root: Path) -> None:
    """Create a Local storage serving ``root`` at ``mount_path``."""
    addition = json.dumps({"root_folder_path": str(root)})
    storage = {"mount_path": mount_path, "driver": "Local", "addition": addition}
    reply = json.loads(http("POST", f"{base}/api/admin/storage/create", storage, token))
    if reply["code"] != 200:
        raise RuntimeError(f"Manifold did not create the storage: {reply}")


def make_random_file(path: Path, size: int) -> None:
    """``size`` bytes: a random mebibyte repeated, so that nothing is sparse or all zeros."""
    block = os.urandom(MIB)
    with path.open("wb") as out:
        for _ in range(size // MIB):
            out.write(block)
        out.write(block[: size % MIB])


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants that are alive now."""
    found = [pid]
    for current in found:
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                found += [int(c) for c in (task / "children").read_text().split()]
    return found


def status_kib(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM), or 0 once the process is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def tree_kib(pid: int, field: str) -> int:
    """``field`` summed over ``pid`` and its descendants."""
    return sum(status_kib(p, field) for p in process_tree(pid))


def reset_peak(pid: int) -> bool:
    """Reset VmHWM of ``pid`` and its descendants to their current RSS; False if refused."""
    try:
        for p in process_tree(pid):
            Path(f"/proc/{p}/clear_refs").write_text("5")
    except OSError:
        return False
    return True
