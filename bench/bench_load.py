"""Mixed load: many concurrent clients for a fixed time against one server, with the
latency of each kind of request, the errors, and the server's memory.

Setup: a fresh data folder; a Local storage at /local over ~500 small files in a few
folders; two ordinary users whose base paths are their home folders, each holding a
password-protected folder; the database search index, built before the load.

Load: ``--clients`` clients (default 50), each with its own connection, issue requests
back to back for ``--seconds``. The ``busy`` mix (default): listings 35%, fs/get 25%,
downloads through /d 25% (whole small files and ranges), uploads of new files 10%,
search 5%. The ``wide`` mix adds /api/me, public settings, a password-protected
folder and mkdir -> rename -> remove in a folder of their own. A few clients also send logins
with a wrong password; the server locks their address out, and those answers (400,
429) count as expected, apart from errors. Errors are HTTP 5xx, an ``internal error``
envelope, a connection error or a wrong download; any other non-200 envelope counts
as unexpected. The clients run in ``--procs`` processes of their own (default 1), so
the load generator never shares the server's process; on a two-core machine they
still share the CPU, which is the same for every run compared. A minimal keep-alive
HTTP/1.1 client keeps the generator's CPU to a tenth or so of the server's.

The server's resident set (VmRSS of its process tree) is sampled every 0.5 s.

There is no external peer: ``--compare DIR2`` runs the same load against the code in
``--checkout`` (before) and in DIR2 (after), one after the other, and prints ratios
after/before (below 1: the after code is faster or smaller).
Each server runs as ``PYTHONPATH=DIR <this python> -m manifold.cli server`` in DIR.

After the load, every upload that was answered must be found by search: the count of
those missing is printed as lost index updates (the index is written in the
background, so it gets a moment to catch up first). Beside it, the index lag: every
``LAG_SAMPLE_EVERY``-th upload of a client carries a marker word, and a probe in each
generator process searches (as the admin) for the markers of the samples not yet
found, every ``LAG_POLL_SECONDS``, during the load and up to ``LAG_WAIT`` seconds
after it; a sample's lag is the time from its upload's answer to the answer of the
first search that found it (so it includes up to one poll interval). Samples never
found count as slower than any found.

Run: .venv/bin/python -m bench.bench_load [--seconds 60] [--clients 50] [--procs 1]
     [--mix busy|wide] [--bad-logins N] [--checkout DIR] [--compare DIR2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from urllib.parse import quote, urlsplit

from bench.common import ADMIN_PASSWORD, ROOT, free_port, http, stop, tree_kib, wait_for_port

USER_PASSWORD = "bench-user-pw"
FOLDER_PASSWORD = "open-sesame"
USERS = ("alice", "bob")
# Write permission bits as AList numbers them: write, rename, remove.
USER_PERMISSION = (1 << 3) | (1 << 4) | (1 << 7)
SAMPLE_SECONDS = 0.5
PER_PAGE = 30
WORDS = ("holiday", "report", "invoice", "scan", "backup", "photo", "draft", "export")
SUFFIXES = (".jpg", ".pdf", ".txt", ".flac", ".docx")

# The mixes: weights of each kind of request for an ordinary client. "busy" is what a
# busy file server sees; "wide" touches every hot endpoint, writes of every kind too.
MIXES = {
    "busy": {
        "list": 35,
        "get": 25,
        "download": 15,
        "download range": 10,
        "upload": 10,
        "search": 5,
    },
    "search": {"search": 1},  # search alone: its throughput
    "wide": {
        "list": 22,
        "list locked": 4,
        "get": 12,
        "download": 10,
        "download range": 8,
        "me": 8,
        "settings": 8,
        "search": 7,
        "upload": 8,
        "write": 6,  # the next of mkdir, rename, remove in the client's own folder
    },
}
# Each kind of the busy mix alone (bench_scale --per-kind: what one core carries of it).
MIXES |= {f"only {kind}": {kind: 1} for kind in MIXES["busy"]}
BAD_LOGIN_SHARE = 0.3  # of a bad-login client's requests
EXPECTED = {"login fail": {400, 429}}
JSON_HEADERS = {"Content-Type": "application/json"}
REQUEST_TIMEOUT = 30.0
LAG_SAMPLE_EVERY = 5  # uploads per client between two lag samples
LAG_GROUP = 20  # samples sharing one marker word, found by one search
LAG_POLL_SECONDS = 0.2
LAG_WAIT = 30.0  # after the load, for the samples not yet found


# --- the tree of files --------------------------------------------------------------


def file_name(i: int) -> str:
    word = WORDS[i % len(WORDS)]
    return f"{word}_{2000 + i % 25}-{1 + i % 12:02d}_{i:05d}{SUFFIXES[i % len(SUFFIXES)]}"


def make_tree(root: Path, clients: int) -> None:
    """pub/{music,photos,docs} of 80 files; home/<user>/{docs,photos} of 60 and locked of
    15; scratch folders, one per client, under /local/scratch or the user's home."""
    rng = random.Random(7)
    block = os.urandom(256 * 1024)
    counter = 0

    def fill(folder: Path, count: int) -> None:
        nonlocal counter
        folder.mkdir(parents=True)
        for _ in range(count):
            size = rng.choice((1, 4, 16, 64, 256)) * 1024 - rng.randrange(512)
            (folder / file_name(counter)).write_bytes(block[:size])
            counter += 1

    for name in ("music", "photos", "docs"):
        fill(root / "pub" / name, 80)
    for user in USERS:
        fill(root / "home" / user / "docs", 60)
        fill(root / "home" / user / "photos", 60)
        fill(root / "home" / user / "locked", 15)
    for i in range(clients):
        for base in (root / "scratch", *(root / "home" / u / "scratch" for u in USERS)):
            (base / f"c{i:02d}").mkdir(parents=True)


