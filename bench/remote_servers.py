"""The remote servers ``bench_remote`` reads, each a process group on a loopback port:
S3 (moto_server), SFTP (OpenSSH sshd with key logins), WebDAV (wsgidav, anonymous) and
FTP (pyftpdlib), with the options a Manifold storage needs for each and an rclone
configuration that reaches the same servers.

The SFTP, WebDAV and FTP servers serve folders on this machine that hold hard links to
one filled folder, so all of them serve the same bytes without copies on the disk; S3
gets the same files uploaded by rclone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import process_tree
from manifold.drivers.rclone.process import RCLONE
from tests.fixtures.processes import Daemon, free_port, port_open

# The servers installed into the same environment as Manifold sit beside its interpreter.
BIN = Path(sys.executable).parent
SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = "/run/sshd"  # sshd refuses to start without it; Debian makes it at boot only
BUCKET = "bench"
S3_KEY_ID = "bench-key"
S3_SECRET = "bench-secret-key"
FTP_USER = "bench"
FTP_PASSWORD = "bench-ftp-pw"

FTP_SCRIPT = """
import logging
import sys

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer

port, root, user, password = sys.argv[1:5]
logging.basicConfig(level=logging.WARNING)
logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
authorizer = DummyAuthorizer()
authorizer.add_user(user, password, root, perm="elradfmwMT")
FTPHandler.authorizer = authorizer
FTPHandler.banner = "bench ftp"
server = FTPServer(("127.0.0.1", int(port)), FTPHandler)
server.max_cons = 512
server.serve_forever()
"""


@dataclass
class Backend:
    """One remote server as both sides see it."""

    key: str  # short name: s3, sftp, webdav, ftp
    driver: str  # Manifold's driver name
    remote: str  # rclone's path of the data root ("s3:bench", "ftp:")
    addition: dict[str, Any]  # the Manifold storage's options
    rclone_section: str  # this remote's part of rclone's config file
    root: Path | None = None  # the local folder the server serves (not for S3)
    daemon: Daemon | None = field(default=None, repr=False)

    @property
    def mount(self) -> str:
        # Not "/<key>": "/s3" is the S3 server's own path, refused as a mount.
        return f"/remote-{self.key}"

    def rclone_path(self, relative: str) -> str:
        if self.remote.endswith(":"):
            return self.remote + relative
        return f"{self.remote}/{relative}"


def _probe(port: int) -> bool:
    return port_open(port)


def _daemon(name: str, argv: list[str], port: int, work: Path) -> Daemon:
    return Daemon(name, argv, lambda: _probe(port), work / f"{name}.log", cwd=work)


def rclone_obscure(password: str) -> str:
    out = subprocess.run([RCLONE, "obscure", password], capture_output=True, text=True)
    out.check_returncode()
    return out.stdout.strip()


def _keygen(path: Path) -> None:
    argv = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)]
    subprocess.run(argv, check=True)


def _fingerprint(public_key: Path) -> str:
    argv = ["ssh-keygen", "-lf", str(public_key)]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split()[1]


def s3(work: Path) -> Backend:
    port = free_port()
    argv = [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    endpoint = f"http://127.0.0.1:{port}"
    addition = {
        "bucket": BUCKET,
        "endpoint": endpoint,
        "region": "us-east-1",
        "access_key_id": S3_KEY_ID,
        "secret_access_key": S3_SECRET,
        "force_path_style": True,
        "root_folder_path": "/",
    }
    section = (
        "[s3]\ntype = s3\nprovider = Other\n"
        f"access_key_id = {S3_KEY_ID}\nsecret_access_key = {S3_SECRET}\n"
        f"endpoint = {endpoint}\nregion = us-east-1\nforce_path_style = true\n"
    )
    backend = Backend("s3", "S3", f"s3:{BUCKET}", addition, section)
    backend.daemon = _daemon("moto", argv, port, work)
    return backend


def sftp(work: Path, root: Path) -> Backend:
    port = free_port()
    keys = work / "ssh"
    keys.mkdir()
    host_key, client_key = keys / "host_key", keys / "client_key"
    _keygen(host_key)
    _keygen(client_key)
    (keys / "authorized_keys").write_bytes(Path(f"{client_key}.pub").read_bytes())
    config = keys / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"PidFile {keys / 'sshd.pid'}\nAuthorizedKeysFile {keys / 'authorized_keys'}\n"
        "PermitRootLogin yes\nStrictModes no\nUsePAM no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "MaxStartups 100\nMaxSessions 100\nSubsystem sftp internal-sftp\n"
    )
    os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
    addition = {
        "address": f"127.0.0.1:{port}",
        "username": "root",
        "private_key": client_key.read_text(),
        "password": "",
        "root_folder_path": str(root),
        "host_key_fingerprint": _fingerprint(Path(f"{host_key}.pub")),
    }
    # No remote shell commands: rclone would otherwise hash every upload with md5sum
    # on the server, which Manifold does not do.
    section = (
        f"[sftp]\ntype = sftp\nhost = 127.0.0.1\nport = {port}\nuser = root\n"
        f"key_file = {client_key}\ndisable_hashcheck = true\nshell_type = none\n"
    )
    backend = Backend("sftp", "SFTP", f"sftp:{root}", addition, section, root)
    backend.daemon = _daemon("sshd", [SSHD, "-D", "-e", "-f", str(config)], port, work)
    return backend


def webdav(work: Path, root: Path) -> Backend:
    port = free_port()
    # wsgidav's defaults send files in 8 KiB blocks and log every request; a server that
    # is the bottleneck would hide any difference between its two clients.
    config = work / "wsgidav.json"
    settings = {
        "host": "127.0.0.1",
        "port": port,
        "provider_mapping": {"/": str(root)},
        "simple_dc": {"user_mapping": {"*": True}},
        "http_authenticator": {"domain_controller": None},
        "verbose": 1,
        "block_size": 1024 * 1024,
        "dir_browser": {"enable": False},
    }
    config.write_text(json.dumps(settings))
    argv = [str(BIN / "wsgidav"), "-c", str(config)]
    address = f"http://127.0.0.1:{port}/"
    addition = {
        "vendor": "other",
        "address": address,
        "username": "",
        "password": "",
        "root_folder_path": "/",
    }
    section = f"[webdav]\ntype = webdav\nurl = {address}\nvendor = other\n"
    backend = Backend("webdav", "WebDav", "webdav:", addition, section, root)
    backend.daemon = _daemon("wsgidav", argv, port, work)
    return backend


def ftp(work: Path, root: Path) -> Backend:
    port = free_port()
    script = work / "ftp_server.py"
    script.write_text(FTP_SCRIPT)
    argv = [sys.executable, str(script), str(port), str(root), FTP_USER, FTP_PASSWORD]
    addition = {
        "address": f"127.0.0.1:{port}",
        "username": FTP_USER,
        "password": FTP_PASSWORD,
        "encoding": "",
        "root_folder_path": "/",
    }
    section = (
        f"[ftp]\ntype = ftp\nhost = 127.0.0.1\nport = {port}\nuser = {FTP_USER}\n"
        f"pass = {rclone_obscure(FTP_PASSWORD)}\n"
    )
    backend = Backend("ftp", "FTP", "ftp:", addition, section, root)
    backend.daemon = _daemon("pyftpdlib", argv, port, work)
    return backend


def _stop(backend: Backend) -> None:
    daemon = backend.daemon
    if daemon is None or daemon.proc is None:
        return
    # sshd runs every connection in a session of its own, outside the group that
    # Daemon signals: stop the listener first so that it forks no more, then the rest.
    pid = daemon.proc.pid
    children = process_tree(pid)[1:]
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
    for child in process_tree(pid)[1:] + children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    daemon.stop()


MAKERS = {"s3": s3, "sftp": sftp, "webdav": webdav, "ftp": ftp}


@contextlib.contextmanager
def remote_servers(work: Path, source: Path, keys: list[str]) -> Iterator[dict[str, Backend]]:
    """Start the servers named by ``keys``; each file server serves a hard-linked copy of
    ``source``. Writes ``work/rclone.conf`` for all of them."""
    backends: dict[str, Backend] = {}
    try:
        for key in keys:
            if key == "s3":
                backend = s3(work)
            else:
                root = work / f"{key}-root"
                subprocess.run(["cp", "-al", str(source), str(root)], check=True)
                backend = MAKERS[key](work, root)  # type: ignore[operator]
            backends[key] = backend
            assert backend.daemon is not None
            backend.daemon.start()
        conf = "\n".join(b.rclone_section for b in backends.values())
        (work / "rclone.conf").write_text(conf)
        yield backends
    finally:
        for backend in backends.values():
            _stop(backend)
