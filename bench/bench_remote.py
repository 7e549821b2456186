"""Remote storages: Manifold's S3, SFTP, WebDav and FTP drivers against rclone reading the
same real servers (moto_server, OpenSSH sshd, wsgidav, pyftpdlib on loopback), in one run.

Every server holds the same data: a folder of 2,000 small files and one big file. Per
back end it times

* listing the folder (medians of --list-repeat): ``rclone lsjson`` (a new process each
  time, so nothing cached, but its start-up and a new connection are in the time) and
  ``operations/list`` of a running ``rclone rcd`` (connections kept, as Manifold keeps
  them) against ``/api/fs/list`` with ``refresh: true`` (Manifold asks the server again;
  checked first by a file added behind its back), and ``/api/fs/list`` served from
  Manifold's listing cache (median of --cached-repeat);
* downloading the big file: ``rclone cat`` to /dev/null against ``/p/<path>`` streamed
  to nowhere by curl (``--client httpx``: by httpx, which on a two-core machine reads
  loopback HTTP at about 60-70% of curl's speed and so holds Manifold back), best of
  --tries, while Manifold's resident memory is sampled every 100 ms (growth = highest
  sample minus the one before the download);

The S3 and SFTP servers are also mounted with the Rclone driver over rclone's own s3 and
sftp backends ("rc-s3", "rc-sftp"), measured against plain rclone the same way;

then a copy of a --copy-mib file from S3 to SFTP: Manifold's copy task against
``rclone copyto`` between the same two servers, with Manifold's memory growth.

Ratios are rclone's time over Manifold's, so above 1 Manifold is faster. Targets:
uncached listing >= 1x rclone lsjson (the "vs rc" ratio is printed beside it, and is the
stricter one), cached listing >= 10x rclone lsjson, downloads and the
copy >= 0.9x with memory growth under 64 MiB. A back end whose driver this Manifold
lacks is reported as "driver not available" and skipped.

rclone is asked for what Manifold's listing holds: ``--use-server-modtime`` (S3's
listing time, not a HEAD request per object for rclone's own modtime metadata) and
``--no-mimetype``; its SFTP remote runs no shell commands, so it does not hash uploads.

Run: .venv/bin/python -m bench.bench_remote [--quick] [--backends s3,sftp] [--big-mib N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from bench.common import (
    MIB,
    admin_token,
    free_port,
    make_random_file,
    manifold_process,
    stop,
    tree_kib,
    wait_for_port,
)
from bench.remote_servers import Backend, remote_servers
from manifold.drivers.rclone.process import RCLONE

ALL_BACKENDS = ("s3", "sftp", "webdav", "ftp")
# The Rclone driver is measured on rclone's own backends for these servers too, as
# "rc-s3" and "rc-sftp", against plain rclone on the same servers.
THROUGH_RCLONE = ("s3", "sftp")
FOLDER = "folder"
BIG = "big.bin"
COPY = "copy.bin"
COPY_DIR = "copied"

# Targets, printed beside the numbers.
LIST_TARGET = 1.0
CACHED_TARGET = 10.0
TRANSFER_TARGET = 0.9
RSS_TARGET_MIB = 64.0

WORDS = ("holiday", "report", "invoice", "scan", "backup", "photo", "draft", "export")
SUFFIXES = (".jpg", ".pdf", ".txt", ".tar.gz", ".flac", ".docx")


@dataclass
class Result:
    """What was measured for one back end; None where it was not measured."""

    key: str
    note: str = ""
    rclone_list: float | None = None
    rc_list: float | None = None
    manifold_list: float | None = None
    manifold_cached: float | None = None
    rclone_mbps: float | None = None
    manifold_mbps: float | None = None
    rss_mib: float | None = None


@dataclass
class CopyResult:
    note: str = ""
    rclone_mbps: float | None = None
    manifold_mbps: float | None = None
    rss_mib: float | None = None


# --- data ---------------------------------------------------------------------------


def fill(source: Path, files: int, big: int) -> None:
    """``files`` small files (0.5-4 KiB) in ``source/folder`` and ``big`` bytes in
    ``source/big.bin``."""
    folder = source / FOLDER
    folder.mkdir(parents=True)
    noise = os.urandom(4096)
    for i in range(files):
        name = f"{WORDS[i % len(WORDS)]}_{2000 + i % 25}-{1 + i % 12:02d}_{i:05d}"
        size = 512 + (i * 37) % 3585
        (folder / (name + SUFFIXES[i % len(SUFFIXES)])).write_bytes(noise[:size])
    make_random_file(source / BIG, big)


def read_through(path: Path) -> None:
    """Read a file once so that it sits in the page cache for every reader alike."""
    with path.open("rb") as f:
        while f.read(8 * MIB):
            pass


# --- rclone -------------------------------------------------------------------------


class Rclone:
    def __init__(self, work: Path) -> None:
        self.base = [RCLONE, "--config", str(work / "rclone.conf")]
        self.base += ["--cache-dir", str(work / "rclone-cache"), "-q"]
        # rclone's S3 client fails to start when AWS_CA_BUNDLE is set, and the servers
        # here speak plain HTTP anyway.
        self.env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}

    def run(self, *args: str, stdout: Any = subprocess.PIPE) -> str:
        done = subprocess.run(
            [*self.base, *args],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            env=self.env,
        )
        if done.returncode != 0:
            raise RuntimeError(f"rclone {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout or ""

    def timed(self, *args: str, stdout: Any = subprocess.DEVNULL) -> float:
        started = time.perf_counter()
        self.run(*args, stdout=stdout)
        return time.perf_counter() - started

    def list_seconds(self, path: str, expected: int) -> float:
        started = time.perf_counter()
        out = self.run("lsjson", "--use-server-modtime", "--no-mimetype", path)
        took = time.perf_counter() - started
        if len(json.loads(out)) != expected:
            raise RuntimeError(f"rclone listed {len(json.loads(out))} entries of {path}")
        return took

    @contextlib.contextmanager
    def daemon(self) -> Iterator[None]:
        """``rclone rcd``, which keeps its connections to each server between listings
        as Manifold does (``rc_list_seconds``)."""
        port = free_port()
        argv = [*self.base, "rcd", "--rc-no-auth", f"--rc-addr=127.0.0.1:{port}"]
        argv.append("--use-server-modtime")
        process = subprocess.Popen(
            argv,
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port(port)
            self.rc = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600)
            yield
        finally:
            stop(process)

    def rc_list_seconds(self, fs: str, remote: str, expected: int) -> float:
        body = {"fs": fs, "remote": remote, "opt": {"noMimeType": True}}
        started = time.perf_counter()
        response = self.rc.post("/operations/list", json=body)
        took = time.perf_counter() - started
        listed = response.json().get("list")
        if response.status_code != 200 or listed is None or len(listed) != expected:
            raise RuntimeError(f"rclone rc listed {fs} {remote}: {response.text[:300]}")
        return took


def upload_to_s3(rclone: Rclone, backend: Backend, source: Path, copy_file: Path | None) -> None:
    rclone.run("mkdir", backend.remote)
    rclone.run("copy", "--transfers", "16", str(source), backend.remote)
    if copy_file is not None:
        rclone.run("copyto", str(copy_file), backend.rclone_path(COPY))


# --- Manifold -----------------------------------------------------------------------


class Api:
    """Manifold's API as the admin, over one kept-alive connection."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.client = httpx.Client(base_url=base, timeout=600)
        self.client.headers["Authorization"] = admin_token(base)

    def call(self, method: str, path: str, body: object = None) -> Any:
        reply = self.client.request(method, path, json=body).json()
        if reply.get("code") != 200:
            raise RuntimeError(f"Manifold answered {path} with {reply}")
        return reply["data"]

    def timed_list(self, path: str, refresh: bool) -> tuple[float, int]:
        body = {"path": path, "page": 1, "per_page": 0, "refresh": refresh}
        started = time.perf_counter()
        response = self.client.post("/api/fs/list", json=body)
        took = time.perf_counter() - started
        reply = response.json()
        if reply.get("code") != 200:
            raise RuntimeError(f"Manifold did not list {path}: {reply}")
        return took, int(reply["data"]["total"])