# --- the server ----------------------------------------------------------------------


def checkout_commit(checkout: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(checkout), "log", "-1", "--format=%h %s"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()[:72] or "(not a git checkout)"


@contextlib.contextmanager
def server(checkout: Path, data: Path, log: Path) -> Iterator[tuple[int, int]]:
    """Run ``checkout``'s Manifold; yields its port and pid. Its log goes to ``log``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    env |= {"MANIFOLD_ADMIN_PASSWORD": ADMIN_PASSWORD, "MANIFOLD_LOG_LEVEL": "warning"}
    probe = [sys.executable, "-c", "import manifold; print(manifold.__file__)"]
    where = subprocess.run(probe, env=env, cwd=checkout, capture_output=True, text=True)
    if not where.stdout.strip().startswith(str(checkout.resolve())):
        raise RuntimeError(f"{checkout} does not provide manifold: {where.stdout}{where.stderr}")
    port = free_port()
    argv = [sys.executable, "-m", "manifold.cli", "server", "--data", str(data)]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, env=env, cwd=checkout, start_new_session=True, stdout=out, stderr=out
        )
    try:
        wait_for_port(port)
        yield port, process.pid
    finally:
        stop(process)


def call(base: str, path: str, body: object = None, token: str = "") -> object:
    reply = json.loads(http("POST" if body is not None else "GET", base + path, body, token))
    if reply.get("code") != 200:
        raise RuntimeError(f"{path} answered {reply}")
    return reply.get("data")


def setup(base: str, files: Path) -> tuple[str, dict[str, str], list[tuple[str, str, int]]]:
    """Storage, users, folder passwords and the search index. Returns the admin's token,
    each user's token, and every downloadable file as (full path, sign, size)."""
    token = str(
        call(base, "/api/auth/login", {"username": "admin", "password": ADMIN_PASSWORD})["token"]
    )  # type: ignore[index]
    addition = json.dumps({"root_folder_path": str(files)})
    call(
        base,
        "/api/admin/storage/create",
        {"mount_path": "/local", "driver": "Local", "addition": addition},
        token,
    )
    tokens = {}
    for user in USERS:
        body = {"username": user, "password": USER_PASSWORD, "base_path": f"/local/home/{user}"}
        call(base, "/api/admin/user/create", {**body, "permission": USER_PERMISSION}, token)
        meta = {"path": f"/local/home/{user}/locked", "password": FOLDER_PASSWORD, "p_sub": True}
        call(base, "/api/admin/meta/create", meta, token)
        login = {"username": user, "password": USER_PASSWORD}
        tokens[user] = str(call(base, "/api/auth/login", login)["token"])  # type: ignore[index]
    call(base, "/api/admin/setting/save", [{"key": "search_index", "value": "database"}], token)
    call(base, "/api/admin/index/build", {}, token)
    deadline = time.monotonic() + 120
    while True:
        progress = call(base, "/api/admin/index/progress", token=token)
        assert isinstance(progress, dict)
        if progress.get("error"):
            raise RuntimeError(f"index build failed: {progress}")
        if progress.get("is_done"):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"index build not done after 120 s: {progress}")
        time.sleep(0.2)
    signed = []
    folders = [f"/local/pub/{n}" for n in ("music", "photos", "docs")]
    folders += [f"/local/home/{u}/{n}" for u in USERS for n in ("docs", "photos")]
    for folder in folders:
        listing = call(base, "/api/fs/list", {"path": folder, "page": 1, "per_page": 0}, token)
        assert isinstance(listing, dict)
        for entry in listing["content"]:
            signed.append((f"{folder}/{entry['name']}", entry["sign"], entry["size"]))
    return token, tokens, signed


