"""The SFTP server: a 1 GiB get and put through Manifold's SFTP port against
``rclone serve sftp`` on the same folder, with each of the two clients people mount
and copy with: OpenSSH's ``sftp`` (a few large requests in flight) and rclone's SFTP
client (``rclone copyto``: 32 KiB requests, 64 of them in flight per file). One run
each, side by side, and the Manifold process's RSS growth over the transfers (its
peak, VmHWM, against its RSS before). rclone's client runs with its hash check off,
as Manifold runs no shell commands for it to use (against ``rclone serve`` it would
also hash the file on the server, which is not what is measured).
Targets: each ratio >= 1.0x; RSS growth < 64 MiB.

Run: .venv/bin/python -m bench.bench_sftp_server [--size-mib N] [--client openssh|rclone]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.common import (
    MIB,
    RCLONE,
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

USER = "bench"
PASSWORD = "bench-password"
OPTIONS = ["-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes"]
OPTIONS += ["-o", "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes"]
OPTIONS += ["-o", "LogLevel=ERROR"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--client", choices=CLIENTS, action="append", help="default: both")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-sftp-"))
    try:
        run(work, args.size_mib * MIB, args.client or list(CLIENTS))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, size: int, clients: list[str]) -> None:
    files = work / "files"
    files.mkdir()
    make_random_file(files / "big.bin", size)
    source = work / "source.bin"
    make_random_file(source, size)
    key = work / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    sftp_port = free_port()
    env = {"MANIFOLD_SFTP_PORT": str(sftp_port), "MANIFOLD_ADDRESS": "127.0.0.1"}
    results: dict[str, float] = {}
    with manifold_process(work / "data", env) as (port, process):
        prepare_manifold(f"http://127.0.0.1:{port}", files, key)
        wait_for_port(sftp_port)
        with rclone_serve(files, key) as rclone_port:
            targets = {"manifold": (sftp_port, "/files"), "rclone": (rclone_port, "")}
            openssh(targets["rclone"], key, "get", "big.bin", work / "warm.bin")
            (work / "warm.bin").unlink()
            before = tree_kib(process.pid, "VmRSS")
            measured_peak = reset_peak(process.pid)
            for client in clients:
                for name, target in targets.items():
                    measure(results, f"{client} {name}", CLIENTS[client], target, key, work)
            peak = tree_kib(process.pid, "VmHWM" if measured_peak else "VmRSS")
    for name, seconds in results.items():
        print(f"{name:24s} {size / seconds / MIB:9.1f} MiB/s")
    for client in clients:
        for verb in ("get", "put"):
            ratio = results[f"{client} rclone {verb}"] / results[f"{client} manifold {verb}"]
            print(f"ratio {client:7s} {verb} manifold/rclone-serve: {ratio:.2f}x (target >= 1.0x)")
    kind = "peak" if measured_peak else "after"
    growth = (peak - before) / 1024
    print(f"server RSS growth ({kind} - before): {growth:.1f} MiB (target < 64 MiB)")


def prepare_manifold(base: str, files: Path, key: Path) -> None:
    token = admin_token(base)
    mount_local(base, token, "/files", files)
    user = {"username": USER, "password": PASSWORD, "permission": 0x3FFF, "base_path": "/"}
    created = json.loads(http("POST", f"{base}/api/admin/user/create", user, token))
    if created["code"] != 200:
        raise RuntimeError(f"Manifold did not create the user: {created}")
    login = {"username": USER, "password": PASSWORD}
    own = json.loads(http("POST", f"{base}/api/auth/login", login))["data"]["token"]
    body = {"title": "bench", "key": key.with_suffix(".pub").read_text()}
    added = json.loads(http("POST", f"{base}/api/me/sshkey/add", body, own))
    if added["code"] != 200:
        raise RuntimeError(f"Manifold did not add the key: {added}")


@contextlib.contextmanager
def rclone_serve(files: Path, key: Path) -> Iterator[int]:
    port = free_port()
    argv = [RCLONE, "serve", "sftp", str(files), "--addr", f"127.0.0.1:{port}"]
    argv += ["--authorized-keys", str(key.with_suffix(".pub")), "--config", "/dev/null"]
    process = subprocess.Popen(argv, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield port
    finally:
        stop(process)


Transfer = Callable[[tuple[int, str], Path, str, str, Path], float]


def measure(
    results: dict[str, float],
    label: str,
    transfer: Transfer,
    target: tuple[int, str],
    key: Path,
    work: Path,
) -> None:
    """Seconds of a get of ``big.bin`` and a put of ``source.bin`` into ``results``."""
    local = work / "got.bin"
    results[f"{label} get"] = transfer(target, key, "get", "big.bin", local)
    local.unlink(missing_ok=True)
    name = f"up-{label.replace(' ', '-')}.bin"
    results[f"{label} put"] = transfer(target, key, "put", name, work / "source.bin")


def openssh(target: tuple[int, str], key: Path, verb: str, name: str, local: Path) -> float:
    """Seconds one OpenSSH ``sftp`` batch of ``verb`` takes."""
    port, folder = target
    remote = f"{folder}/{name}"
    command = f"get {remote} {local}" if verb == "get" else f"put {local} {remote}"
    argv = ["sftp", "-b", "-", "-P", str(port), "-i", str(key), *OPTIONS, f"{USER}@127.0.0.1"]
    started = time.perf_counter()
    subprocess.run(argv, input=command.encode(), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def rclone(target: tuple[int, str], key: Path, verb: str, name: str, local: Path) -> float:
    """Seconds one ``rclone copyto`` (rclone's SFTP client, its defaults) takes."""
    port, folder = target
    remote = f":sftp,host=127.0.0.1,port={port},user={USER},key_file='{key}'"
    remote += f",known_hosts_file=none,disable_hashcheck=true:{folder.lstrip('/')}/{name}"
    pair = [remote, str(local)] if verb == "get" else [str(local), remote]
    argv = [RCLONE, "copyto", *pair, "--config", "/dev/null", "--ignore-times"]
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


CLIENTS: dict[str, Transfer] = {"openssh": openssh, "rclone": rclone}


if __name__ == "__main__":
    main()