class RssWatch:
    """Samples the server's resident memory every 100 ms while the block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before = 0
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.1):
            self.peak = max(self.peak, tree_kib(self.pid, "VmRSS"))

    def __enter__(self) -> RssWatch:
        self.before = self.peak = tree_kib(self.pid, "VmRSS")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, tree_kib(self.pid, "VmRSS"))

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.before) / 1024


def download(api: Api, path: str, size: int, client: str) -> float:
    """Seconds to stream ``path`` through ``/p`` to nowhere, with curl or httpx."""
    sign = api.call("POST", "/api/fs/get", {"path": path})["sign"]
    url = f"{api.base}/p{quote(path)}?sign={quote(sign, safe='')}"
    started = time.perf_counter()
    if client == "curl":
        argv = ["curl", "-s", "-f", "-o", "/dev/null", "-w", "%{size_download}", url]
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"curl {url} failed with exit code {out.returncode}")
        received = int(float(out.stdout))
    else:
        received = 0
        with httpx.stream("GET", url, timeout=600) as response:
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered {response.status_code}: {response.read()!r}")
            for chunk in response.iter_raw():
                received += len(chunk)
    took = time.perf_counter() - started
    if received != size:
        raise RuntimeError(f"{url} sent {received} bytes, not {size}")
    return took


def through_rclone(backend: Backend) -> Backend:
    """``backend`` mounted with the Rclone driver: its rclone section as the config."""
    addition = {
        "config": backend.rclone_section,
        "root_folder_path": backend.remote.partition(":")[2],
    }
    return replace(backend, key=f"rc-{backend.key}", driver="Rclone", addition=addition)


def create_storage(api: Api, backend: Backend) -> None:
    storage = {
        "mount_path": backend.mount,
        "driver": backend.driver,
        "addition": json.dumps(backend.addition),
        "cache_expiration": 30,
        # S3 hands out presigned links; /p streams them only with web_proxy on.
        "web_proxy": True,
    }
    api.call("POST", "/api/admin/storage/create", storage)


def copy_task(api: Api, src: str, dst_dir: str, name: str) -> None:
    """Start a copy task and poll the task lists until it is done."""
    body = {"src_dir": src, "dst_dir": dst_dir, "names": [name], "overwrite": True}
    tasks = api.call("POST", "/api/fs/copy", body)["tasks"]
    ids = {task["id"] for task in tasks}
    while True:
        done = {t["id"]: t for t in api.call("GET", "/api/task/copy/done") if t["id"] in ids}
        if len(done) == len(ids):
            break
        undone = {t["id"] for t in api.call("GET", "/api/task/copy/undone")}
        if not ids & undone and not done:
            raise RuntimeError(f"copy tasks {ids} are in neither list")
        time.sleep(0.1)
    failed = [t for t in done.values() if t["state"] != 2]
    if failed:
        raise RuntimeError(f"copy task failed: {failed}")
    api.call("POST", "/api/task/copy/clear_done")


# --- measurements -------------------------------------------------------------------


def median_of(n: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(n))


def bench_backend(
    api: Api | None, pid: int, rclone: Rclone, backend: Backend, args: argparse.Namespace
) -> Result:
    """Both sides taking turns, so that the machine's load meets both alike; rclone's
    side alone when ``api`` is None (no driver)."""
    result = Result(backend.key)
    folder, big = f"{backend.mount}/{FOLDER}", f"{backend.mount}/{BIG}"
    remote_folder = backend.rclone_path(FOLDER)
    size = args.big_mib * MIB

    def manifold_uncached() -> float:
        assert api is not None
        took, total = api.timed_list(folder, refresh=True)
        if total != args.files:
            raise RuntimeError(f"Manifold listed {total} entries of {folder}, not {args.files}")
        return took

    # Warm-ups: the server's own caches, the first connections of rcd and Manifold.
    rclone.list_seconds(remote_folder, args.files)
    rclone.rc_list_seconds(backend.remote, FOLDER, args.files)
    if api is not None:
        manifold_uncached()
        check_refresh(api, rclone, backend, args.files)
    rclone_times, rc_times, manifold_times = [], [], []
    for _ in range(args.list_repeat):
        rclone_times.append(rclone.list_seconds(remote_folder, args.files))
        rc_times.append(rclone.rc_list_seconds(backend.remote, FOLDER, args.files))
        if api is not None:
            manifold_times.append(manifold_uncached())
    result.rclone_list = statistics.median(rclone_times)
    result.rc_list = statistics.median(rc_times)
    if api is not None:
        result.manifold_list = statistics.median(manifold_times)
        api.timed_list(folder, refresh=False)
        result.manifold_cached = median_of(
            args.cached_repeat, lambda: api.timed_list(folder, refresh=False)[0]
        )

    best_rclone = best_manifold = float("inf")
    growth = 0.0
    for _ in range(args.tries):
        best_rclone = min(best_rclone, rclone.timed("cat", backend.rclone_path(BIG)))
        if api is not None:
            with RssWatch(pid) as watch:
                best_manifold = min(best_manifold, download(api, big, size, args.client))
            growth = max(growth, watch.growth_mib)
    result.rclone_mbps = size / best_rclone / 1e6
    if api is not None:
        result.manifold_mbps = size / best_manifold / 1e6
        result.rss_mib = growth
    return result


def check_refresh(api: Api, rclone: Rclone, backend: Backend, files: int) -> None:
    """A listing with ``refresh`` must ask the server: a file added behind Manifold's
    back shows, and goes again once removed."""
    extra = backend.rclone_path(f"{FOLDER}/zz-refresh-check.txt")
    folder = f"{backend.mount}/{FOLDER}"
    rclone.run("touch", extra)
    try:
        _took, total = api.timed_list(folder, refresh=True)
    finally:
        rclone.run("deletefile", extra)
    if total != files + 1:
        raise RuntimeError(f"a refreshed listing of {folder} missed a new file ({total})")
    if api.timed_list(folder, refresh=True)[1] != files:
        raise RuntimeError(f"a refreshed listing of {folder} kept a removed file")


def bench_copy(
    api: Api, pid: int, rclone: Rclone, s3: Backend, sftp: Backend, args: argparse.Namespace
) -> CopyResult:
    assert sftp.root is not None
    result = CopyResult()
    size = args.copy_mib * MIB
    target = sftp.root / COPY_DIR
    target.mkdir(exist_ok=True)
    api.call("POST", "/api/fs/mkdir", {"path": f"{sftp.mount}/{COPY_DIR}"})
    best_rclone = best_manifold = float("inf")
    growth = 0.0
    for _ in range(args.copy_tries):
        started = time.perf_counter()
        rclone.run("copyto", s3.rclone_path(COPY), sftp.rclone_path(f"{COPY_DIR}/rclone.bin"))
        best_rclone = min(best_rclone, time.perf_counter() - started)
        check_size(target / "rclone.bin", size)
        with RssWatch(pid) as watch:
            started = time.perf_counter()
            copy_task(api, s3.mount, f"{sftp.mount}/{COPY_DIR}", COPY)
            best_manifold = min(best_manifold, time.perf_counter() - started)
        growth = max(growth, watch.growth_mib)
        check_size(target / COPY, size)
        for name in ("rclone.bin", COPY):
            (target / name).unlink()
    result.rclone_mbps = size / best_rclone / 1e6
    result.manifold_mbps = size / best_manifold / 1e6
    result.rss_mib = growth
    return result


def check_size(path: Path, size: int) -> None:
    got = path.stat().st_size
    if got != size:
        raise RuntimeError(f"{path} holds {got} bytes, not {size}")


# --- report -------------------------------------------------------------------------


def mark(ok: bool) -> str:
    return "ok" if ok else "MISS"


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(
    results: list[Result], copy: CopyResult | None, args: argparse.Namespace, startup: float
) -> None:
    print()
    print(
        f"{args.files} files listed; {args.big_mib} MiB downloaded (best of {args.tries}, "
        f"Manifold read by {args.client}); "
        f"ratio = rclone time / Manifold time (> 1: Manifold faster)"
    )
    head = (
        f"{'back end':<9}{'lsjson s':>9}{'rc s':>7}{'Manifold s':>11}{'ratio':>7}{'':<5}"
        f"{'vs rc':>6}{'':<5}{'cached s':>9}{'ratio':>7}{'':<5}"
        f"{'rclone MB/s':>12}{'Manifold MB/s':>14}{'ratio':>6}{'':<5}{'RSS+ MiB':>9}"
    )
    print(head)
    for r in results:
        if r.manifold_list is None:
            rclone_part = f"{fmt(r.rclone_list, '.3f'):>9}{fmt(r.rc_list, '.3f'):>7}"
            if r.rclone_mbps is not None:
                rclone_part += f"{'':<50}{r.rclone_mbps:>12.0f}"
            print(f"{r.key:<9}{rclone_part}   Manifold: {r.note}")
            continue
        assert r.rclone_list and r.rc_list and r.manifold_list and r.manifold_cached
        assert r.rclone_mbps and r.manifold_mbps and r.rss_mib is not None
        uncached = r.rclone_list / r.manifold_list
        warm = r.rc_list / r.manifold_list
        cached = r.rclone_list / r.manifold_cached
        speed = r.manifold_mbps / r.rclone_mbps
        print(
            f"{r.key:<9}{r.rclone_list:>9.3f}{r.rc_list:>7.3f}{r.manifold_list:>11.3f}"
            f"{uncached:>7.2f}{mark(uncached >= LIST_TARGET):>5}"
            f"{warm:>6.2f}{mark(warm >= LIST_TARGET):>5}"
            f"{r.manifold_cached:>9.4f}{cached:>7.0f}{mark(cached >= CACHED_TARGET):>5}"
            f"{r.rclone_mbps:>12.0f}{r.manifold_mbps:>14.0f}"
            f"{speed:>6.2f}{mark(speed >= TRANSFER_TARGET):>5}{r.rss_mib:>9.1f}"
            f"{mark(r.rss_mib < RSS_TARGET_MIB):>5}"
        )
    print(
        f"targets: uncached listing >= {LIST_TARGET:g}x rclone lsjson, cached >= "
        f"{CACHED_TARGET:g}x rclone lsjson, download >= {TRANSFER_TARGET:g}x, "
        f"RSS growth < {RSS_TARGET_MIB:g} MiB"
    )
    print(
        "lsjson: a new rclone process each time (its start-up alone, listing an empty local"
        f" folder: {startup:.3f} s, plus a new connection); rc: operations/list of a running"
        " rclone rcd, connections kept as Manifold keeps them (vs rc = rc s / Manifold s)"
    )
    if copy is None:
        return
    print()
    if copy.note:
        print(f"copy S3 -> SFTP: {copy.note}")
        return
    assert copy.rclone_mbps and copy.manifold_mbps and copy.rss_mib is not None
    speed = copy.manifold_mbps / copy.rclone_mbps
    print(
        f"copy S3 -> SFTP, {args.copy_mib} MiB, best of {args.copy_tries}: "
        f"rclone copyto {copy.rclone_mbps:.0f} MB/s, Manifold copy task "
        f"{copy.manifold_mbps:.0f} MB/s, ratio {speed:.2f} {mark(speed >= TRANSFER_TARGET)} "
        f"(target >= {TRANSFER_TARGET:g}), RSS+ {copy.rss_mib:.1f} MiB "
        f"{mark(copy.rss_mib < RSS_TARGET_MIB)} (target < {RSS_TARGET_MIB:g})"
    )


# --- main ---------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_remote",
        description="Manifold's remote storage drivers against rclone on the same servers.",
    )
    parser.add_argument(
        "--backends",
        default=",".join(ALL_BACKENDS),
        help="comma-separated subset of s3,sftp,webdav,ftp (default: all)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, fewer repeats")
    parser.add_argument("--files", type=int, default=2000, help="files in the listed folder")
    parser.add_argument("--big-mib", type=int, help="downloaded file (256; quick 32)")
    parser.add_argument("--copy-mib", type=int, help="copied file (1024; quick 64)")
    parser.add_argument("--tries", type=int, help="downloads per side, best kept (3; quick 1)")
    parser.add_argument("--copy-tries", type=int, help="copies per side, best kept (2; quick 1)")
    parser.add_argument("--list-repeat", type=int, help="uncached listings per side (5; quick 3)")
    parser.add_argument("--cached-repeat", type=int, default=20, help="cached listings")
    parser.add_argument(
        "--client",
        choices=("curl", "httpx"),
        default="curl",
        help="what downloads from Manifold (default curl: httpx in Python is slower than "
        "the servers here, and rclone is a compiled client)",
    )
    parser.add_argument("--no-copy", action="store_true", help="leave out the S3 -> SFTP copy")
    args = parser.parse_args()
    quick = args.quick
    defaults = {
        "big_mib": 32 if quick else 256,
        "copy_mib": 64 if quick else 1024,
        "tries": 1 if quick else 3,
        "copy_tries": 1 if quick else 2,
        "list_repeat": 3 if quick else 5,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    keys = [k.strip().lower() for k in args.backends.split(",") if k.strip()]
    unknown = set(keys) - set(ALL_BACKENDS)
    if unknown:
        parser.error(f"unknown back ends: {', '.join(sorted(unknown))}")
    args.keys = keys
    return args


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    args = parse_args()
    if not os.path.exists(RCLONE):
        raise SystemExit("rclone is not installed (Debian package rclone)")
    with workspace() as work:
        run(work, args)


def run(work: Path, args: argparse.Namespace) -> None:
    source = work / "source"
    started = time.perf_counter()
    fill(source, args.files, args.big_mib * MIB)
    want_copy = not args.no_copy and {"s3", "sftp"} <= set(args.keys)
    copy_file = None
    if want_copy:
        copy_file = work / "copy-source" / COPY
        copy_file.parent.mkdir()
        make_random_file(copy_file, args.copy_mib * MIB)
    rclone = Rclone(work)
    (work / "empty").mkdir()
    with remote_servers(work, source, args.keys) as backends:
        if "s3" in backends:
            upload_to_s3(rclone, backends["s3"], source, copy_file)
        if copy_file is not None:
            copy_file.unlink()
        read_through(source / BIG)
        print(f"servers up and filled in {time.perf_counter() - started:.1f} s")
        startup = median_of(3, lambda: rclone.timed("lsjson", str(work / "empty")))
        with rclone.daemon(), manifold_process(work / "manifold-data") as (port, process):
            api = Api(f"http://127.0.0.1:{port}")
            names = set(api.call("GET", "/api/admin/driver/names"))
            results: list[Result] = []
            extra = [through_rclone(backends[k]) for k in THROUGH_RCLONE if k in backends]
            measured = {**backends, **{b.key: b for b in extra}}
            for key, backend in measured.items():
                available = backend.driver in names
                print(f"measuring {key} ...", flush=True)
                try:
                    if available:
                        create_storage(api, backend)
                    side = api if available else None
                    result = bench_backend(side, process.pid, rclone, backend, args)
                except RuntimeError as exc:
                    result = Result(key)
                    available, exc_text = False, f"failed: {exc}"[:300]
                else:
                    exc_text = ""
                if not available:
                    result.note = exc_text or f"driver not available ({backend.driver})"
                results.append(result)
            copy = None
            if want_copy:
                copy = CopyResult()
                usable = {r.key for r in results if r.manifold_list is not None}
                if not {"s3", "sftp"} <= usable:
                    copy.note = "needs working S3 and SFTP storages"
                else:
                    print("measuring the copy S3 -> SFTP ...", flush=True)
                    try:
                        copy = bench_copy(
                            api, process.pid, rclone, backends["s3"], backends["sftp"], args
                        )
                    except RuntimeError as exc:
                        copy.note = f"failed: {exc}"[:300]
    print_table(results, copy, args, startup)


if __name__ == "__main__":
    main()