# --- the load generator (runs in processes of its own) -------------------------------


@dataclass
class ClientPlan:
    index: int
    token: str
    prefix: str  # the user's base path, which the server adds to every path it is given
    folders: list[str]  # as the client sees them
    locked: str  # a password-protected folder as the client sees it, or ""
    files: list[tuple[str, int]]  # (path as the client sees it, size)
    downloads: list[tuple[str, str, int]]  # (full path, sign, size)
    scratch: str
    bad_login: bool
    mix: str = "busy"


@dataclass
class Plan:
    base: str
    start_at: float
    seconds: float
    clients: list[ClientPlan]
    admin: str = ""  # the lag probe searches as the admin, who sees every upload
    tag: int = 0  # this generator process's number, in its lag markers


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)
    unexpected: dict[str, int] = field(default_factory=dict)
    samples: dict[str, str] = field(default_factory=dict)  # one message per problem kind
    cpu_seconds: float = 0.0
    uploaded: list[str] = field(default_factory=list)  # full paths of answered uploads
    lags: list[float] = field(default_factory=list)  # seconds, of the samples found
    lag_unfound: int = 0

    def add(self, kind: str, ms: float, outcome: str, detail: str = "") -> None:
        self.latencies.setdefault(kind, []).append(ms)
        if outcome != "ok":
            counter = getattr(self, outcome)
            counter[kind] = counter.get(kind, 0) + 1
            if detail and outcome != "expected":
                self.samples.setdefault(f"{kind} {outcome}", detail[:200])

    def merge(self, other: Tally) -> None:
        for kind, values in other.latencies.items():
            self.latencies.setdefault(kind, []).extend(values)
        for name in ("errors", "expected", "unexpected"):
            mine = getattr(self, name)
            for kind, n in getattr(other, name).items():
                mine[kind] = mine.get(kind, 0) + n
        for key, text in other.samples.items():
            self.samples.setdefault(key, text)
        self.cpu_seconds += other.cpu_seconds
        self.uploaded += other.uploaded
        self.lags += other.lags
        self.lag_unfound += other.lag_unfound


class Reply:
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body


class Connection:
    """One keep-alive HTTP/1.1 connection, just enough for these requests: it costs a
    fraction of a general client's CPU, so that the load generator is not the
    bottleneck on a machine whose cores it shares with the server."""

    def __init__(self, base: str, token: str) -> None:
        parts = urlsplit(base)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.token = token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
        self.reader = self.writer = None

    async def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        auth: bool = True,
    ) -> Reply:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        if auth:
            lines.append(f"Authorization: {self.token}")
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if body or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode()
        async with asyncio.timeout(REQUEST_TIMEOUT):
            fresh = self.writer is None
            try:
                return await self._exchange(head, body)
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.close()
                if fresh:
                    raise
            # A kept-alive connection the server had closed: once more on a new one.
            return await self._exchange(head, body)

    async def _exchange(self, head: bytes, body: bytes) -> Reply:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self.writer.write(body)
        await self.writer.drain()
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = raw.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        fields = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        if "content-length" in fields:
            data = await self.reader.readexactly(int(fields["content-length"]))
        elif fields.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunks.append(await self.reader.readexactly(size + 2))
                if size == 0:
                    break
            data = b"".join(c[:-2] for c in chunks)
        else:
            data = await self.reader.read()
            fields["connection"] = "close"
        if fields.get("connection", "").lower() == "close":
            await self.close()
        return Reply(status, data)


