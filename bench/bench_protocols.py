"""The four protocol servers' benchmarks in one run, one after the other.

WebDAV (PROPFIND of a big folder, cold and warm, and a big GET, against
``rclone serve webdav``), SFTP (get and put against ``rclone serve sftp``), FTP and S3
(a big download against nginx). Each prints its own table; this runs them with the
same size and gathers the lines that carry ratios and memory growth at the end.
Targets: PROPFIND >= 2x rclone warm and >= 1x cold, transfers >= 0.8x the peer, server
RSS growth < 64 MiB.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ("bench_dav.py", "bench_sftp_server.py", "bench_ftp_server.py", "bench_s3_server.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--only", nargs="*", choices=[s.split(".")[0] for s in SCRIPTS])
    args = parser.parse_args()
    summary: list[str] = []
    for script in SCRIPTS:
        if args.only and script.split(".")[0] not in args.only:
            continue
        print(f"== {script}", flush=True)
        module = "bench." + script.removesuffix(".py")
        argv = [sys.executable, "-m", module, "--size-mib", str(args.size_mib)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=HERE.parent)
        print(done.stdout, end="")
        if done.returncode != 0:
            print(done.stderr, end="", file=sys.stderr)
            summary.append(f"{script}: failed (exit {done.returncode})")
            continue
        kept = [line for line in done.stdout.splitlines() if _is_result(line)]
        summary.extend(f"{script}: {line.strip()}" for line in kept)
    print("== summary")
    print("\n".join(summary))


def _is_result(line: str) -> bool:
    text = line.lower()
    return any(word in text for word in ("ratio", "rss", "propfind", "get", "retr"))


if __name__ == "__main__":
    main()
