"""Download speed: a 1 GiB file through Manifold's raw_url (/d/...?sign=...) against nginx
with sendfile serving the same file, in one run; full downloads and a 256 MiB range, best
of --tries each with curl, the two servers taking turns so that the machine's load meets
both alike. Target: Manifold >= 0.95x nginx.

Run: .venv/bin/python -m bench.bench_download [--tries N] [--size-mib N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.common import ADMIN_PASSWORD, http, manifold_server, nginx_server

MIB = 1024 * 1024
RANGE = f"0-{256 * MIB - 1}"


def make_file(path: Path, size: int) -> None:
    """`size` bytes: a random mebibyte repeated, so that nothing is sparse or all zeros."""
    block = os.urandom(MIB)
    with path.open("wb") as out:
        for _ in range(size // MIB):
            out.write(block)
        out.write(block[: size % MIB])


def curl(url: str, byte_range: str = "") -> tuple[float, float, int]:
    """Seconds, bytes per second and bytes received for one download."""
    argv = ["curl", "-s", "-f", "-o", "/dev/null"]
    argv += ["-w", "%{time_total} %{speed_download} %{size_download}"]
    if byte_range:
        argv += ["-r", byte_range]
    out = subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout
    seconds, speed, size = out.split()
    return float(seconds), float(speed), int(float(size))


def one(url: str, expected: int, byte_range: str = "") -> float:
    """Bytes per second of one download, checked for its size."""
    _seconds, speed, size = curl(url, byte_range)
    if size != expected:
        raise RuntimeError(f"{url} sent {size} bytes, not {expected}")
    return speed


def measure(urls: dict[str, str], tries: int, size: int) -> dict[str, dict[str, float]]:
    """Best speed per server and download kind; the servers take turns on every try, so
    that a change in the machine's load meets both alike."""
    kinds = {"full file": ("", size), "256 MiB range": (RANGE, min(size, 256 * MIB))}
    for url in urls.values():
        curl(url, RANGE)  # warm-up: connection set-up, caches on the server side
    speeds: dict[str, dict[str, float]] = {server: {} for server in urls}
    for kind, (byte_range, expected) in kinds.items():
        for _ in range(tries):
            for server, url in urls.items():
                speed = one(url, expected, byte_range)
                speeds[server][kind] = max(speeds[server].get(kind, 0.0), speed)
    return speeds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--size-mib", type=int, default=1024)
    args = parser.parse_args()
    size = args.size_mib * MIB
    work = Path(tempfile.mkdtemp(prefix="bench-download-"))
    files = work / "files"
    files.mkdir()
    try:
        make_file(files / "big.bin", size)
        with manifold_server(work / "data") as port:
            base = f"http://127.0.0.1:{port}"
            login = {"username": "admin", "password": ADMIN_PASSWORD}
            token = json.loads(http("POST", f"{base}/api/auth/login", login))["data"]["token"]
            addition = json.dumps({"root_folder_path": str(files)})
            storage = {"mount_path": "/local", "driver": "Local", "addition": addition}
            reply = json.loads(http("POST", f"{base}/api/admin/storage/create", storage, token))
            if reply["code"] != 200:
                raise RuntimeError(f"Manifold did not create the storage: {reply}")
            got = json.loads(http("POST", f"{base}/api/fs/get", {"path": "/local/big.bin"}, token))
            url = got["data"]["raw_url"]
            with nginx_server(files) as nginx_port:
                nginx_url = f"http://127.0.0.1:{nginx_port}/big.bin"
                speeds = measure({"manifold": url, "nginx": nginx_url}, args.tries, size)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.size_mib} MiB file, best of {args.tries}, curl to /dev/null")
    print(f"{'download':<20}{'manifold MB/s':>16}{'nginx MB/s':>14}{'ratio':>8}")
    ours, peer = speeds["manifold"], speeds["nginx"]
    for name, speed in ours.items():
        print(f"{name:<20}{speed / 1e6:>16.0f}{peer[name] / 1e6:>14.0f}{speed / peer[name]:>8.2f}")
    print("(ratio = Manifold / nginx; target >= 0.95)")


if __name__ == "__main__":
    main()
