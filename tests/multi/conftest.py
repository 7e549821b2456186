"""Two real Manifold instances on one PostgreSQL and one Redis, behind nginx.

Started once per session: a private PostgreSQL and Redis, an FTP server whose
transfers are throttled (a storage both instances see, with cached listings, and
copies slow enough to kill an instance half-way through), instances ``a`` and ``b``
(``manifold server`` with the same database, Redis and JWT secret, ``cluster`` on,
each its own data folder) and nginx sending requests to them in turn.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD
from tests.fixtures.dbservers import have_postgres, start_postgres
from tests.fixtures.processes import Daemon, free_port, port_open
from tests.fixtures.redisserver import RedisServer

REPO = Path(__file__).resolve().parents[2]
FTP_USER, FTP_PASSWORD = "mf", "ftp-secret-pw"
FTP_BYTES_PER_SECOND = 256 * 1024
LEASE_SECONDS = 2
# Write, rename, move, copy and remove (AList's bits); no bit 1: folder passwords apply.
WRITER = (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7)
SOON = 1.0  # a change on one instance applies on the other within this
WAIT = 60.0  # only a guard against a hang

THROTTLED_FTP = """\
import logging
import sys

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler, ThrottledDTPHandler
from pyftpdlib.servers import FTPServer

port, root, user, password, low, rate = sys.argv[1:7]
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
ThrottledDTPHandler.read_limit = ThrottledDTPHandler.write_limit = int(rate)
authorizer = DummyAuthorizer()
authorizer.add_user(user, password, root, perm="elradfmwMT")
FTPHandler.authorizer = authorizer
FTPHandler.dtp_handler = ThrottledDTPHandler
FTPHandler.passive_ports = range(int(low), int(low) + 100)
FTPServer(("127.0.0.1", int(port)), FTPHandler).serve_forever()
"""

NGINX_CONF = """\
worker_processes 1;
daemon off;
pid {base}/nginx.pid;
error_log {base}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {base}/body;
    proxy_temp_path {base}/proxy;
    fastcgi_temp_path {base}/fastcgi;
    uwsgi_temp_path {base}/uwsgi;
    scgi_temp_path {base}/scgi;
    upstream manifold {{
{servers}
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 0;
        location / {{
            proxy_pass http://manifold;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_buffering off;
            proxy_request_buffering off;
        }}
    }}
}}
"""


def nginx_config(base: Path, port: int, upstreams: list[int]) -> str:
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in upstreams)
    return NGINX_CONF.format(base=base, port=port, servers=servers)


def start_nginx(base: Path, upstreams: list[int]) -> tuple[Daemon, int]:
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = base / "nginx.conf"
    conf.write_text(nginx_config(base, port, upstreams))
    argv = ["nginx", "-c", str(conf), "-p", str(base)]
    return Daemon("nginx", argv, lambda: port_open(port), base / "nginx.out").start(), port


def manifold_daemon(name: str, data: Path, port: int, workers: int = 1) -> Daemon:
    env = {**os.environ, "MANIFOLD_ADMIN_PASSWORD": ADMIN_PASSWORD, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "manifold", "server", "--data", str(data), "--no-ui",
            "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]  # fmt: skip
    return Daemon(name, argv, lambda: port_open(port), data.parent / f"{name}.log", env=env)


def write_config(data: Path, **values: Any) -> None:
    data.mkdir(mode=0o700, parents=True, exist_ok=True)
    (data / "config.json").write_text(json.dumps(values))


def wait_until(check: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``check`` until it holds; fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.02)


@dataclass
class Node:
    """One way in: an instance directly, or nginx in front of both."""

    name: str
    base: str
    # A client address for X-Forwarded-For (the instances trust loopback as a proxy).
    client: str = "127.0.0.1"

    def call(
        self, path: str, body: object = None, token: str = "", **headers: str
    ) -> dict[str, Any]:
        heads = {"X-Forwarded-For": self.client, **headers}
        if token:
            heads["Authorization"] = token
        # A new connection each time, so nginx's choice is its own, not a kept-alive one.
        if body is None:
            reply = httpx.get(self.base + path, headers=heads, timeout=30)
        else:
            reply = httpx.post(self.base + path, json=body, headers=heads, timeout=30)
        answer: dict[str, Any] = reply.json()
        return answer

    def ok(self, path: str, body: object = None, token: str = "") -> Any:
        answer = self.call(path, body, token)
        assert answer["code"] == 200, (self.name, path, answer)
        return answer["data"]

    def login(self, username: str, password: str) -> str:
        data = self.ok("/api/auth/login", {"username": username, "password": password})
        return str(data["token"])

    def shows(self, name: str, token: str) -> bool:
        """Whether ``name`` is among the root's entries (no storage at all: not)."""
        answer = self.call("/api/fs/list", {"path": "/", "per_page": 0}, token)
        content = answer["data"]["content"] if answer["code"] == 200 else []
        return any(entry["name"] == name for entry in content or [])

    def names(self, path: str, token: str, password: str = "") -> list[str]:
        body = {"path": path, "page": 1, "per_page": 0, "password": password}
        content = self.ok("/api/fs/list", body, token)["content"] or []
        return sorted(entry["name"] for entry in content)


