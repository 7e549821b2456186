"""nginx serving a folder with ``autoindex on``: the HTTP file server that UrlTree's URLs
and AutoIndex's listings are read from in the tests. ``/moved/...`` redirects to the
same path without the prefix, and ``/other-host/...`` to the same file on another
address of the machine (``127.0.0.2``), for the redirect rules."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.fixtures.processes import Daemon, free_port, port_open

CONF = """\
{user}
worker_processes 1;
daemon off;
pid {base}/nginx.pid;
error_log {base}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {base}/body;
    proxy_temp_path {base}/proxy;
    fastcgi_temp_path {base}/fastcgi;
    uwsgi_temp_path {base}/uwsgi;
    scgi_temp_path {base}/scgi;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        listen 127.0.0.2:{port};
        root {root};
        autoindex on;
        {extra}
        location /moved/ {{ rewrite ^/moved/(.*)$ /$1 redirect; }}
        location /other-host/ {{
            rewrite ^/other-host/(.*)$ http://127.0.0.2:{port}/$1 redirect;
        }}
    }}
}}
"""


def nginx_daemon(root: Path, base: Path, extra: str = "") -> tuple[Daemon, str]:
    """nginx serving ``root`` (its files in ``base``), started, and its base URL; the
    daemon can be stopped and started again on the same port, to cut every connection."""
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    # Run as root (as the tests may be), nginx hands its workers to nobody, who cannot
    # read a test's private folders; they stay root then.
    user = "user root;" if os.geteuid() == 0 else ""
    conf = base / "nginx.conf"
    conf.write_text(CONF.format(user=user, base=base, port=port, root=root, extra=extra))
    argv = ["nginx", "-c", str(conf), "-p", str(base)]
    daemon = Daemon("nginx", argv, lambda: port_open(port), base / "nginx.out").start()
    return daemon, f"http://127.0.0.1:{port}"


@contextmanager
def nginx(root: Path, base: Path, extra: str = "") -> Iterator[str]:
    """nginx serving ``root`` (its files in ``base``); yields its base URL."""
    daemon, url = nginx_daemon(root, base, extra)
    try:
        yield url
    finally:
        daemon.stop()
