"""Uploads: the memory a 2 GiB ``PUT /api/fs/put`` costs Manifold, and its speed against
nginx's WebDAV PUT of the same file, in one run.

Memory: Manifold's resident set (its process and any children) once idle, then sampled
every 50 ms while curl streams the file from disk; the kernel's own peak (VmHWM, reset
just before through /proc/<pid>/clear_refs) backs the samples up. Target: the peak no
more than 64 MiB above idle.

Speed: curl -T of the same file to Manifold (a Local storage) and to nginx
(``dav_methods PUT``, the body buffered on the same disk as the target), the two taking
turns, --tries times each; median MB/s. An upload's time ends when the server has
answered, so Manifold's fsync before its rename is inside it; nginx does not fsync, so a
second row adds the time an fsync of the stored file then takes, for both. The page
cache is written back between uploads, outside the timings. Target: Manifold >= 0.8x
nginx (first row).

Run: .venv/bin/python -m bench.bench_upload [--tries N] [--size-mib N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.common import (
    MIB,
    admin_token,
    make_random_file,
    manifold_process,
    mount_local,
    nginx_server,
    reset_peak,
    tree_kib,
)

RSS_TARGET_MIB = 64
RATIO_TARGET = 0.8
SAMPLE_SECONDS = 0.05

NGINX_DAV = """
        client_max_body_size 0;
        location /dav/ {{
            dav_methods PUT;
            client_body_temp_path {body};
            dav_access user:rw group:r all:r;
        }}
"""


class Sampler:
    """Samples the summed VmRSS of a process tree every 50 ms in a thread; keeps the max."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.peak_kib = max(self.peak_kib, tree_kib(self.pid, "VmRSS"))
            self.samples += 1
            if self._stop.wait(SAMPLE_SECONDS):
                return


def curl_put(url: str, source: Path, headers: dict[str, str]) -> tuple[float, str]:
    """Seconds for one upload of ``source`` and the server's answer."""
    argv = ["curl", "-sS", "-f", "-T", str(source), "-H", "Expect:", "-o", "-"]
    argv += ["-w", "\n%{time_total} %{size_upload}"]
    for name, value in headers.items():
        argv += ["-H", f"{name}: {value}"]
    out = subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout
    answer, _, stats = out.rpartition("\n")
    seconds, sent = stats.split()
    if int(float(sent)) != source.stat().st_size:
        raise RuntimeError(f"curl sent {sent} bytes to {url}, not {source.stat().st_size}")
    return float(seconds), answer


