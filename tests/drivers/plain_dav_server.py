"""A small WebDAV back end for what wsgidav will not do on demand: a folder of any
number of entries, its answer streamed as it is written, and downloads that redirect.

Run as a script (``python -m tests.drivers.plain_dav_server PORT ENTRIES ELSEWHERE``):

* ``/big/`` lists ``ENTRIES`` files (``file-0000000.txt``...), the answer written a
  response at a time; ``GET /sent`` tells how many bytes of the last such answer went out
  before it ended or the client went away;
* ``/away.bin`` answers ``GET`` with a redirect to ``ELSEWHERE`` (another host);
* ``/near.bin`` answers ``GET`` with a redirect to ``/real.bin`` on this same server,
  which answers ``NEAR_BYTES``;
* ``/slow/`` is a folder whose ``DELETE`` answers after ``SLOW_DELETE`` seconds, as a
  server removing a big folder in one request does.

``secret_server`` serves ``SECRET`` at any path: the internal service a redirect must
not reach.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.fixtures.processes import Daemon, free_port, port_open

SECRET = b"internal-service-secret-0451"
NEAR_BYTES = b"the bytes of the file, fetched from the same host"
FILES = ("away.bin", "near.bin", "real.bin")
SLOW_DELETE = 4.0
_HEAD = b'<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">'
_FOLDER = (
    "<D:response><D:href>{href}</D:href><D:propstat><D:prop><D:resourcetype>"
    "<D:collection/></D:resourcetype></D:prop><D:status>HTTP/1.1 200 OK</D:status>"
    "</D:propstat></D:response>"
)
_FILE = (
    "<D:response><D:href>{href}</D:href><D:propstat><D:prop><D:resourcetype/>"
    "<D:getcontentlength>{size}</D:getcontentlength>"
    "<D:getlastmodified>Mon, 01 Jan 2024 00:00:00 GMT</D:getlastmodified>"
    '<D:getetag>"{size:x}"</D:getetag></D:prop><D:status>HTTP/1.1 200 OK</D:status>'
    "</D:propstat></D:response>"
)
_TAIL = b"</D:multistatus>"
# Responses written to the socket at once while streaming a big answer.
_BATCH = 500


@dataclass(slots=True)
class PlainDav:
    """A running back end: its URL and process."""

    url: str
    daemon: Daemon


def plain_dav(base: Path, entries: int, elsewhere: str) -> PlainDav:
    port = free_port()
    argv = [sys.executable, "-m", "tests.drivers.plain_dav_server", str(port), str(entries)]
    argv.append(elsewhere)
    root = Path(__file__).resolve().parents[2]
    daemon = Daemon("plain-dav", argv, lambda: port_open(port), base / "plain-dav.log", cwd=root)
    return PlainDav(f"http://127.0.0.1:{port}", daemon)


def secret_server(base: Path) -> PlainDav:
    port = free_port()
    argv = [sys.executable, "-m", "tests.drivers.plain_dav_server", str(port), "secret"]
    root = Path(__file__).resolve().parents[2]
    daemon = Daemon("secret", argv, lambda: port_open(port), base / "secret.log", cwd=root)
    return PlainDav(f"http://127.0.0.1:{port}", daemon)


def addition(url: str) -> dict[str, str]:
    """A WebDav storage's options for a plain server at ``url``."""
    return {
        "vendor": "other",
        "address": url,
        "username": "",
        "password": "",
        "root_folder_path": "/",
    }


def _big_answer(entries: int) -> Iterator[bytes]:
    yield _HEAD + _FOLDER.format(href="/big/").encode()
    for start in range(0, entries, _BATCH):
        names = range(start, min(entries, start + _BATCH))
        yield "".join(_FILE.format(href=f"/big/file-{i:07d}.txt", size=i) for i in names).encode()
    yield _TAIL


class _Dav(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    entries = 0
    elsewhere = ""
    sent = 0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_PROPFIND(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        depth = self.headers.get("Depth", "1")
        path = self.path.rstrip("/") or "/"
        if path == "/big" and depth == "1":
            self._stream(_big_answer(self.entries))
        elif path in ("/", "/big", "/slow"):
            self._answer(207, _HEAD + _FOLDER.format(href=path).encode() + _TAIL)
        elif path.lstrip("/") in FILES:
            size = len(NEAR_BYTES)
            self._answer(207, _HEAD + _FILE.format(href=path, size=size).encode() + _TAIL)
        else:
            self._answer(404, b"")

    def do_HEAD(self) -> None:
        self._answer(200 if self.path.lstrip("/") in FILES else 404, b"")

    def do_DELETE(self) -> None:
        if self.path.rstrip("/") == "/slow":
            time.sleep(SLOW_DELETE)
            self._answer(204, b"")
        else:
            self._answer(404, b"")

    def do_GET(self) -> None:
        if self.path == "/sent":
            self._answer(200, str(_Dav.sent).encode())
        elif self.path == "/away.bin":
            self._redirect(self.elsewhere)
        elif self.path == "/near.bin":
            self._redirect("/real.bin")
        elif self.path == "/real.bin":
            self._answer(200, NEAR_BYTES)
        else:
            self._answer(404, b"")

    def _redirect(self, where: str) -> None:
        self.send_response(302)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/xml; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _stream(self, pieces: Iterator[bytes]) -> None:
        """The answer in chunks, counting what went out until it ends or the client goes."""
        _Dav.sent = 0
        self.send_response(207)
        self.send_header("Content-Type", "application/xml; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for piece in pieces:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                _Dav.sent += len(piece)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True


class _Secret(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(SECRET)))
        self.end_headers()
        self.wfile.write(SECRET)


def main(argv: list[str]) -> None:
    port = int(argv[0])
    if argv[1] == "secret":
        handler: type[BaseHTTPRequestHandler] = _Secret
    else:
        _Dav.entries, _Dav.elsewhere = int(argv[1]), argv[2]
        handler = _Dav
    ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
