"""Directory listing: Manifold's /api/fs/list against rclone's rc /operations/list on the
same 10,000-entry local folder, in one run (sequential latency and wrk throughput), then
first-page and whole-listing times for a 100,000-entry folder, cold and warm.
Targets: 10,000 entries >= 1.5x rclone, and rescanned within 1.25x of a raw os.scandir
+ stat of the same folder timed in the same run; first page of 100,000 entries under
0.4 s cold. Without rclone or wrk installed, only the figures against the raw scan are
printed.

Manifold keeps a Local folder's scan for a few seconds (a snapshot, so that paging
does not rescan) while rclone scans on every request; the "rescanning" rows send
``refresh: true`` so that Manifold scans and renders on every request too.

The processor time the server spent (all its threads, from /proc) is printed beside
the raw scan's, which other work on a shared machine moves far less than wall time.

Run: .venv/bin/python -m bench.bench_list [--seconds N] [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.common import (
    ADMIN_PASSWORD,
    RCLONE,
    free_port,
    manifold_server,
    stop,
    wait_for_port,
    wrk,
)

POST_LUA = """
wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
%s
"""

# Name parts that give file names of the length real folders have (25-45 characters).
WORDS = ("holiday", "report", "invoice", "scan", "backup", "photo", "draft", "export")
SUFFIXES = (".jpg", ".pdf", ".mkv", ".txt", ".tar.gz", ".flac", ".docx")


def fill(folder: Path, count: int) -> None:
    """Create `count` zero-byte files with realistic names."""
    folder.mkdir(parents=True)
    for i in range(count):
        word = WORDS[i % len(WORDS)]
        suffix = SUFFIXES[i % len(SUFFIXES)]
        name = f"{word}_{2000 + i % 25}-{1 + i % 12:02d}-{1 + i % 28:02d}_{i:07d}_final{suffix}"
        os.close(os.open(folder / name, os.O_CREAT | os.O_WRONLY, 0o644))


def post(url: str, body: object, token: str = "") -> bytes:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", token)
    with urllib.request.urlopen(request, timeout=300) as response:
        return bytes(response.read())


def timed(url: str, body: object, token: str = "") -> tuple[float, bytes]:
    start = time.perf_counter()
    out = post(url, body, token)
    return time.perf_counter() - start, out


def manifold_ok(out: bytes) -> dict[str, object]:
    reply = json.loads(out)
    if reply.get("code") != 200:
        raise RuntimeError(f"Manifold answered {reply}")
    return dict(reply["data"] or {})


def sequential(url: str, body: object, repeat: int, token: str = "") -> float:
    """Mean seconds per request over `repeat` requests, after one warm-up request."""
    post(url, body, token)
    total = 0.0
    for _ in range(repeat):
        seconds, _out = timed(url, body, token)
        total += seconds
    return total / repeat


def lua(work: Path, name: str, body: object, token: str = "") -> str:
    header = f'wrk.headers["Authorization"] = "{token}"' if token else ""
    script = work / name
    script.write_text(POST_LUA % (json.dumps(body), header))
    return str(script)


@contextlib.contextmanager
def rclone_rcd(work: Path) -> Iterator[int]:
    port = free_port()
    config = work / "rclone.conf"
    config.touch()
    argv = [RCLONE, "rcd", "--rc-no-auth", f"--rc-addr=127.0.0.1:{port}"]
    argv += ["--config", str(config), "--cache-dir", str(work / "rclone-cache")]
    process = subprocess.Popen(
        argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port)
        yield port
    finally:
        stop(process)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-list-"))
    files = work / "files"
    try:
        started = time.perf_counter()
        fill(files / "ten", 10_000)
        fill(files / "hundred", 100_000)
        print(f"created 110,000 files in {time.perf_counter() - started:.1f} s")
        run(work, files, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def raw_cpu(folder: Path, repeat: int) -> float:
    """Processor seconds of one ``os.scandir`` + ``stat`` of ``folder`` (mean of
    ``repeat``): unlike wall time, hardly moved by other work on a shared machine."""
    started = time.process_time()
    for _ in range(repeat):
        with os.scandir(folder) as entries:
            for entry in entries:
                entry.stat()
    return (time.process_time() - started) / repeat


def cpu_clock(data: Path) -> Callable[[], float]:
    """The processor seconds the server serving ``data`` has used so far (all threads),
    read from /proc; found by its ``--data`` argument."""
    wanted = str(data).encode()
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and wanted in (entry / "cmdline").read_bytes().split(b"\0"):
                stat_file = entry / "stat"
                break
    else:
        raise RuntimeError(f"no process serves {data}")
    tick = os.sysconf("SC_CLK_TCK")

    def seconds() -> float:
        fields = stat_file.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    return seconds


def cpu_per_request(
    clock: Callable[[], float], url: str, body: object, token: str, n: int
) -> float:
    started = clock()
    for _ in range(n):
        post(url, body, token)
    return (clock() - started) / n


def raw_scan(folder: Path, repeat: int) -> float:
    """The floor for a rescan: ``os.scandir`` and one ``stat`` an entry, in this process
    (best of ``repeat``)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        with os.scandir(folder) as entries:
            for entry in entries:
                entry.stat()
        best = min(best, time.perf_counter() - started)
    return best


