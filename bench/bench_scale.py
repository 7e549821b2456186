"""Scaling: bench_load's busy mix against one worker and two workers on SQLite, and
against two instances behind nginx on PostgreSQL and Redis, in one run.

Each setup gets a fresh data folder and tree of files and the same load (bench_load's
setup, clients and load generator, reused as they are). Printed for each: throughput,
p50 and p99 over all requests, errors, the Manifold processes' CPU seconds and peak
memory, and the whole machine's CPU use during the load (the machine is shared: other
work shows there). Then the ratios against one worker. Targets: two workers at least
1.7x one worker's throughput at no worse p99; two instances at least 1.6x.

The two instances run as ``manifold server`` with ``cluster: true``, one database URL,
one ``redis_url`` and one ``jwt_secret``, each its own data folder; nginx (one worker
process) sends requests to them in turn over kept-alive upstream connections. The
PostgreSQL and Redis servers are private ones started the way the tests start them.

``--per-kind`` instead measures each kind of request alone against one worker:
requests a second, and requests per second of server CPU (what one core carries).

Run: .venv/bin/python -m bench.bench_scale [--seconds 30] [--clients 50] [--procs 1]
     [--only 1w,2w,2i] [--per-kind]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from argparse import Namespace
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from bench import bench_load as load
from bench.common import ADMIN_PASSWORD, ROOT, free_port, process_tree, stop, wait_for_port
from tests.fixtures.dbservers import start_postgres
from tests.fixtures.redisserver import start_redis
from tests.multi.conftest import nginx_config

SETUPS = {"1w": "1 worker, SQLite", "2w": "2 workers, SQLite",
          "2i": "2 instances + nginx, PostgreSQL + Redis"}  # fmt: skip
TARGETS = {"2w": 1.7, "2i": 1.6}
KINDS = ("list", "get", "download", "download range", "upload", "search")


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds used so far by ``pids`` and everything below them."""
    total = 0.0
    for root in pids:
        for pid in process_tree(root):
            total += load.cpu_seconds(pid)
    return total


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine since boot, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


@contextlib.contextmanager
def manifold(data: Path, config: dict[str, object], workers: int = 1) -> Iterator[tuple[int, int]]:
    """``manifold server`` on a free port with ``config`` in its config file; (port, pid)."""
    data.mkdir(parents=True, mode=0o700)
    (data / "config.json").write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MANIFOLD_ADMIN_PASSWORD": ADMIN_PASSWORD,
           "MANIFOLD_LOG_LEVEL": "warning"}  # fmt: skip
    port = free_port()
    argv = [sys.executable, "-m", "manifold.cli", "server", "--data", str(data), "--no-ui",
            "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]  # fmt: skip
    with (data.parent / f"{data.name}.log").open("wb") as out:
        process = subprocess.Popen(
            argv, env=env, cwd=ROOT, start_new_session=True, stdout=out, stderr=out
        )
    try:
        wait_for_port(port, 60)
        if workers > 1:
            time.sleep(3)  # the workers start after the parent binds the port
        yield port, process.pid
    finally:
        stop(process)


@contextlib.contextmanager
def nginx(base: Path, upstreams: list[int]) -> Iterator[int]:
    base.mkdir(parents=True)
    port = free_port()
    conf = base / "nginx.conf"
    conf.write_text(nginx_config(base, port, upstreams))
    process = subprocess.Popen(["nginx", "-c", str(conf), "-p", str(base)], start_new_session=True)
    try:
        wait_for_port(port)
        yield port
    finally:
        stop(process)


def measure(
    base: str, pids: list[int], files: Path, args: Namespace, mix: str
) -> dict[str, object]:
    """bench_load's setup and load against ``base``; its summary, plus machine CPU use."""
    started = time.perf_counter()
    admin, users, signed = load.setup(base, files)
    setup_seconds = time.perf_counter() - started
    plans = load.client_plans(args.clients, 0, admin, users, signed)
    for plan in plans:
        plan.mix = mix
    start_at = time.time() + 3.0
    shares = [plans[p :: args.procs] for p in range(args.procs)]
    with ProcessPoolExecutor(args.procs, mp_context=get_context("spawn")) as pool:
        futures = [
            pool.submit(load.generate, load.Plan(base, start_at, args.seconds, share, admin, tag))
            for tag, share in enumerate(shares)
        ]
        time.sleep(max(0.0, start_at - time.time()))
        cpu_start, busy_start = tree_cpu(pids), machine_busy()
        rss_start = sum(load.tree_kib(pid, "VmRSS") for pid in pids)
        samplers = [load.RssSampler(pid) for pid in pids]
        for sampler in samplers:
            sampler.__enter__()
        tally = load.Tally()
        for future in futures:
            tally.merge(future.result())
        for sampler in samplers:
            sampler.__exit__()
        cpu = tree_cpu(pids) - cpu_start
        busy_end = machine_busy()
        rss_end = sum(load.tree_kib(pid, "VmRSS") for pid in pids)
    lost = load.lost_index_updates(base, admin, tally.uploaded) if mix == "busy" else 0
    args.mix = mix
    rss = (rss_start, max(sum(s.peak_kib for s in samplers), rss_start, rss_end), rss_end)
    result = load.summarise(ROOT, args, tally, setup_seconds, cpu, "", rss, lost)
    busy = (busy_end[0] - busy_start[0]) / max(1.0, busy_end[1] - busy_start[1])
    result["machine_cpu_share"] = round(busy, 2)  # of all cores, over the load
    return result


def run_setup(name: str, args: Namespace, mix: str = "busy") -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix=f"bench-scale-{name}-"))
    try:
        files = work / "files"
        load.make_tree(files, args.clients)
        if name in ("1w", "2w"):
            with manifold(work / "data", {}, workers=int(name[0])) as (port, pid):
                search_index_on(f"http://127.0.0.1:{port}")
                return measure(f"http://127.0.0.1:{port}", [pid], files, args, mix)
        return run_cluster(work, files, args, mix)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_cluster(work: Path, files: Path, args: Namespace, mix: str) -> dict[str, object]:
    postgres = start_postgres(work / "pg")
    redis = start_redis(work / "redis")
    try:
        shared = {"database_url": postgres.url, "redis_url": redis.url, "cluster": True,
                  "jwt_secret": secrets.token_urlsafe(32)}  # fmt: skip
        with contextlib.ExitStack() as stack:
            ports, pids = [], []
            for name in ("a", "b"):
                config = {**shared, "instance_id": name}
                port, pid = stack.enter_context(manifold(work / name, config))
                ports.append(port)
                pids.append(pid)
            lb = stack.enter_context(nginx(work / "nginx", ports))
            search_index_on(f"http://127.0.0.1:{ports[0]}")
            return measure(f"http://127.0.0.1:{lb}", pids, files, args, mix)
    finally:
        redis.stop()
        postgres.stop()


