"""Offline download speed: SimpleHttp fetching a file from a local nginx into a Local
storage (download, then the transfer task into the storage), against ``aria2c`` and
``curl`` fetching the same file into a folder, in one run; with Manifold's peak RSS
during the download. Target: Manifold >= 0.8x the faster peer, RSS flat.

Run: .venv/bin/python -m bench.bench_offline [--size-mib N] [--tries N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import (
    MIB,
    admin_token,
    http,
    make_random_file,
    manifold_process,
    mount_local,
    nginx_server,
    reset_peak,
    status_kib,
)


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def peers(url: str, work: Path, size: int) -> dict[str, float]:
    """Seconds for curl and aria2c to fetch ``url`` into ``work``."""
    seconds: dict[str, float] = {}
    out = work / "curl.bin"
    seconds["curl"] = timed(["curl", "-s", "-f", "-o", str(out), url])
    assert out.stat().st_size == size
    out.unlink()
    seconds["aria2c"] = timed(
        ["aria2c", "--quiet", "--no-conf", "--allow-overwrite=true", f"--dir={work}",
         "--out=aria2.bin", "--file-allocation=none", url]
    )  # fmt: skip
    assert (work / "aria2.bin").stat().st_size == size
    (work / "aria2.bin").unlink()
    return seconds


def manifold(
    base: str, token: str, url: str, target: Path, pid: int, size: int
) -> tuple[float, int]:
    """Seconds from the request to the file whole in the storage, and the peak RSS (KiB)."""
    reset_peak(pid)
    before = status_kib(pid, "VmRSS")
    body = {"urls": [url], "path": "/store", "tool": "SimpleHttp", "delete_policy": "delete_always"}
    started = time.perf_counter()
    reply = json.loads(http("POST", f"{base}/api/fs/add_offline_download", body, token))
    if reply["code"] != 200:
        raise RuntimeError(f"Manifold refused the download: {reply}")
    name = url.rsplit("/", 1)[-1]
    while True:
        done = json.loads(
            http("GET", f"{base}/api/admin/task/offline_download_transfer/done", token=token)
        )
        undone = json.loads(
            http("GET", f"{base}/api/admin/task/offline_download/undone", token=token)
        )
        finished = [t for t in done["data"] if t["name"].startswith("transfer [](/SimpleHttp/")]
        if finished and not undone["data"] and (target / name).exists():
            break
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    if finished[-1]["state"] != 2 or (target / name).stat().st_size != size:
        raise RuntimeError(f"the download failed: {finished[-1]}")
    (target / name).unlink()
    http("POST", f"{base}/api/admin/task/offline_download_transfer/clear_done", token=token)
    return elapsed, max(0, status_kib(pid, "VmHWM") - before)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--tries", type=int, default=2)
    args = parser.parse_args()
    size = args.size_mib * MIB
    work = Path(tempfile.mkdtemp(prefix="bench-offline-"))
    static, store, scratch = work / "static", work / "store", work / "scratch"
    for folder in (static, store, scratch):
        folder.mkdir()
    make_random_file(static / "big.bin", size)
    try:
        with nginx_server(static) as nginx_port, manifold_process(work / "data") as (port, process):
            url = f"http://127.0.0.1:{nginx_port}/big.bin"
            base = f"http://127.0.0.1:{port}"
            token = admin_token(base)
            mount_local(base, token, "/store", store)
            allow = [{"key": "offline_download_allow_private", "value": "true"}]
            http("POST", f"{base}/api/admin/setting/save", allow, token)
            best: dict[str, float] = {}
            peak = 0
            for _ in range(args.tries):
                for name, seconds in peers(url, scratch, size).items():
                    best[name] = min(best.get(name, seconds), seconds)
                seconds, grown = manifold(base, token, url, store, process.pid, size)
                best["manifold"] = min(best.get("manifold", seconds), seconds)
                peak = max(peak, grown)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    faster = min(best["curl"], best["aria2c"])
    print(f"{'fetcher':<12}{'seconds':>10}{'MiB/s':>10}")
    for name in ("manifold", "curl", "aria2c"):
        print(f"{name:<12}{best[name]:>10.2f}{args.size_mib / best[name]:>10.0f}")
    print(f"ratio manifold / faster peer: {faster / best['manifold']:.2f} (target >= 0.8)")
    print(f"Manifold RSS growth during a download: {peak / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
