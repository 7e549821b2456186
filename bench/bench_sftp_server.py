"""The SFTP server: a 1 GiB get and put with OpenSSH's sftp through Manifold's SFTP port
against ``rclone serve sftp`` on the same folder, one run each, and the Manifold
process's RSS growth over the transfers (its peak, VmHWM, against its RSS before).
Targets: each ratio >= 0.8x; RSS growth < 64 MiB.

Run: .venv/bin/python -m bench.bench_sftp_server [--size-mib N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

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

USER = "bench"
PASSWORD = "bench-password"
OPTIONS = ["-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes"]
OPTIONS += ["-o", "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes"]
OPTIONS += ["-o", "LogLevel=ERROR"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-sftp-"))
    try:
        run(work, args.size_mib * MIB)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, size: int) -> None:
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
            transfer(targets["rclone"], key, f"get {targets['rclone'][1]}/big.bin /dev/null")
            before = tree_kib(process.pid, "VmRSS")
            measured_peak = reset_peak(process.pid)
            for name, (sftp, folder) in targets.items():
                results[f"{name} get"] = size / transfer(
                    (sftp, folder), key, f"get {folder}/big.bin /dev/null"
                )
                results[f"{name} put"] = size / transfer(
                    (sftp, folder), key, f"put {source} {folder}/up-{name}.bin"
                )
            peak = tree_kib(process.pid, "VmHWM" if measured_peak else "VmRSS")
    for name, speed in results.items():
        print(f"{name:14s} {speed / MIB:9.1f} MiB/s")
    for verb in ("get", "put"):
        ratio = results[f"manifold {verb}"] / results[f"rclone {verb}"]
        print(f"ratio {verb} manifold/rclone: {ratio:.2f}x (target >= 0.8x)")
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


def transfer(target: tuple[int, str], key: Path, command: str) -> float:
    """Seconds one ``sftp`` batch of ``command`` takes."""
    port, _ = target
    argv = ["sftp", "-b", "-", "-P", str(port), "-i", str(key), *OPTIONS, f"{USER}@127.0.0.1"]
    started = time.perf_counter()
    subprocess.run(argv, input=command.encode(), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