def search_index_on(base: str) -> None:
    """Turn the database index on ahead of bench_load's setup, which turns it on and at
    once asks for a build, which may reach another worker or instance before it has
    applied the setting (a change reaches the others within milliseconds on Redis, the
    database's poll interval without it; not at once)."""
    login = {"username": "admin", "password": ADMIN_PASSWORD}
    token = str(load.call(base, "/api/auth/login", login)["token"])  # type: ignore[index]
    load.call(base, "/api/admin/setting/save", [{"key": "search_index", "value": "database"}],
              token)  # fmt: skip
    time.sleep(1.0)


def print_row(name: str, result: dict[str, object]) -> None:
    print(
        f"{SETUPS[name]:<42}{result['rps']:>9}{result['p50_ms']:>9}{result['p99_ms']:>9}"
        f"{result['errors']:>8}{result['server_cpu_s']:>9}{result['rss_peak_mib']:>10}"
        f"{result['machine_cpu_share']:>9}{per_cpu_second(result):>10.0f}"
    )


def per_cpu_second(result: dict[str, object]) -> float:
    """Requests per CPU second of the Manifold processes: what one core carries."""
    return float(str(result["requests"])) / max(0.01, float(str(result["server_cpu_s"])))


def scaling(args: Namespace) -> None:
    results = {}
    for name in args.only.split(","):
        results[name] = run_setup(name, args)
        load.print_run(results[name])
    print(f"\n{'setup':<42}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
          f"{'CPU s':>9}{'RSS MiB':>10}{'machine':>9}{'req/CPU s':>10}")  # fmt: skip
    print("(machine: share of all cores busy during the load, other work included)")
    for name, result in results.items():
        print_row(name, result)
    ratios: dict[str, dict[str, float]] = {}
    one = results.get("1w")
    for name in ("2w", "2i"):
        if one is None or name not in results:
            continue
        rps = float(str(results[name]["rps"])) / float(str(one["rps"]))
        p99 = float(str(results[name]["p99_ms"])) / float(str(one["p99_ms"]))
        ratios[name] = {"rps": round(rps, 2), "p99": round(p99, 2)}
        verdict = "met" if rps >= TARGETS[name] and (name != "2w" or p99 <= 1) else "not met"
        print(f"{SETUPS[name]} / 1 worker: throughput {rps:.2f}x (target {TARGETS[name]}x), "
              f"p99 {p99:.2f}x: {verdict}")  # fmt: skip
        if name == "2w":
            print_headroom(one, results[name], rps, args.seconds)
    summary = {n: load.brief(r) for n, r in results.items()}
    print("\n" + json.dumps({"ratios": ratios, "runs": summary}, separators=(",", ":")))


def print_headroom(
    one: dict[str, object], two: dict[str, object], rps: float, seconds: float
) -> None:
    """What two workers reach of what the cores left to the server allow: one worker's
    cores, against the machine's cores less the load generator's (target: 90%, at
    no more than 1.05x one worker's CPU per request)."""
    cores = os.cpu_count() or 1
    used = float(str(one["server_cpu_s"])) / seconds
    generator = float(str(two["generator_cpu_s"])) / seconds
    allowed = (cores - generator) / max(used, 0.01)
    per_request = per_cpu_second(one) / per_cpu_second(two)
    print(
        f"  one worker used {used:.2f} cores, the load generator {generator:.2f} of {cores}: "
        f"the cores left allow {allowed:.2f}x; reached {rps / allowed:.0%} (target 90%); "
        f"CPU per request {per_request:.2f}x one worker's (target at most 1.05x)"
    )


def per_kind(args: Namespace) -> None:
    """Each kind alone against one worker: req/s, and req/s per server CPU second."""
    print(f"\n{'kind':<16}{'req/s':>9}{'p99 ms':>9}{'CPU s':>8}{'req per CPU s':>15}")
    for kind in KINDS:
        result = run_setup("1w", args, mix=f"only {kind}")
        rate = per_cpu_second(result)
        print(f"{kind:<16}{result['rps']:>9}{result['p99_ms']:>9}{result['server_cpu_s']:>8}"
              f"{rate:>15.0f}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--procs", type=int, default=1, help="load-generator processes")
    parser.add_argument("--only", default="1w,2w,2i", help="setups to run, of 1w,2w,2i")
    parser.add_argument("--per-kind", action="store_true", help="each kind alone, one worker")
    args = parser.parse_args()
    args.bad_logins, args.checkout = 0, ROOT
    print(f"load average before: {os.getloadavg()}")
    if args.per_kind:
        per_kind(args)
    else:
        scaling(args)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