@dataclass
class Cluster:
    a: Node
    b: Node
    lb: Node
    daemons: dict[str, Daemon]
    ftp: FtpServer
    admin: str = ""  # the admin's token
    made: list[str] = field(default_factory=list)

    @property
    def instances(self) -> tuple[Node, Node]:
        return self.a, self.b

    def unique(self, stem: str) -> str:
        name = f"{stem}{secrets.token_hex(3)}"
        self.made.append(name)
        return name

    def user(self, password: str, permission: int = WRITER) -> tuple[str, int]:
        """A new ordinary user on the whole tree; its name and id."""
        name = self.unique("u")
        body = {"username": name, "password": password, "base_path": "/",
                "permission": permission}  # fmt: skip
        self.a.ok("/api/admin/user/create", body, self.admin)
        users = self.a.ok("/api/admin/user/list?per_page=0", token=self.admin)["content"]
        (found,) = [u for u in users if u["username"] == name]
        return name, int(found["id"])


@dataclass(frozen=True)
class FtpServer:
    root: Path
    port: int
    log: Path

    def storage(self, mount_path: str) -> dict[str, Any]:
        """The body of a storage create call that mounts this server's root."""
        addition = {"address": f"127.0.0.1:{self.port}", "username": FTP_USER,
                    "password": FTP_PASSWORD, "root_folder_path": "/"}  # fmt: skip
        return {"mount_path": mount_path, "driver": "FTP", "addition": json.dumps(addition),
                "cache_expiration": 30}  # fmt: skip

    def reads(self, path: str) -> list[bool]:
        """For each download of ``path`` (relative to the root), whether it completed."""
        lines = self.log.read_text(errors="replace").splitlines()
        found = [line for line in lines if " RETR " in line and f"{self.root}/{path} " in line]
        return [" completed=1 " in line for line in found]


@pytest.fixture(scope="session")
def throttled_ftp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FtpServer]:
    """An FTP server sending and taking FTP_BYTES_PER_SECOND per transfer."""
    base = tmp_path_factory.mktemp("ftp")
    root = base / "files"
    root.mkdir()
    port, low = free_port(), free_port() // 2 + 20000
    script = base / "ftpd.py"
    script.write_text(THROTTLED_FTP)
    argv = [sys.executable, str(script), str(port), str(root), FTP_USER, FTP_PASSWORD,
            str(low), str(FTP_BYTES_PER_SECOND)]  # fmt: skip
    daemon = Daemon("ftp", argv, lambda: port_open(port), base / "ftp.log").start()
    yield FtpServer(root, port, base / "ftp.log")
    daemon.stop()


@contextlib.contextmanager
def running_cluster(base: Path, redis_url: str, ftp: FtpServer) -> Iterator[Cluster]:
    """Instances ``a`` and ``b`` on a new PostgreSQL in ``base`` and Redis at
    ``redis_url``, nginx before them, the admin logged in and ``ftp`` mounted."""
    if not have_postgres() or shutil.which("nginx") is None:
        pytest.fail("PostgreSQL or nginx is not installed: run the test command from README.md")
    postgres = start_postgres(base / "pg")
    daemons: dict[str, Daemon] = {}
    try:
        shared = {
            "database_url": postgres.url,
            "redis_url": redis_url,
            "jwt_secret": secrets.token_urlsafe(32),
            "cluster": True,
            "trusted_proxies": ["127.0.0.1"],
            "task_lease_seconds": LEASE_SECONDS,
        }
        ports = {}
        for name in ("a", "b"):  # one after the other: the first creates the tables
            ports[name] = free_port()
            write_config(base / name, **shared, instance_id=name)
            daemons[name] = manifold_daemon(name, base / name, ports[name]).start()
        daemons["nginx"], lb_port = start_nginx(base / "nginx", list(ports.values()))
        found = Cluster(
            Node("a", f"http://127.0.0.1:{ports['a']}"),
            Node("b", f"http://127.0.0.1:{ports['b']}"),
            Node("nginx", f"http://127.0.0.1:{lb_port}"),
            daemons,
            ftp,
        )
        found.admin = found.a.login("admin", ADMIN_PASSWORD)
        found.a.ok("/api/admin/storage/create", ftp.storage("/ftp"), found.admin)
        yield found
    finally:
        for daemon in daemons.values():
            daemon.stop()
        postgres.stop()


@pytest.fixture(scope="session")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
    redis_server: RedisServer,
    throttled_ftp: FtpServer,
) -> Iterator[Cluster]:
    with running_cluster(
        tmp_path_factory.mktemp("multi"), redis_server.url, throttled_ftp
    ) as found:
        yield found
