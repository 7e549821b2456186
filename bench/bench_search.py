"""Search latency: /api/fs/search over a 100,000-entry index on the default SQLite database,
through a real server, sequentially. Prints p50/p95 per kind of query for the full-text
index (``database``: FTS5 trigrams) and for LIKE (``database_non_full_text``), and for a
user whose hide rule makes the server check every hit's name.
Target: p95 under 100 ms for selective queries with the full-text index.

Run: .venv/bin/python -m bench.bench_search [--queries N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import ADMIN_PASSWORD, http, manifold_server
from manifold.db.engine import open_engine
from manifold.db.search_repo import Node, SearchRepo

WORDS = ("holiday", "report", "invoice", "scan", "backup", "photo", "draft", "export")
SUFFIXES = (".jpg", ".pdf", ".mkv", ".txt", ".tar.gz", ".flac", ".docx")
TOP, SUB, FILES = 100, 10, 100  # 100 x 10 folders of 100 files: 100,000 files

# Query kinds: how many of the 100,000 files each one matches.
QUERIES = {
    "one file (id)": ["0012345", "0099999", "0050505", "0000777"],
    "0.5% (two words)": ["holiday 2003", "scan 2017", "photo 2010", "draft 2021"],
    "12.5% (one word)": ["report", "invoice", "backup", "export"],
    "short (2 chars)": ["jp", "mk", "fl", "gz"],
    "none": ["zebra", "qwertz"],
}
PER_PAGE = 100


def file_name(i: int) -> str:
    word = WORDS[i % len(WORDS)]
    suffix = SUFFIXES[i % len(SUFFIXES)]
    return f"{word}_{2000 + i % 25}-{1 + i % 12:02d}-{1 + i % 28:02d}_{i:07d}_final{suffix}"


def nodes() -> list[Node]:
    made = [Node("/", "bench", True, 0)]
    made += [Node("/bench", f"d{t:03d}", True, 0) for t in range(TOP)]
    i = 0
    for t in range(TOP):
        for s in range(SUB):
            folder = f"/bench/d{t:03d}/s{s:02d}"
            made.append(Node(f"/bench/d{t:03d}", f"s{s:02d}", True, 0))
            for _ in range(FILES):
                made.append(Node(folder, file_name(i), False, i))
                i += 1
    return made


async def fill(database: Path) -> int:
    engine = open_engine(f"sqlite+aiosqlite:///{database}")
    repo = SearchRepo(engine)
    batch = nodes()
    for start in range(0, len(batch), 5000):
        await repo.insert(batch[start : start + 5000])
    count = await repo.count()
    await engine.dispose()
    return count


def post(url: str, body: object, token: str) -> dict[str, object]:
    reply = json.loads(http("POST", url, body, token))
    if reply.get("code") != 200:
        raise RuntimeError(f"Manifold answered {reply}")
    return dict(reply["data"] or {})


def latencies(url: str, token: str, keywords: list[str], count: int) -> tuple[list[float], int]:
    seconds = []
    hits = 0
    for n in range(count):
        body = {"parent": "/", "keywords": keywords[n % len(keywords)], "scope": 0}
        body |= {"page": 1, "per_page": PER_PAGE, "password": ""}
        started = time.perf_counter()
        data = post(url, body, token)
        seconds.append(time.perf_counter() - started)
        hits = max(hits, int(str(data["total"])))
    return seconds, hits


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=200, help="queries per measurement")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        run(work, args.queries)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, queries: int) -> None:
    with manifold_server(work / "data") as port:
        base = f"http://127.0.0.1:{port}"
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        token = str(post(f"{base}/api/auth/login", login, "")["token"])
        started = time.perf_counter()
        count = asyncio.run(fill(work / "data" / "data.db"))
        print(f"indexed {count:,} entries in {time.perf_counter() - started:.1f} s")
        reader = make_reader(base, token)
        url = f"{base}/api/fs/search"
        rows = []
        for kind, keywords in QUERIES.items():
            figures = []
            for mode, who in (
                ("database", token),
                ("database_non_full_text", token),
                ("database", reader),
            ):
                save(base, token, "search_index", mode)
                latencies(url, who, keywords, 3)  # warm up
                seconds, hits = latencies(url, who, keywords, queries)
                figures += [percentile(seconds, 0.5), percentile(seconds, 0.95)]
            rows.append((kind, hits, figures))
    print(f"\n/api/fs/search, {queries} sequential queries each, per_page {PER_PAGE}, ms")
    head = f"{'query':<20}{'hits':>7}"
    head += f"{'fts p50':>9}{'fts p95':>9}{'like p50':>10}{'like p95':>10}"
    head += f"{'hide p50':>10}{'hide p95':>10}"
    print(head)
    for kind, hits, figures in rows:
        ms = [f * 1000 for f in figures]
        line = f"{kind:<20}{hits:>7}{ms[0]:>9.1f}{ms[1]:>9.1f}{ms[2]:>10.1f}{ms[3]:>10.1f}"
        print(line + f"{ms[4]:>10.1f}{ms[5]:>10.1f}")
    print("(fts: database; like: database_non_full_text; hide: a user under a hide rule)")
    print(f"(median of all fts p50: {statistics.median(r[2][0] for r in rows) * 1000:.1f} ms)")


def save(base: str, token: str, key: str, value: str) -> None:
    post(f"{base}/api/admin/setting/save", [{"key": key, "value": value}], token)


def make_reader(base: str, token: str) -> str:
    """A user without the see-hidden permission, under a hide rule on /bench."""
    user = {"username": "reader", "password": "reader-pw", "permission": 0}
    post(f"{base}/api/admin/user/create", user, token)
    post(f"{base}/api/admin/meta/create", {"path": "/bench", "hide": "^nothing$"}, token)
    login = {"username": "reader", "password": "reader-pw"}
    return str(post(f"{base}/api/auth/login", login, "")["token"])


if __name__ == "__main__":
    main()
