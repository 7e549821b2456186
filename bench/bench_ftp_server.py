"""FTP download speed: a 1 GiB RETR through Manifold's FTP server against the same file
from nginx over HTTP (sendfile) and from ``rclone serve ftp`` (the FTP server of the peer
users would otherwise run), in one run, with curl, taking turns; and how much the
server's memory grew. Targets: Manifold >= 0.8x nginx and >= 1.0x rclone, RSS growth
< 64 MiB.

Run: .venv/bin/python -m bench.bench_ftp_server [--tries N] [--size-mib N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from bench.common import (
    MIB,
    admin_token,
    free_port,
    http,
    make_random_file,
    manifold_process,
    mount_local,
    nginx_server,
    rclone_serve,
    reset_peak,
    tree_kib,
    wait_for_port,
)

FTP_USER = {"username": "bench", "password": "bench-pw", "permission": 0xCFF}


def curl(url: str, expected: int) -> float:
    """Bytes per second of one download, checked for its size."""
    argv = ["curl", "-s", "-f", "-o", "/dev/null", "-w", "%{speed_download} %{size_download}"]
    out = subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout
    speed, size = out.split()
    if int(float(size)) != expected:
        raise RuntimeError(f"{url} sent {size} bytes, not {expected}")
    return float(speed)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=1024)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ftp-"))
    files = work / "files"
    files.mkdir()
    size = args.size_mib * MIB
    make_random_file(files / "big.bin", size)
    ftp_port = free_port()
    env = {"MANIFOLD_FTP_PORT": str(ftp_port)}
    with manifold_process(work / "data", env) as (port, process):
        wait_for_port(ftp_port)
        base = f"http://127.0.0.1:{port}"
        token = admin_token(base)
        mount_local(base, token, "/local", files)
        reply = json.loads(http("POST", f"{base}/api/admin/user/create", FTP_USER, token))
        if reply["code"] != 200:
            raise RuntimeError(f"Manifold did not create the user: {reply}")
        ours_url = f"ftp://bench:bench-pw@127.0.0.1:{ftp_port}/local/big.bin"
        curl(ours_url, size)  # warm: the storage's first listing, the page cache
        before = tree_kib(process.pid, "VmRSS")
        peak_reset = reset_peak(process.pid)
        ours: list[float] = []
        peer: list[float] = []
        rclone: list[float] = []
        login = ("--user", "bench", "--pass", "bench-pw")
        with nginx_server(files) as nginx_port, rclone_serve("ftp", files, *login) as rc_port:
            peer_url = f"http://127.0.0.1:{nginx_port}/big.bin"
            rclone_url = f"ftp://bench:bench-pw@127.0.0.1:{rc_port}/big.bin"
            curl(rclone_url, size)  # warm as Manifold was
            for _ in range(args.tries):
                ours.append(curl(ours_url, size))
                peer.append(curl(peer_url, size))
                rclone.append(curl(rclone_url, size))
        grown = (tree_kib(process.pid, "VmHWM" if peak_reset else "VmRSS") - before) / 1024
    best_ours, best_peer, best_rclone = max(ours), max(peer), max(rclone)
    print(f"{'download':<20}{'manifold MiB/s':>16}{'peer MiB/s':>14}{'ratio':>8}")
    for name, best in (("nginx", best_peer), ("rclone serve ftp", best_rclone)):
        print(
            f"{'RETR ' + str(args.size_mib) + ' MiB':<20}{best_ours / MIB:>16.0f}"
            f"{best / MIB:>14.0f}{best_ours / best:>8.2f}  vs {name}"
        )
    print(f"server RSS growth: {grown:.1f} MiB ({'peak' if peak_reset else 'after'})")


if __name__ == "__main__":
    main()
