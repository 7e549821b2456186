"""WebDAV: PROPFIND of a 10,000-entry folder (cold and warm) and a 1 GiB GET through
Manifold's /dav against ``rclone serve webdav`` on the same folders, in one run,
printing ratios, and the growth of Manifold's resident memory over the run.
Targets: PROPFIND >= 2x rclone warm and >= 1x cold; GET >= 0.8x; RSS growth < 64 MiB.

Run: .venv/bin/python -m bench.bench_dav [--entries N] [--size-mib N] [--tries N]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.common import (
    MIB,
    admin_token,
    free_port,
    http,
    make_random_file,
    manifold_process,
    mount_local,
    reset_peak,
    stop,
    tree_kib,
    wait_for_port,
)
from manifold.drivers.rclone.process import RCLONE

# What rclone's own webdav client asks for in a listing.
PROPFIND_BODY = (
    b'<?xml version="1.0"?><d:propfind xmlns:d="DAV:"><d:prop><d:displayname/>'
    b"<d:getlastmodified/><d:getcontentlength/><d:resourcetype/><d:getcontenttype/>"
    b"</d:prop></d:propfind>"
)
USER, PASSWORD = "bench", "bench-dav-pw"


@contextlib.contextmanager
def rclone_webdav(root: Path) -> Iterator[int]:
    port = free_port()
    argv = [RCLONE, "serve", "webdav", str(root), "--addr", f"127.0.0.1:{port}"]
    process = subprocess.Popen(argv, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield port
    finally:
        stop(process)


def propfind_seconds(client: httpx.Client, url: str, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    answer = client.request(
        "PROPFIND", url, content=PROPFIND_BODY, headers={**headers, "Depth": "1"}
    )
    elapsed = time.perf_counter() - started
    if answer.status_code != 207:
        raise RuntimeError(f"PROPFIND answered {answer.status_code}")
    return elapsed


def listing_times(url: str, headers: dict[str, str], tries: int) -> tuple[float, float]:
    """(cold, best warm) seconds of a PROPFIND, the first being the cold one."""
    with httpx.Client(timeout=300) as client:
        cold = propfind_seconds(client, url, headers)
        warm = min(propfind_seconds(client, url, headers) for _ in range(tries))
    return cold, warm


def get_speed(url: str, auth: str, tries: int) -> float:
    """Best bytes per second of downloading ``url`` with curl."""
    argv = ["curl", "-s", "-f", "-o", "/dev/null", "-w", "%{speed_download}"]
    if auth:
        argv += ["-u", auth]
    runs = [float(subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout)
            for _ in range(tries)]  # fmt: skip
    return max(runs)


def make_folder(folder: Path, entries: int) -> None:
    folder.mkdir(parents=True)
    for i in range(entries):
        (folder / f"file-{i:05d} name.txt").write_bytes(b"x" * (i % 100))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-dav-"))
    try:
        run(work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, args: argparse.Namespace) -> None:
    root = work / "root"
    make_folder(root / "many", args.entries)
    (root / "big").mkdir()
    make_random_file(root / "big" / "file.bin", args.size_mib * MIB)

    with manifold_process(work / "data") as (port, process):
        base = f"http://127.0.0.1:{port}"
        token = admin_token(base)
        mount_local(base, token, "/local", root)
        user = {"username": USER, "password": PASSWORD, "permission": 0x3FFF}
        http("POST", f"{base}/api/admin/user/create", user, token)
        before = tree_kib(process.pid, "VmRSS")
        reset_peak(process.pid)
        pair = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        headers = {"Authorization": f"Basic {pair}"}
        ours_cold, ours_warm = listing_times(f"{base}/dav/local/many/", headers, args.tries)
        ours_get = get_speed(f"{base}/dav/local/big/file.bin", f"{USER}:{PASSWORD}", args.tries)
        peak = tree_kib(process.pid, "VmHWM")
    with rclone_webdav(root) as port:
        base = f"http://127.0.0.1:{port}"
        peer_cold, peer_warm = listing_times(f"{base}/many/", {}, args.tries)
        peer_get = get_speed(f"{base}/big/file.bin", "", args.tries)

    print(f"{'measure':<34}{'manifold':>12}{'rclone':>12}{'ratio':>8}")
    rows = [
        (f"PROPFIND {args.entries} entries, cold (s)", ours_cold, peer_cold, peer_cold / ours_cold),
        (f"PROPFIND {args.entries} entries, warm (s)", ours_warm, peer_warm, peer_warm / ours_warm),
        (f"GET {args.size_mib} MiB (MiB/s)", ours_get / MIB, peer_get / MIB, ours_get / peer_get),
    ]
    for name, ours, peer, ratio in rows:
        print(f"{name:<34}{ours:>12.3f}{peer:>12.3f}{ratio:>8.2f}")
    print(f"manifold RSS growth (peak - start): {(peak - before) / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