def classify_envelope(kind: str, response: Reply) -> tuple[str, str]:
    text = response.body[:150].decode(errors="replace")
    if response.status >= 500:
        return "errors", f"HTTP {response.status}: {text}"
    try:
        reply = json.loads(response.body)
    except ValueError:
        return "errors", f"not JSON, HTTP {response.status}: {text}"
    code, message = reply.get("code"), str(reply.get("message", ""))
    if code == 200:
        return "ok", ""
    if "internal error" in message:
        return "errors", f"{code} {message}"
    if code in EXPECTED.get(kind, ()):
        return "expected", ""
    return "unexpected", f"{code} {message}"


class LagProbe:
    """Times sampled uploads from their answer until search first finds them."""

    def __init__(self, base: str, admin: str, tag: int) -> None:
        self.http = Connection(base, admin)
        self.tag = tag
        self.sampled = 0
        self.pending: dict[str, dict[str, float]] = {}  # marker -> name -> answered at

    def marker(self) -> str:
        """The marker word of the next sample: a keyword no other name holds."""
        group = self.sampled // LAG_GROUP
        self.sampled += 1
        return f"lag{self.tag}g{group:05d}z"

    def answered(self, marker: str, name: str) -> None:
        self.pending.setdefault(marker, {})[name] = time.monotonic()

    async def run(self, clients_done: asyncio.Event, tally: Tally) -> None:
        deadline = 0.0
        try:
            while not clients_done.is_set() or (self.pending and time.monotonic() < deadline):
                for marker in list(self.pending):
                    await self.poll(marker, tally)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(clients_done.wait(), LAG_POLL_SECONDS)
                deadline = deadline or (time.monotonic() + LAG_WAIT if clients_done.is_set() else 0)
        finally:
            tally.lag_unfound += sum(len(names) for names in self.pending.values())
            await self.http.close()

    async def poll(self, marker: str, tally: Tally) -> None:
        body = {"parent": "/", "keywords": marker, "scope": 2, "page": 1, "per_page": 100}
        try:
            data = json.dumps(body).encode()
            reply = await self.http.request("POST", "/api/fs/search", data, JSON_HEADERS)
            content = json.loads(reply.body)["data"]["content"] or []
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, TypeError):
            await self.http.close()
            return
        now, names = time.monotonic(), self.pending[marker]
        for hit in content:
            answered = names.pop(hit["name"], None)
            if answered is not None:
                tally.lags.append(now - answered)
        if not names:
            del self.pending[marker]


