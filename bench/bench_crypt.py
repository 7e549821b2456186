"""Crypt: a big file written and read through Manifold's Crypt storage against rclone's
crypt remote over the same folder, with the same password and settings.

* write: ``curl -T`` of the plain file to ``PUT /api/fs/put`` on the Crypt storage
  (encrypted as it streams, stored by the Local storage below) against
  ``rclone rcat`` of the same file into the crypt remote;
* read: ``/p`` of the file Manifold wrote, streamed by curl to nowhere, against
  ``rclone cat`` of the file rclone wrote, to /dev/null.

Each side's output is checked: rclone reads the file Manifold wrote back to the same
digest, and Manifold the one rclone wrote. Best of --tries. Ratios are rclone's time
over Manifold's, so above 1 Manifold is faster; the target is 0.9x or more.

Run: .venv/bin/python -m bench.bench_crypt [--size-mib N] [--tries N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from bench.common import (
    MIB,
    RCLONE,
    admin_token,
    http,
    make_random_file,
    manifold_process,
    mount_local,
)

PASSWORD, SALT = "bench password", "bench salt"
SETTINGS = {
    "filename_encryption": "standard",
    "directory_name_encryption": "true",
    "filename_encoding": "base32",
}


def rclone(config: Path, *args: str, stdin: Path | None = None) -> float:
    """Seconds for one rclone command on the crypt remote ``vault:``, output discarded."""
    started = time.perf_counter()
    with (stdin or Path("/dev/null")).open("rb") as source:
        subprocess.run(
            [RCLONE, "-q", "--config", str(config), *args],
            stdin=source,
            stdout=subprocess.DEVNULL,
            check=True,
        )
    return time.perf_counter() - started


def rclone_digest(config: Path, remote: str) -> str:
    argv = [RCLONE, "--config", str(config), "cat", remote]
    return hashlib.sha256(subprocess.run(argv, capture_output=True, check=True).stdout).hexdigest()


def write_config(path: Path, vault: Path) -> None:
    def obscured(value: str) -> str:
        argv = [RCLONE, "obscure", value]
        return subprocess.run(argv, capture_output=True, check=True, text=True).stdout.strip()

    lines = ["[vault]", "type = crypt", f"remote = {vault}"]
    lines += [f"password = {obscured(PASSWORD)}", f"password2 = {obscured(SALT)}"]
    lines += [f"{key} = {value}" for key, value in SETTINGS.items()]
    path.write_text("\n".join(lines) + "\n")


def curl_put(base: str, token: str, path: str, source: Path) -> float:
    argv = ["curl", "-sS", "-f", "-T", str(source), "-H", "Expect:", "-o", "-"]
    argv += ["-H", f"Authorization: {token}", "-H", f"File-Path: {quote(path)}"]
    argv += ["-w", "\n%{time_total}", f"{base}/api/fs/put"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    answer, _, seconds = out.rpartition("\n")
    if json.loads(answer)["code"] != 200:
        raise RuntimeError(f"Manifold refused the upload: {answer}")
    return float(seconds)


def curl_get(base: str, token: str, path: str, digest: bool = False) -> tuple[float, str]:
    """Seconds to stream ``path`` through ``/p`` (and its digest when asked)."""
    got = json.loads(http("POST", f"{base}/api/fs/get", {"path": path}, token))["data"]
    url = f"{base}/p{quote(path)}?sign={quote(got['sign'], safe='')}"
    started = time.perf_counter()
    argv = ["curl", "-sS", "-f", "-o", "-" if digest else "/dev/null", url]
    out = subprocess.run(argv, capture_output=True, check=True).stdout
    return time.perf_counter() - started, hashlib.sha256(out).hexdigest() if digest else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-crypt-") as folder:
        run(Path(folder), args.size_mib, args.tries)


def run(folder: Path, size_mib: int, tries: int) -> None:
    root, vault, config = folder / "root", folder / "root" / "vault", folder / "rclone.conf"
    vault.mkdir(parents=True)
    source = folder / "plain.bin"
    make_random_file(source, size_mib * MIB)
    with source.open("rb") as plain:
        digest = hashlib.file_digest(plain, "sha256").hexdigest()
    write_config(config, vault)
    with manifold_process(folder / "data") as (port, _):
        base = f"http://127.0.0.1:{port}"
        token = admin_token(base)
        mount_local(base, token, "/local", root)
        addition = {"remote_path": "/local/vault", "password": PASSWORD, "salt": SALT, **SETTINGS}
        storage = {"mount_path": "/crypt", "driver": "Crypt", "addition": json.dumps(addition)}
        reply = json.loads(http("POST", f"{base}/api/admin/storage/create", storage, token))
        if reply["code"] != 200:
            raise RuntimeError(f"Manifold did not create the Crypt storage: {reply}")
        ours_w = min(curl_put(base, token, "/crypt/m.bin", source) for _ in range(tries))
        theirs_w = min(rclone(config, "rcat", "vault:r.bin", stdin=source) for _ in range(tries))
        if rclone_digest(config, "vault:m.bin") != digest:
            raise RuntimeError("rclone read back another file than Manifold wrote")
        if curl_get(base, token, "/crypt/r.bin", digest=True)[1] != digest:
            raise RuntimeError("Manifold read back another file than rclone wrote")
        ours_r = min(curl_get(base, token, "/crypt/m.bin")[0] for _ in range(tries))
        theirs_r = min(rclone(config, "cat", "vault:r.bin") for _ in range(tries))
    print(f"{size_mib} MiB through crypt (standard names), best of {tries}")
    print(f"{'':<8}{'manifold MiB/s':>16}{'rclone MiB/s':>14}{'ratio':>8}")
    for name, ours, theirs in (("write", ours_w, theirs_w), ("read", ours_r, theirs_r)):
        print(f"{name:<8}{size_mib / ours:>16.0f}{size_mib / theirs:>14.0f}{theirs / ours:>8.2f}")


if __name__ == "__main__":
    main()
