"""The WebDAV servers the WebDav driver is tested against: wsgidav (anonymous, Basic,
Digest, optionally over TLS with a self-signed certificate) and rclone (Basic)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from manifold.drivers.rclone.process import RCLONE
from tests.fixtures.certs import self_signed
from tests.fixtures.processes import Daemon, free_port, port_open

WSGIDAV = str(Path(sys.executable).with_name("wsgidav"))
USER = "alice"
PASSWORD = "pa55 w:rd#secret"


@dataclass(slots=True)
class DavServer:
    """A running server: its URL, the folder it serves, the login it wants."""

    name: str
    url: str
    root: Path
    daemon: Daemon
    username: str = ""
    password: str = ""


def wsgidav(
    base: Path, auth: str = "anonymous", tls: bool = False, label: str = "", share: str = "/"
) -> DavServer:
    """wsgidav serving a fresh folder at ``share``; ``auth`` is anonymous, basic or digest."""
    folder = base / f"wsgidav-{auth}{'-tls' if tls else ''}{label}"
    root = folder / "root"
    root.mkdir(parents=True)
    port = free_port()
    if auth == "anonymous" and not tls and share == "/":
        argv = [WSGIDAV, "--host", "127.0.0.1", "--port", str(port), "--root", str(root)]
        argv += ["--auth", "anonymous", "--no-config"]
    else:
        config = folder / "wsgidav.yaml"
        # JSON is YAML: no YAML writer needed.
        config.write_text(json.dumps(_wsgidav_config(port, root, auth, tls, folder, share)))
        argv = [WSGIDAV, "--config", str(config)]
    scheme = "https" if tls else "http"
    daemon = Daemon(f"wsgidav-{auth}", argv, lambda: port_open(port), folder / "server.log")
    login = ("", "") if auth == "anonymous" else (USER, PASSWORD)
    url = f"{scheme}://127.0.0.1:{port}{share.rstrip('/')}"
    return DavServer(f"wsgidav-{auth}", url, root, daemon, *login)


def _wsgidav_config(
    port: int, root: Path, auth: str, tls: bool, folder: Path, share: str
) -> dict[str, object]:
    config: dict[str, object] = {
        "host": "127.0.0.1",
        "port": port,
        "provider_mapping": {share: str(root)},
        "verbose": 1,
        "honor_mtime_header": True,
    }
    if auth == "anonymous":
        config["simple_dc"] = {"user_mapping": {"*": True}}
    else:
        config["simple_dc"] = {"user_mapping": {"*": {USER: {"password": PASSWORD}}}}
        digest = auth == "digest"
        config["http_authenticator"] = {
            "accept_basic": not digest,
            "accept_digest": digest,
            "default_to_digest": digest,
        }
    if tls:
        cert, key = self_signed(folder)
        config["ssl_certificate"] = str(cert)
        config["ssl_private_key"] = str(key)
    return config


def rclone(base: Path) -> DavServer:
    """``rclone serve webdav`` with a Basic login."""
    folder = base / "rclone"
    root = folder / "root"
    root.mkdir(parents=True)
    port = free_port()
    argv = [RCLONE, "serve", "webdav", str(root)]
    argv += ["--addr", f"127.0.0.1:{port}", "--user", USER, "--pass", PASSWORD]
    env_home = {"HOME": str(folder), "PATH": "/usr/bin:/bin", "RCLONE_CONFIG": "/dev/null"}
    daemon = Daemon("rclone", argv, lambda: port_open(port), folder / "server.log", env=env_home)
    return DavServer("rclone", f"http://127.0.0.1:{port}", root, daemon, USER, PASSWORD)