class Client:
    def __init__(self, plan: ClientPlan, base: str, tally: Tally, probe: LagProbe) -> None:
        self.plan = plan
        self.tally = tally
        self.probe = probe
        self.rng = random.Random(plan.index)
        self.step = 0  # of the mkdir -> rename -> remove cycle
        self.made = 0
        self.uploads = 0
        self.http = Connection(base, plan.token)
        mix = MIXES[plan.mix]
        self.kinds = list(mix)
        self.weights = [mix[k] for k in self.kinds]
        if not plan.locked and "list locked" in mix:
            self.weights[self.kinds.index("list locked")] = 0

    async def run(self, end: float) -> None:
        try:
            while time.monotonic() < end:
                if self.plan.bad_login and self.rng.random() < BAD_LOGIN_SHARE:
                    kind = "login fail"
                else:
                    kind = self.rng.choices(self.kinds, self.weights)[0]
                await self.one(kind)
        finally:
            await self.http.close()

    async def one(self, kind: str) -> None:
        if kind == "write":
            kind = ("mkdir", "rename", "remove")[self.step]
        started = time.perf_counter()
        try:
            outcome, detail = await getattr(self, "do_" + kind.replace(" ", "_"))()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
            await self.http.close()
            outcome, detail = "errors", f"{type(exc).__name__}: {exc}"
        ms = (time.perf_counter() - started) * 1000
        self.tally.add(kind, ms, outcome, detail)

    async def envelope(self, kind: str, path: str, body: object) -> tuple[str, str]:
        data = json.dumps(body).encode()
        response = await self.http.request("POST", path, data, JSON_HEADERS)
        return classify_envelope(kind, response)

    async def do_list(self) -> tuple[str, str]:
        folder = self.rng.choice(self.plan.folders)
        per_page = 0 if self.rng.random() < 0.1 else PER_PAGE
        body = {"path": folder, "page": self.rng.randint(1, 3), "per_page": per_page}
        return await self.envelope("list", "/api/fs/list", body)

    async def do_list_locked(self) -> tuple[str, str]:
        body = {"path": self.plan.locked, "password": FOLDER_PASSWORD, "page": 1, "per_page": 0}
        return await self.envelope("list locked", "/api/fs/list", body)

    async def do_get(self) -> tuple[str, str]:
        path = self.rng.choice(self.plan.files)[0]
        return await self.envelope("get", "/api/fs/get", {"path": path})

    async def download(self, kind: str, ranged: bool) -> tuple[str, str]:
        path, sign, size = self.rng.choice(self.plan.downloads)
        url = f"/d{quote(path)}?sign={quote(sign)}"
        headers = {}
        want, status = size, 200
        if ranged:
            first = self.rng.randrange(size)
            last = min(size - 1, first + self.rng.randrange(64 * 1024))
            headers["Range"] = f"bytes={first}-{last}"
            want, status = last - first + 1, 206
        response = await self.http.request("GET", url, headers=headers, auth=False)
        if response.status != status or len(response.body) != want:
            got = f"HTTP {response.status}, {len(response.body)} bytes"
            return "errors", f"{got}, wanted {status}, {want} bytes"
        return "ok", ""

    async def do_download(self) -> tuple[str, str]:
        return await self.download("download", False)

    async def do_download_range(self) -> tuple[str, str]:
        return await self.download("download range", True)

    async def do_me(self) -> tuple[str, str]:
        return classify_envelope("me", await self.http.request("GET", "/api/me"))

    async def do_settings(self) -> tuple[str, str]:
        response = await self.http.request("GET", "/api/public/settings", auth=False)
        return classify_envelope("settings", response)

    async def do_search(self) -> tuple[str, str]:
        keywords = self.rng.choice(WORDS)
        if self.rng.random() < 0.5:
            keywords += f" {2000 + self.rng.randrange(25)}"
        body = {"parent": "/", "keywords": keywords, "scope": 0, "page": 1, "per_page": 20}
        return await self.envelope("search", "/api/fs/search", body)

    async def do_upload(self) -> tuple[str, str]:
        # A new name each time: afterwards, every answered upload must be in the index.
        marker = self.probe.marker() if self.uploads % LAG_SAMPLE_EVERY == 0 else ""
        name = upload_name(self.plan.index, self.uploads, marker)
        path = f"{self.plan.scratch}/{name}"
        self.uploads += 1
        data = self.rng.randbytes(self.rng.choice((1, 8, 64)) * 1024)
        headers = {"File-Path": quote(path), "Overwrite": "true", "As-Task": "false"}
        response = await self.http.request("PUT", "/api/fs/put", data, headers)
        outcome = classify_envelope("upload", response)
        if outcome[0] == "ok":
            self.tally.uploaded.append(self.plan.prefix + path)
            if marker:
                self.probe.answered(marker, name)
        return outcome

    async def do_mkdir(self) -> tuple[str, str]:
        self.step = 1
        body = {"path": f"{self.plan.scratch}/d{self.made}"}
        return await self.envelope("mkdir", "/api/fs/mkdir", body)

    async def do_rename(self) -> tuple[str, str]:
        self.step = 2
        body = {"path": f"{self.plan.scratch}/d{self.made}", "name": f"r{self.made}"}
        return await self.envelope("rename", "/api/fs/rename", body)

    async def do_remove(self) -> tuple[str, str]:
        self.step = 0
        body = {"dir": self.plan.scratch, "names": [f"r{self.made}"]}
        self.made += 1
        return await self.envelope("remove", "/api/fs/remove", body)

    async def do_login_fail(self) -> tuple[str, str]:
        body = {"username": USERS[self.plan.index % 2], "password": "not-the-password"}
        data = json.dumps(body).encode()
        response = await self.http.request("POST", "/api/auth/login", data, JSON_HEADERS, False)
        return classify_envelope("login fail", response)


def upload_name(client: int, n: int, marker: str = "") -> str:
    return f"{upload_prefix(client)}{n:05d}{marker and '-' + marker}.bin"


def upload_prefix(client: int) -> str:
    return f"upl{client:02d}x"