@contextlib.contextmanager
def pinging(url: str) -> Iterator[list[float]]:
    """Ask ``url`` over and over from another thread while the block runs; yields the
    seconds each answer took (a listing that holds the event loop shows as one long
    answer)."""
    took: list[float] = [0.0]
    done = threading.Event()

    def ping() -> None:
        while not done.is_set():
            started = time.perf_counter()
            with urllib.request.urlopen(url, timeout=300) as response:
                response.read()
            took.append(time.perf_counter() - started)

    thread = threading.Thread(target=ping)
    thread.start()
    try:
        yield took
    finally:
        done.set()
        thread.join()


def rate(url: str, args: argparse.Namespace, script: str) -> float:
    """wrk's requests per second, or 0 where wrk is not installed."""
    if shutil.which("wrk") is None:
        return 0.0
    return wrk(url, args.seconds, args.connections, script)


def run(work: Path, files: Path, args: argparse.Namespace) -> None:
    raw_ten = raw_scan(files / "ten", max(args.repeat, 5))
    raw_hundred = raw_scan(files / "hundred", 3)
    with manifold_server(work / "data") as port:
        base = f"http://127.0.0.1:{port}"
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        token = str(manifold_ok(post(f"{base}/api/auth/login", login))["token"])

        def mount(path: str) -> None:
            addition = json.dumps({"root_folder_path": str(files)})
            body = {"mount_path": path, "driver": "Local", "addition": addition}
            manifold_ok(post(f"{base}/api/admin/storage/create", body, token))

        mount("/local")
        list_url = f"{base}/api/fs/list"
        ten = {"path": "/local/ten", "page": 1, "per_page": 0}
        total = manifold_ok(post(list_url, ten, token))["total"]
        if total != 10_000:
            raise RuntimeError(f"Manifold listed {total} entries, not 10000")
        ours_seq = sequential(list_url, ten, args.repeat, token)
        script = lua(work, "manifold.lua", ten, token)
        ours_rate = rate(list_url, args, script)
        rescan = {**ten, "refresh": True}
        rescan_seq = sequential(list_url, rescan, args.repeat, token)
        clock = cpu_clock(work / "data")
        rescan_cpu = cpu_per_request(clock, list_url, rescan, token, max(args.repeat, 20))
        script = lua(work, "manifold-rescan.lua", rescan, token)
        rescan_rate = rate(list_url, args, script)

        # 100,000 entries: each measurement on a storage of its own, so that the first
        # request finds nothing Manifold cached (the kernel's dentry cache stays warm).
        page = {"path": "/big1/hundred", "page": 1, "per_page": 30}
        mount("/big1")
        before = clock()
        page_cold, out = timed(list_url, page, token)
        page_cold_cpu = clock() - before
        content = manifold_ok(out)["content"]
        if not isinstance(content, list) or len(content) != 30:
            raise RuntimeError("the first page does not hold 30 entries")
        page_warm = min(timed(list_url, page, token)[0] for _ in range(3))
        whole = {"path": "/big2/hundred", "page": 1, "per_page": 0}
        mount("/big2")
        with pinging(f"{base}/api/public/settings") as stalls:
            whole_cold, out = timed(list_url, whole, token)
        if manifold_ok(out)["total"] != 100_000:
            raise RuntimeError("the whole listing does not hold 100000 entries")
        whole_warm = min(timed(list_url, whole, token)[0] for _ in range(3))

    print_big(raw_hundred, page_cold, page_warm, whole_cold, whole_warm)
    raw_ten_cpu = raw_cpu(files / "ten", max(args.repeat, 20))
    raw_hundred_cpu = raw_cpu(files / "hundred", 3)
    print(
        f"processor time: first page cold {page_cold_cpu:.3f} s (raw scan {raw_hundred_cpu:.3f} s);"
        f" rescanning {rescan_cpu * 1000:.1f} ms a request (raw scan {raw_ten_cpu * 1000:.1f} ms,"
        f" {rescan_cpu / raw_ten_cpu:.2f}x)"
    )
    print(f"longest answer to another request during the cold whole listing: {max(stalls):.3f} s")
    print(
        f"rescanning vs raw os.scandir + stat ({raw_ten * 1000:.1f} ms): "
        f"{rescan_seq / raw_ten:.2f}x (target <= 1.25x)"
    )
    if not os.path.exists(RCLONE) or shutil.which("wrk") is None:
        print("(rclone or wrk not installed: the comparison with rclone is left out)")
        return
    with rclone_rcd(work) as port:
        rc_url = f"http://127.0.0.1:{port}/operations/list"
        body = {"fs": str(files), "remote": "ten"}
        listed = json.loads(post(rc_url, body))["list"]
        if len(listed) != 10_000:
            raise RuntimeError(f"rclone listed {len(listed)} entries, not 10000")
        peer_seq = sequential(rc_url, body, args.repeat)
        script = lua(work, "rclone.lua", body)
        peer_rate = wrk(rc_url, args.seconds, args.connections, script)

    print()
    print("10,000 entries, Manifold /api/fs/list vs rclone rc /operations/list")
    print(f"{'measure':<28}{'manifold':>12}{'rclone':>12}{'ratio':>8}")
    print(
        f"{'sequential ms/request':<28}{ours_seq * 1000:>12.1f}{peer_seq * 1000:>12.1f}"
        f"{peer_seq / ours_seq:>8.2f}"
    )
    print(f"{'wrk req/s':<28}{ours_rate:>12.1f}{peer_rate:>12.1f}{ours_rate / peer_rate:>8.2f}")
    print(
        f"{'rescanning ms/request':<28}{rescan_seq * 1000:>12.1f}{peer_seq * 1000:>12.1f}"
        f"{peer_seq / rescan_seq:>8.2f}"
    )
    print(
        f"{'rescanning wrk req/s':<28}{rescan_rate:>12.1f}{peer_rate:>12.1f}"
        f"{rescan_rate / peer_rate:>8.2f}"
    )
    print("(ratio > 1: Manifold faster; target >= 1.5)")


def print_big(
    raw_hundred: float, page_cold: float, page_warm: float, whole_cold: float, whole_warm: float
) -> None:
    print()
    print("100,000 entries, Manifold /api/fs/list, seconds")
    print(f"{'request':<28}{'cold':>10}{'warm':>10}")
    print(f"{'first page (per_page 30)':<28}{page_cold:>10.3f}{page_warm:>10.3f}")
    print(f"{'whole listing (per_page 0)':<28}{whole_cold:>10.3f}{whole_warm:>10.3f}")
    print(
        f"(targets: first page cold < 0.4 s; raw os.scandir + stat of the folder "
        f"{raw_hundred:.3f} s)"
    )


if __name__ == "__main__":
    main()
