"""Multipart uploads: a file sent in 10 MiB chunks, three in flight as the page sends
them (``/api/fs/multipart/init``, ``chunk``, ``complete``), against one
``PUT /api/fs/put`` of the same file, both to a Local storage on the same machine.

Speed: each way --tries times, taking turns; median MB/s from the first request to
the answer of the last (for multipart, ``complete``, which puts the staged parts in
place). Target: multipart >= 0.8x the single put.

Memory: Manifold's resident set (process and children) once idle after a warm-up of
both ways, then its peak over the multipart uploads, sampled every 50 ms and backed by
the kernel's VmHWM (reset just before). Target: under 64 MiB above idle.

Run: .venv/bin/python -m bench.bench_multipart [--tries N] [--size-mib N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from bench.bench_upload import Sampler
from bench.common import (
    MIB,
    admin_token,
    make_random_file,
    manifold_process,
    mount_local,
    reset_peak,
    tree_kib,
)

RSS_TARGET_MIB = 64
RATIO_TARGET = 0.8
CHUNK = 10 * MIB
IN_FLIGHT = 3  # as OpenList's page
READ = MIB
TIMEOUT = httpx.Timeout(600.0)
# How long each multipart upload's complete took (the staged parts put in place).
COMPLETE_SECONDS: list[float] = []


async def _file_body(source: Path, start: int, length: int) -> AsyncIterator[bytes]:
    """``length`` bytes of ``source`` from ``start``, a mebibyte at a time."""
    with source.open("rb") as handle:
        handle.seek(start)
        while length > 0:
            data = handle.read(min(READ, length))
            if not data:
                raise RuntimeError(f"{source} ended early")
            length -= len(data)
            yield data


def _checked(response: httpx.Response) -> dict[str, object]:
    answer: dict[str, object] = response.json()
    if answer.get("code") != 200:
        raise RuntimeError(f"{response.request.url.path}: {answer}")
    return answer


async def single_put(http: httpx.AsyncClient, source: Path, size: int, path: str) -> None:
    headers = {"File-Path": path, "Content-Length": str(size)}
    body = _file_body(source, 0, size)
    _checked(await http.put("/api/fs/put", content=body, headers=headers))


async def multipart(http: httpx.AsyncClient, source: Path, size: int, path: str) -> None:
    headers = {"File-Path": path, "X-File-Size": str(size), "X-Chunk-Size": str(CHUNK)}
    init = _checked(await http.post("/api/fs/multipart/init", headers=headers))["data"]
    assert isinstance(init, dict)
    upload_id, total = init["upload_id"], int(init["total_chunks"])
    pending = iter(range(total))

    async def worker() -> None:
        for index in pending:
            start = index * CHUNK
            length = min(CHUNK, size - start)
            sent = {"X-Upload-Id": upload_id, "X-Chunk-Index": str(index)}
            sent["Content-Length"] = str(length)
            body = _file_body(source, start, length)
            _checked(await http.put("/api/fs/multipart/chunk", content=body, headers=sent))

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    done = {"X-Upload-Id": upload_id}
    started = time.perf_counter()
    _checked(await http.post("/api/fs/multipart/complete", headers=done))
    COMPLETE_SECONDS.append(time.perf_counter() - started)


async def timed(way: str, http: httpx.AsyncClient, source: Path, landed: Path) -> float:
    """Bytes per second of one upload ``way``; what landed is checked, then removed."""
    size = _size(source)
    started = time.perf_counter()
    send = multipart if way == "multipart" else single_put
    await send(http, source, size, "/local/" + landed.name)
    seconds = time.perf_counter() - started
    _clear(landed, size)
    return size / seconds


def _size(path: Path) -> int:
    return path.stat().st_size


def _clear(landed: Path, size: int) -> None:
    """Check what landed, remove it, and write the page cache back, so the next
    upload does not pay for this one."""
    if landed.stat().st_size != size:
        raise RuntimeError(f"stored {landed.stat().st_size} bytes, not {size}")
    landed.unlink()
    os.sync()


async def run(base: str, token: str, pid: int, source: Path, files: Path, args: object) -> None:
    tries = int(getattr(args, "tries", 3))
    speeds: dict[str, list[float]] = {"multipart": [], "put": []}
    headers = {"Authorization": token}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=TIMEOUT) as http:
        # A warm-up of the whole size each way, untimed: the first upload of this size
        # on a machine pays for the kernel's first touch of the page cache it fills
        # (a third slower here), and it would fall on whichever way ran first.
        for way in speeds:
            await timed(way, http, source, files / "upload.bin")
        await asyncio.sleep(1)
        idle_kib = tree_kib(pid, "VmRSS")
        hwm_reset = reset_peak(pid)
        sampled_kib = 0
        for attempt in range(tries):
            order = ("multipart", "put") if attempt % 2 == 0 else ("put", "multipart")
            for way in order:
                if way == "multipart":
                    with Sampler(pid) as sampler:
                        speeds[way].append(await timed(way, http, source, files / "upload.bin"))
                    sampled_kib = max(sampled_kib, sampler.peak_kib)
                else:
                    speeds[way].append(await timed(way, http, source, files / "upload.bin"))
        hwm_kib = tree_kib(pid, "VmHWM") if hwm_reset else 0
    _report(speeds, idle_kib, sampled_kib, hwm_kib, _size(source), tries)


def _report(
    speeds: dict[str, list[float]], idle: int, sampled: int, hwm: int, size: int, tries: int
) -> None:
    peak = max(sampled, hwm)
    delta = (peak - idle) / 1024
    print(f"{size // MIB} MiB file, {tries} uploads each way, 10 MiB chunks, {IN_FLIGHT} in flight")
    print(f"manifold RSS: idle {idle / 1024:.1f} MiB, peak over the multipart uploads", end="")
    print(f" {peak / 1024:.1f} MiB (sampled {sampled / 1024:.1f}, VmHWM {hwm / 1024:.1f})")
    verdict = "PASS" if delta < RSS_TARGET_MIB else "FAIL"
    print(f"  delta {delta:.1f} MiB: {verdict} (target < {RSS_TARGET_MIB} MiB)")
    mine, theirs = statistics.median(speeds["multipart"]), statistics.median(speeds["put"])
    whole = [size / speed for speed in speeds["multipart"]]
    timed_runs = zip(COMPLETE_SECONDS[1:], whole, strict=True)  # [0] is the warm-up
    shares = ", ".join(f"{c:.1f} of {w:.1f} s" for c, w in timed_runs)
    print(f"  multipart time in complete (parts put in place): {shares}")
    for way, runs in speeds.items():
        each = ", ".join(f"{s / 1e6:.0f}" for s in runs)
        print(f"  {way:<10} median {statistics.median(runs) / 1e6:.0f} MB/s (each: {each})")
    verdict = "PASS" if mine / theirs >= RATIO_TARGET else "FAIL"
    print(f"ratio multipart / put: {mine / theirs:.2f}: {verdict} (target >= {RATIO_TARGET})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=2048)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-multipart-"))
    source, files = work / "source.bin", work / "files"
    files.mkdir()
    try:
        make_random_file(source, args.size_mib * MIB)
        os.sync()
        with manifold_process(work / "data") as (port, process):
            base = f"http://127.0.0.1:{port}"
            token = admin_token(base)
            mount_local(base, token, "/local", files)
            asyncio.run(run(base, token, process.pid, source, files, args))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