def lost_index_updates(base: str, admin: str, uploaded: list[str], wait: float = 30.0) -> int:
    """How many answered uploads the search index does not have, once it has had
    ``wait`` seconds at most to catch up (the index is written in the background)."""
    deadline = time.monotonic() + wait
    while True:
        missing = set(uploaded)
        for client in sorted({int(p.rsplit("/", 1)[1][3:5]) for p in uploaded}):
            page = 1
            while True:
                body = {"parent": "/", "keywords": upload_prefix(client), "scope": 2,
                        "page": page, "per_page": 1000}  # fmt: skip
                answer = call(base, "/api/fs/search", body, admin)  # the envelope's data
                assert isinstance(answer, dict), answer
                content = answer["content"] or []
                for hit in content:
                    missing.discard(f"{hit['parent'].rstrip('/')}/{hit['name']}")
                if len(content) < 1000:
                    break
                page += 1
        if not missing or time.monotonic() > deadline:
            return len(missing)
        time.sleep(2.0)


async def drive(plan: Plan) -> Tally:
    tally = Tally()
    probe = LagProbe(plan.base, plan.admin, plan.tag)
    clients = [Client(c, plan.base, tally, probe) for c in plan.clients]
    await asyncio.sleep(max(0.0, plan.start_at - time.time()))
    end = time.monotonic() + plan.seconds
    clients_done = asyncio.Event()
    probing = asyncio.create_task(probe.run(clients_done, tally))
    await asyncio.gather(*(c.run(end) for c in clients))
    clients_done.set()
    await probing
    return tally


def generate(plan: Plan) -> Tally:
    """One load-generator process."""
    cpu = time.process_time()
    tally = asyncio.run(drive(plan))
    tally.cpu_seconds = time.process_time() - cpu
    return tally


def client_plans(
    clients: int,
    bad_logins: int,
    admin: str,
    users: dict[str, str],
    signed: list[tuple[str, str, int]],
) -> list[ClientPlan]:
    plans = []
    bad = {round(i * clients / bad_logins) + 1 for i in range(bad_logins)} if bad_logins else set()
    for i in range(clients):
        who = ("admin", *USERS)[i % 3]
        if who == "admin":
            prefix, token, scratch = "", admin, f"/local/scratch/c{i:02d}"
            folders = [f"/local/pub/{n}" for n in ("music", "photos", "docs")]
            folders += [f"/local/home/{USERS[0]}/docs"]
            locked = f"/local/home/{USERS[i % 2]}/locked"
        else:
            prefix, token, scratch = f"/local/home/{who}", users[who], f"/scratch/c{i:02d}"
            folders = ["/docs", "/photos"]
            locked = "/locked"
        downloads = [s for s in signed if s[0].rsplit("/", 1)[0] in {prefix + f for f in folders}]
        files = [(p[len(prefix) :], size) for p, _, size in downloads]
        plans.append(
            ClientPlan(
                i, token, prefix, folders, locked, files, downloads, scratch, i % clients in bad
            )
        )
    return plans


# --- one run ------------------------------------------------------------------------


class RssSampler:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.peak_kib = max(self.peak_kib, tree_kib(self.pid, "VmRSS"))
            if self._stop.wait(SAMPLE_SECONDS):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def cpu_seconds(pid: int) -> float:
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def lag_percentile(tally: Tally, share: float) -> float | None:
    """A percentile of the index lag in seconds; None when it falls among the samples
    never found (slower than any found)."""
    found = sorted(tally.lags)
    total = len(found) + tally.lag_unfound
    if not total:
        return 0.0
    rank = min(total - 1, int(share * total))
    return round(found[rank], 2) if rank < len(found) else None


def run_once(checkout: Path, args: argparse.Namespace) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="bench-load-"))
    try:
        files = work / "files"
        make_tree(files, args.clients)
        log = work / "server.log"
        with server(checkout, work / "data", log) as (port, pid):
            base = f"http://127.0.0.1:{port}"
            started = time.perf_counter()
            admin, users, signed = setup(base, files)
            setup_seconds = time.perf_counter() - started
            plans = client_plans(args.clients, args.bad_logins, admin, users, signed)
            for plan in plans:
                plan.mix = args.mix
            start_at = time.time() + 3.0  # the generator processes start meanwhile
            shares = [plans[p :: args.procs] for p in range(args.procs)]
            context = get_context("spawn")
            with ProcessPoolExecutor(args.procs, mp_context=context) as pool:
                futures = [
                    pool.submit(generate, Plan(base, start_at, args.seconds, share, admin, tag))
                    for tag, share in enumerate(shares)
                ]
                time.sleep(max(0.0, start_at - time.time()))
                rss_start = tree_kib(pid, "VmRSS")
                cpu_start = cpu_seconds(pid)
                with RssSampler(pid) as sampler:
                    tally = Tally()
                    for future in futures:
                        tally.merge(future.result())
                server_cpu = cpu_seconds(pid) - cpu_start
                rss_end = tree_kib(pid, "VmRSS")
            lost = lost_index_updates(base, admin, tally.uploaded)
        log_text = log.read_text(errors="replace")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summarise(
        checkout,
        args,
        tally,
        setup_seconds,
        server_cpu,
        log_text,
        (rss_start, max(sampler.peak_kib, rss_start, rss_end), rss_end),
        lost,
    )


