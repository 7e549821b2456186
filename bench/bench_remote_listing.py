"""A remote folder of 200,000 entries (about 70 MB of PROPFIND XML) listed through a
WebDav storage: the time of ``/api/fs/list`` with ``refresh``, the server's peak
resident memory during it, and the longest a ``/api/public/settings`` request from
another client waited meanwhile (the event loop held, if it grows to seconds).

The back end is the tests' plain WebDAV server, streaming its answer as it writes it.

Run: .venv/bin/python -m bench.bench_remote_listing [--entries N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench.common import MIB, admin_token, http, manifold_process, reset_peak, tree_kib
from tests.drivers.plain_dav_server import plain_dav


def _listed(base: str, token: str) -> dict[str, object]:
    """The first page of the refreshed listing (a long wait: the whole folder is read)."""
    body = json.dumps({"path": "/huge/big", "page": 1, "per_page": 50, "refresh": True})
    request = urllib.request.Request(f"{base}/api/fs/list", body.encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", token)
    with urllib.request.urlopen(request, timeout=600) as response:
        reply: dict[str, object] = json.loads(response.read())
    return reply


def _mount(base: str, token: str, url: str) -> None:
    addition = {"vendor": "other", "address": url, "username": "", "password": ""}
    addition["root_folder_path"] = "/"
    body = {"mount_path": "/huge", "driver": "WebDav", "addition": json.dumps(addition)}
    reply = json.loads(http("POST", f"{base}/api/admin/storage/create", body, token))
    if reply["code"] != 200:
        raise RuntimeError(f"Manifold did not create the storage: {reply}")


def _worst_wait(base: str, stop: threading.Event, worst: list[float]) -> None:
    """The longest a small request waited while ``stop`` is not set."""
    while not stop.is_set():
        start = time.monotonic()
        http("GET", f"{base}/api/public/settings")
        worst[0] = max(worst[0], time.monotonic() - start)
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200_000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-remote-listing-"))
    server = plain_dav(folder, args.entries, "http://127.0.0.1:9/")
    server.daemon.start()
    try:
        with manifold_process(folder / "data") as (port, process):
            base = f"http://127.0.0.1:{port}"
            token = admin_token(base)
            _mount(base, token, server.url)
            before = tree_kib(process.pid, "VmRSS")
            reset_peak(process.pid)
            stop, worst = threading.Event(), [0.0]
            pinger = threading.Thread(target=_worst_wait, args=(base, stop, worst))
            pinger.start()
            start = time.monotonic()
            reply = _listed(base, token)
            took = time.monotonic() - start
            stop.set()
            pinger.join()
            peak = tree_kib(process.pid, "VmHWM")
    finally:
        server.daemon.stop()
    data = reply.get("data")
    total = data.get("total") if isinstance(data, dict) else reply.get("message")
    print(f"{'entries':<10}{'listed':>10}{'seconds':>10}{'RSS before MiB':>16}", end="")
    print(f"{'peak MiB':>10}{'worst wait s':>14}")
    print(f"{args.entries:<10}{total!s:>10}{took:>10.2f}{before * 1024 / MIB:>16.0f}", end="")
    print(f"{peak * 1024 / MIB:>10.0f}{worst[0]:>14.2f}")


if __name__ == "__main__":
    main()
