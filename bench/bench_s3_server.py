"""The S3 server's GET: a 1 GiB object through Manifold's S3 port against nginx (sendfile)
and ``rclone serve s3`` serving the same file, in one run, taking turns on every try;
best of --tries. Also the Manifold process's RSS growth over the downloads (its peak,
VmHWM, against its RSS before). Targets: S3 >= 0.8x nginx and >= 1.0x rclone; RSS
growth < 64 MiB.

Run: .venv/bin/python -m bench.bench_s3_server [--tries N] [--size-mib N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from bench.bench_download import one
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

BUCKET = "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=1024)
    args = parser.parse_args()
    os.environ["PATH"] = f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"
    work = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    try:
        run(work, args.tries, args.size_mib * MIB)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, tries: int, size: int) -> None:
    files = work / "files"
    files.mkdir()
    make_random_file(files / "big.bin", size)
    s3_port = free_port()
    env = {"MANIFOLD_S3_PORT": str(s3_port)}
    # rclone serves each folder of its root as a bucket: the files' folder is the bucket.
    served = contextlib.ExitStack()
    nginx = served.enter_context(nginx_server(files))
    rclone = served.enter_context(rclone_serve("s3", work))
    with served, manifold_process(work / "data", env) as (port, process):
        base = f"http://127.0.0.1:{port}"
        token = admin_token(base)
        mount_local(base, token, "/files", files)
        # No key pair: the S3 server then takes unsigned requests, which curl can send.
        buckets = json.dumps([{"name": BUCKET, "path": "/files"}])
        http(
            "POST",
            f"{base}/api/admin/setting/save",
            [{"key": "s3_buckets", "value": buckets}],
            token,
        )
        wait_for_port(s3_port)
        urls = {
            "manifold s3": f"http://127.0.0.1:{s3_port}/{BUCKET}/big.bin",
            "nginx": f"http://127.0.0.1:{nginx}/big.bin",
            "rclone s3": f"http://127.0.0.1:{rclone}/files/big.bin",
        }
        for url in urls.values():
            one(url, size)  # warm-up: the page cache, connection set-up
        before = tree_kib(process.pid, "VmRSS")
        measured_peak = reset_peak(process.pid)
        best = {name: 0.0 for name in urls}
        for _ in range(tries):
            for name, url in urls.items():
                best[name] = max(best[name], one(url, size))
        peak = tree_kib(process.pid, "VmHWM" if measured_peak else "VmRSS")
    for name, speed in best.items():
        print(f"{name:12s} {speed / MIB:9.1f} MiB/s")
    ratio = best["manifold s3"] / best["nginx"]
    growth = (peak - before) / 1024
    print(f"ratio s3/nginx: {ratio:.2f}x (target >= 0.8x)")
    versus_rclone = best["manifold s3"] / best["rclone s3"]
    print(f"ratio s3/rclone serve s3: {versus_rclone:.2f}x (target >= 1.0x)")
    kind = "peak" if measured_peak else "after"
    print(f"server RSS growth ({kind} - before): {growth:.1f} MiB (target < 64 MiB)")


if __name__ == "__main__":
    main()