def summarise(
    checkout: Path,
    args: argparse.Namespace,
    tally: Tally,
    setup_seconds: float,
    server_cpu: float,
    log_text: str,
    rss: tuple[int, int, int],
    lost: int,
) -> dict[str, object]:
    kinds: dict[str, dict[str, float]] = {}
    everything: list[float] = []
    for kind in sorted(tally.latencies, key=lambda k: -len(tally.latencies[k])):
        values = tally.latencies[kind]
        everything += values
        kinds[kind] = {
            "count": len(values),
            "p50_ms": round(percentile(values, 0.5), 2),
            "p95_ms": round(percentile(values, 0.95), 2),
            "p99_ms": round(percentile(values, 0.99), 2),
            "errors": tally.errors.get(kind, 0),
            "expected": tally.expected.get(kind, 0),
            "unexpected": tally.unexpected.get(kind, 0),
        }
    return {
        "checkout": str(checkout),
        "commit": checkout_commit(checkout),
        "seconds": args.seconds,
        "clients": args.clients,
        "procs": args.procs,
        "setup_s": round(setup_seconds, 1),
        "requests": len(everything),
        "rps": round(len(everything) / args.seconds, 1),
        "p50_ms": round(percentile(everything, 0.5), 2),
        "p95_ms": round(percentile(everything, 0.95), 2),
        "p99_ms": round(percentile(everything, 0.99), 2),
        "errors": sum(tally.errors.values()),
        "uploads": len(tally.uploaded),
        "lost_index_updates": lost,
        "index_lag_samples": len(tally.lags) + tally.lag_unfound,
        "index_lag_unfound": tally.lag_unfound,
        "index_lag_p50_s": lag_percentile(tally, 0.5),
        "index_lag_p99_s": lag_percentile(tally, 0.99),
        "mix": args.mix,
        "expected": sum(tally.expected.values()),
        "unexpected": sum(tally.unexpected.values()),
        "rss_start_mib": round(rss[0] / 1024, 1),
        "rss_peak_mib": round(rss[1] / 1024, 1),
        "rss_end_mib": round(rss[2] / 1024, 1),
        "server_cpu_s": round(server_cpu, 1),
        "generator_cpu_s": round(tally.cpu_seconds, 1),
        "server_log_unhandled": log_text.count("unhandled "),
        "kinds": kinds,
        "samples": tally.samples,
    }


def print_run(result: dict[str, object]) -> None:
    print(f"\n{result['checkout']}  [{result['commit']}]")
    print(
        f"{result['clients']} clients in {result['procs']} process(es), {result['seconds']} s; "
        f"setup {result['setup_s']} s"
    )
    header = f"{'kind':<16}{'count':>8}{'req/s':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
    print(header + f"{'errors':>8}{'expected':>10}{'unexpected':>12}")
    kinds = result["kinds"]
    assert isinstance(kinds, dict)
    seconds = float(str(result["seconds"]))
    rows = [(k, v) for k, v in kinds.items()]
    rows.append(("overall", {**result, "count": result["requests"]}))
    for kind, row in rows:
        print(
            f"{kind:<16}{row['count']:>8}{row['count'] / seconds:>8.1f}{row['p50_ms']:>9.1f}"
            f"{row['p95_ms']:>9.1f}{row['p99_ms']:>9.1f}{row['errors']:>8}{row['expected']:>10}{row['unexpected']:>12}"
        )
    print(
        f"server RSS MiB: start {result['rss_start_mib']}, peak {result['rss_peak_mib']}, "
        f"end {result['rss_end_mib']}; CPU s: server {result['server_cpu_s']}, "
        f"load generator {result['generator_cpu_s']}; "
        f"'unhandled' lines in the server log: {result['server_log_unhandled']}"
    )
    print(
        f"mix {result['mix']}; uploads answered {result['uploads']}, "
        f"missing from the search index afterwards (lost updates): {result['lost_index_updates']}"
    )
    never = f"not found within {LAG_WAIT:.0f} s of the load's end"
    p50, p99 = (
        never if value is None else f"{value} s"
        for value in (result["index_lag_p50_s"], result["index_lag_p99_s"])
    )
    print(
        f"index lag (upload answered -> first search hit), {result['index_lag_samples']} samples, "
        f"{result['index_lag_unfound']} never found: p50 {p50}, p99 {p99} (target: p99 under 2 s)"
    )
    kinds_p99 = {k: v["p99_ms"] for k, v in kinds.items()}
    if kinds_p99.get("list"):
        worst = max(kinds_p99, key=lambda k: kinds_p99[k])
        print(
            f"slowest p99: {worst} at {kinds_p99[worst] / kinds_p99['list']:.1f}x the list p99 "
            "(target: at most 4x); overall p99 target: under 250 ms"
        )
    samples = result["samples"]
    assert isinstance(samples, dict)
    for key, text in samples.items():
        print(f"  first {key}: {text}")