class Target:
    """One server to upload to: how to send the file there and where it lands."""

    def __init__(self, name: str, url: str, headers: dict[str, str], landed: Path) -> None:
        self.name = name
        self.url = url
        self.headers = headers
        self.landed = landed
        self.speeds: list[float] = []
        # Bytes per second until the stored file is on disk: the upload, then an fsync.
        self.durable_speeds: list[float] = []

    def upload(self, source: Path, keep: bool = True) -> None:
        """One upload, checked for what landed, its speeds kept if ``keep``; then cleaned up."""
        seconds, answer = curl_put(self.url, source, self.headers)
        if self.name == "manifold" and json.loads(answer)["code"] != 200:
            raise RuntimeError(f"Manifold refused the upload: {answer}")
        size = source.stat().st_size
        if self.landed.stat().st_size != size:
            raise RuntimeError(f"{self.name} stored {self.landed.stat().st_size} bytes")
        started = time.perf_counter()
        fd = os.open(self.landed, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        synced = time.perf_counter() - started
        if keep:
            self.speeds.append(size / seconds)
            self.durable_speeds.append(size / (seconds + synced))
        self.landed.unlink()
        os.sync()  # write back now, so the next upload does not pay for this one


def mib(kib: int) -> float:
    return kib / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=2048)
    args = parser.parse_args()
    size = args.size_mib * MIB
    work = Path(tempfile.mkdtemp(prefix="bench-upload-"))
    source = work / "source.bin"
    files, dav = work / "files", work / "www" / "dav"
    files.mkdir()
    dav.mkdir(parents=True)
    dav.chmod(0o777)  # nginx's worker writes here under its own user
    (work / "nginx-body").mkdir(mode=0o777)
    try:
        make_random_file(source, size)
        warm = work / "warm.bin"
        make_random_file(warm, 16 * MIB)
        os.sync()
        extra = NGINX_DAV.format(body=work / "nginx-body")
        with (
            manifold_process(work / "data") as (port, process),
            nginx_server(work / "www", extra) as nginx_port,
        ):
            base = f"http://127.0.0.1:{port}"
            token = admin_token(base)
            mount_local(base, token, "/local", files)
            ours = Target(
                "manifold",
                f"{base}/api/fs/put",
                {"Authorization": token, "File-Path": "/local/upload.bin"},
                files / "upload.bin",
            )
            peer = Target(
                "nginx", f"http://127.0.0.1:{nginx_port}/dav/upload.bin", {}, dav / "upload.bin"
            )
            for target in (ours, peer):
                target.upload(warm, keep=False)  # warm-up: imports, connection set-up, first writes
            time.sleep(1)
            idle_kib = tree_kib(process.pid, "VmRSS")
            hwm_reset = reset_peak(process.pid)
            sampled_kib = 0
            for attempt in range(args.tries):
                order = (ours, peer) if attempt % 2 == 0 else (peer, ours)
                for target in order:
                    if target is ours:
                        with Sampler(process.pid) as sampler:
                            ours.upload(source)
                        sampled_kib = max(sampled_kib, sampler.peak_kib)
                    else:
                        peer.upload(source)
            hwm_kib = tree_kib(process.pid, "VmHWM") if hwm_reset else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    peak_kib = max(sampled_kib, hwm_kib)
    delta = mib(peak_kib - idle_kib)
    verdict = "PASS" if delta < RSS_TARGET_MIB else "FAIL"
    print(f"{args.size_mib} MiB file, curl -T from disk, {args.tries} uploads to each server")
    print("manifold RSS (process and children, after a 16 MiB warm-up upload):")
    hwm = f"{mib(hwm_kib):.1f} MiB" if hwm_reset else "unavailable"
    print(f"  idle {mib(idle_kib):.1f} MiB, peak {mib(peak_kib):.1f} MiB", end="")
    print(f" (sampled every 50 ms: {mib(sampled_kib):.1f} MiB; VmHWM: {hwm})")
    print(f"  delta {delta:.1f} MiB: {verdict} (target < {RSS_TARGET_MIB} MiB above idle)")
    print(f"{'upload (median)':<28}{'manifold MB/s':>16}{'nginx MB/s':>14}{'ratio':>8}")
    rows = {
        "PUT, until answered": (ours.speeds, peer.speeds),
        "PUT, then fsync of file": (ours.durable_speeds, peer.durable_speeds),
    }
    for name, (our_runs, peer_runs) in rows.items():
        mine, theirs = statistics.median(our_runs), statistics.median(peer_runs)
        print(f"{name:<28}{mine / 1e6:>16.0f}{theirs / 1e6:>14.0f}{mine / theirs:>8.2f}")
    each = ", ".join(f"{s / 1e6:.0f}" for s in ours.speeds)
    peer_each = ", ".join(f"{s / 1e6:.0f}" for s in peer.speeds)
    print(f"  each run until answered, MB/s: manifold {each}; nginx {peer_each}")
    ratio = statistics.median(ours.speeds) / statistics.median(peer.speeds)
    verdict = "PASS" if ratio >= RATIO_TARGET else "FAIL"
    print(f"(ratio = Manifold / nginx until answered; target >= {RATIO_TARGET}: {verdict})")
    print("(Manifold fsyncs before answering, nginx does not: the second row compares both")
    print(" up to the data being on disk)")


if __name__ == "__main__":
    main()
