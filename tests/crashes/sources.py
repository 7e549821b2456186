"""Slow sources for the crash tests, so that a kill lands while bytes are still arriving:
an FTP server (pyftpdlib) whose downloads are throttled, and an HTTP server that
trickles a file out. Either is made fast again (``fast``) once the test has crashed the
server, so the run that follows the restart ends soon.
"""

from __future__ import annotations

import http.server
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.fixtures.processes import Daemon, free_port, port_open

SLOW = 128 << 10  # bytes a second while slow
FAST = 64 << 20
USER, PASSWORD = "source", "source-pw-1"

# Each data connection reads its rate from ``limit`` beside the script, so a test can
# speed the server up without restarting it.
SCRIPT = """\
import sys
from pathlib import Path

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler, ThrottledDTPHandler
from pyftpdlib.servers import FTPServer

port, root, user, password, low, limit = sys.argv[1:7]


class Throttled(ThrottledDTPHandler):
    def __init__(self, sock, cmd_channel):
        self.write_limit = int(Path(limit).read_text())
        super().__init__(sock, cmd_channel)


authorizer = DummyAuthorizer()
authorizer.add_user(user, password, root, perm="elradfmwMT")
FTPHandler.authorizer = authorizer
FTPHandler.dtp_handler = Throttled
FTPHandler.passive_ports = range(int(low), int(low) + 100)
FTPServer(("127.0.0.1", int(port)), FTPHandler).serve_forever()
"""


class SlowFtp:
    """A throttled FTP server serving ``root``; ``addition`` mounts it as a storage."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        self.root = folder / "root"
        self.root.mkdir()
        self._limit = folder / "limit"
        self._limit.write_text(str(SLOW))
        script = folder / "slow_ftp.py"
        script.write_text(SCRIPT)
        self.port = free_port()
        low = str(20000 + self.port % 400 * 100)
        argv = [sys.executable, "-u", str(script), str(self.port), str(self.root), USER,
                PASSWORD, low, str(self._limit)]  # fmt: skip
        self.daemon = Daemon("slow ftp", argv, lambda: port_open(self.port), folder / "ftp.log")

    @property
    def addition(self) -> dict[str, str]:
        return {"address": f"127.0.0.1:{self.port}", "username": USER, "password": PASSWORD,
                "root_folder_path": "/", "encoding": ""}  # fmt: skip

    def fast(self) -> None:
        self._limit.write_text(str(FAST))


@contextmanager
def slow_ftp(folder: Path) -> Iterator[SlowFtp]:
    server = SlowFtp(folder)
    server.daemon.start()
    try:
        yield server
    finally:
        server.daemon.stop()


class Trickle(http.server.ThreadingHTTPServer):
    """Serves ``body`` at any path, ``rate`` bytes a second (``fast`` lifts that)."""

    daemon_threads = True

    def __init__(self, body: bytes) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.body = body
        self.rate = SLOW

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/big.bin"

    def fast(self) -> None:
        self.rate = FAST


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Trickle

    def do_GET(self) -> None:
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        step = 16 << 10
        for at in range(0, len(body), step):
            try:
                self.wfile.write(body[at : at + step])
            except OSError:
                return  # the server that fetched it died
            time.sleep(step / self.server.rate)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test's output is not the place."""


@contextmanager
def trickle(body: bytes) -> Iterator[Trickle]:
    server = Trickle(body)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