def ratio(after: float, before: float) -> float:
    return after / before if before else float("nan")


def print_ratios(before: dict[str, object], after: dict[str, object]) -> dict[str, float]:
    print("\nafter/before (below 1: after is faster or smaller; req/s above 1: after is faster)")
    print(f"{'kind':<16}{'p50':>8}{'p99':>8}{'req/s':>8}")
    kinds_b, kinds_a = before["kinds"], after["kinds"]
    assert isinstance(kinds_b, dict) and isinstance(kinds_a, dict)
    for kind, row in kinds_b.items():
        if kind in kinds_a:
            other = kinds_a[kind]
            print(
                f"{kind:<16}{ratio(other['p50_ms'], row['p50_ms']):>8.2f}"
                f"{ratio(other['p99_ms'], row['p99_ms']):>8.2f}"
                f"{ratio(other['count'], row['count']):>8.2f}"
            )
    figures = {
        "p50": ratio(float(str(after["p50_ms"])), float(str(before["p50_ms"]))),
        "p99": ratio(float(str(after["p99_ms"])), float(str(before["p99_ms"]))),
        "rps": ratio(float(str(after["rps"])), float(str(before["rps"]))),
        "rss_peak": ratio(float(str(after["rss_peak_mib"])), float(str(before["rss_peak_mib"]))),
    }
    print(
        f"{'overall':<16}{figures['p50']:>8.2f}{figures['p99']:>8.2f}{figures['rps']:>8.2f}"
        f"   RSS peak {figures['rss_peak']:.2f}"
    )
    return {k: round(v, 3) for k, v in figures.items()}


def brief(result: dict[str, object]) -> dict[str, object]:
    """The summary without the per-kind details and message samples, for one JSON line."""
    kinds = result["kinds"]
    assert isinstance(kinds, dict)
    short = {k: v for k, v in result.items() if k not in ("kinds", "samples")}
    short["kinds"] = {
        k: [v["count"], v["p50_ms"], v["p99_ms"], v["errors"]] for k, v in kinds.items()
    }
    return short


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--procs", type=int, default=1, help="load-generator processes")
    parser.add_argument("--bad-logins", type=int, default=0, help="clients that also fail logins")
    parser.add_argument("--mix", choices=sorted(MIXES), default="busy")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the code to run (before)")
    parser.add_argument("--compare", type=Path, help="a second checkout to run after (after)")
    args = parser.parse_args()
    if not 0 <= args.bad_logins <= args.clients or args.procs < 1:
        parser.error("need 0 <= --bad-logins <= --clients and --procs >= 1")
    os.system("uptime")  # the load on the machine, for judging the figures
    before = run_once(args.checkout.resolve(), args)
    print_run(before)
    if args.compare is None:
        print("\n" + json.dumps(brief(before), separators=(",", ":")))
        return
    after = run_once(args.compare.resolve(), args)
    print_run(after)
    ratios = print_ratios(before, after)
    summary = {"before": brief(before), "after": brief(after), "ratios": ratios}
    print("\n" + json.dumps(summary, separators=(",", ":")))


if __name__ == "__main__":
    main()
