"""Figures for the capacity model: database round trips (and Redis commands) per kind of
request, and memory per cached listing entry.

Round trips: Manifold runs in this process (its app called through ASGI, no network),
on a fresh SQLite database by default, or with ``--cluster`` on a private PostgreSQL
and Redis with ``cluster: true`` as an instance of several would. Each kind of request
of bench_load is sent ``--repeat`` times after a warm-up; a SQLAlchemy
``before_cursor_execute`` listener counts the statements sent to the database, and
Redis's own ``total_commands_processed`` counts what reached Redis. Background work a
request causes (the search index's update after an upload) is waited for and counted
with it.

Memory: an FTP storage (a private pyftpdlib server; FTP listings are cached, Local's
are not) with ``--folders`` folders of ``--entries`` files each; every folder is listed
whole and then paged through, with ``tracemalloc`` tracing; the growth of traced memory,
divided by the entries cached, is the cost of one cached entry with its derived views.

Run: .venv/bin/python -m bench.capacity [--cluster] [--repeat 50] [--folders 20] [--entries 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import tempfile
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import redis.asyncio as aioredis
from sqlalchemy import event

from bench import bench_load as load
from manifold.app import create_app
from manifold.config import load_config
from manifold.container import Services
from tests.drivers.ftp_server import pyftpdlib_server
from tests.fixtures.dbservers import start_postgres
from tests.fixtures.redisserver import start_redis

PASSWORD = "capacity-admin-pw"


class Counter:
    def __init__(self) -> None:
        self.statements = 0

    def __call__(self, *args: object) -> None:
        self.statements += 1


@contextlib.asynccontextmanager
async def manifold(
    data: Path, env: dict[str, str]
) -> AsyncIterator[tuple[Services, httpx.AsyncClient]]:
    services = Services.build(load_config(data, env=env))
    await services.start(admin_password=PASSWORD)
    app = create_app(services.config, services)
    transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 40000))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://m.test") as client:
            yield services, client
    finally:
        await services.stop()


async def ok(client: httpx.AsyncClient, path: str, body: object = None, token: str = "") -> Any:
    headers = {"Authorization": token} if token else {}
    if body is None:
        reply = await client.get(path, headers=headers)
    else:
        reply = await client.post(path, json=body, headers=headers)
    answer = reply.json()
    if answer["code"] != 200:
        raise RuntimeError(f"{path}: {answer}")
    return answer["data"]


async def settle(services: Services) -> None:
    """Let background work a request started (index updates) finish."""
    await asyncio.sleep(0.3)
    await services.state.bus.sync()


async def round_trips(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    files = work / "files"
    load.make_tree(files, 3)
    async with manifold(work / "data", env) as (services, client):
        token = (await ok(client, "/api/auth/login", {"username": "admin", "password": PASSWORD}))[
            "token"
        ]
        addition = json.dumps({"root_folder_path": str(files)})
        storage = {"mount_path": "/local", "driver": "Local", "addition": addition}
        await ok(client, "/api/admin/storage/create", storage, token)
        await ok(
            client, "/api/admin/setting/save", [{"key": "search_index", "value": "database"}], token
        )
        await ok(client, "/api/admin/index/build", {}, token)
        await index_built(client, token)
        folder = "/local/pub/docs"
        listing = await ok(client, "/api/fs/list", {"path": folder, "per_page": 0}, token)
        first = listing["content"][0]
        download = f"/d{quote(folder + '/' + first['name'])}?sign={quote(first['sign'])}"
        uploads = iter(range(10**6))
        auth = {"Authorization": token}

        async def put() -> None:
            headers = {**auth, "File-Path": quote(f"/local/scratch/c00/u{next(uploads)}.bin"),
                       "As-Task": "false"}  # fmt: skip
            reply = await client.put("/api/fs/put", content=os.urandom(8192), headers=headers)
            assert reply.json()["code"] == 200, reply.text

        async def get(path: str, headers: dict[str, str] | None = None) -> None:
            reply = await client.get(path, headers=headers or {})
            assert reply.status_code in (200, 206), reply.status_code

        kinds: dict[str, Callable[[], Awaitable[object]]] = {
            "list": lambda: ok(client, "/api/fs/list", {"path": folder, "per_page": 30}, token),
            "get": lambda: ok(client, "/api/fs/get", {"path": f"{folder}/{first['name']}"}, token),
            "download": lambda: get(download),
            "download range": lambda: get(download, {"Range": "bytes=0-99"}),
            "upload": put,
            "search": lambda: ok(
                client,
                "/api/fs/search",
                {"parent": "/", "keywords": "report", "page": 1, "per_page": 20},
                token,
            ),
            "me": lambda: ok(client, "/api/me", token=token),
            "login": lambda: ok(
                client, "/api/auth/login", {"username": "admin", "password": PASSWORD}
            ),
        }
        counter = Counter()
        event.listen(services.engine.sync_engine, "before_cursor_execute", counter)
        redis = (
            aioredis.Redis.from_url(env["MANIFOLD_REDIS_URL"])
            if "MANIFOLD_REDIS_URL" in env
            else None
        )
        print(
            f"\n{'kind':<16}{'db statements':>15}{'redis commands':>16}   "
            f"per request, {args.repeat} requests"
        )
        for kind, send in kinds.items():
            for _ in range(3):
                await send()
            await settle(services)
            before = counter.statements
            commands = await redis_commands(redis)
            for _ in range(args.repeat):
                await send()
            await settle(services)
            statements = (counter.statements - before) / args.repeat
            spent = (await redis_commands(redis) - commands - 1) / args.repeat if redis else 0.0
            print(f"{kind:<16}{statements:>15.2f}{spent:>16.2f}", flush=True)
        if redis is not None:
            await redis.aclose()


async def index_built(client: httpx.AsyncClient, token: str) -> None:
    for _ in range(600):
        if (await ok(client, "/api/admin/index/progress", token=token))["is_done"]:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError("the index build did not end within 2 minutes")


async def redis_commands(redis: aioredis.Redis | None) -> int:
    if redis is None:
        return 0
    return int((await redis.info("stats"))["total_commands_processed"])


async def listing_memory(args: argparse.Namespace, work: Path) -> None:
    server = pyftpdlib_server(work / "ftp")
    try:
        for f in range(args.folders):
            folder = server.root / f"f{f:03d}"
            folder.mkdir()
            for i in range(args.entries):
                (folder / load.file_name(i)).touch()
        async with manifold(work / "mem", {}) as (_, client):
            login = {"username": "admin", "password": PASSWORD}
            token = (await ok(client, "/api/auth/login", login))["token"]
            addition = {"address": f"127.0.0.1:{server.port}", "username": server.user,
                        "password": server.password, "root_folder_path": "/"}  # fmt: skip
            body = {"mount_path": "/ftp", "driver": "FTP", "addition": json.dumps(addition),
                    "cache_expiration": 60}  # fmt: skip
            await ok(client, "/api/admin/storage/create", body, token)
            await ok(client, "/api/fs/list", {"path": "/ftp", "per_page": 0}, token)
            gc.collect()
            tracemalloc.start()
            start = tracemalloc.get_traced_memory()[0]
            for f in range(args.folders):
                path = f"/ftp/f{f:03d}"
                await ok(client, "/api/fs/list", {"path": path, "per_page": 0}, token)
                for page in (1, 2, 3):
                    await ok(
                        client, "/api/fs/list", {"path": path, "page": page, "per_page": 30}, token
                    )
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - start
            tracemalloc.stop()
            entries = args.folders * args.entries
            mib, each = grown / 1024 / 1024, grown / entries
            print(f"\nlisting cache: {entries} entries in {args.folders} folders, "
                  f"{mib:.1f} MiB traced, {each:.0f} bytes per entry")  # fmt: skip
    finally:
        server.daemon.stop()


async def main_async(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="capacity-"))
    env: dict[str, str] = {}
    stops: list[Callable[[], None]] = []
    try:
        if args.cluster:
            postgres = start_postgres(work / "pg")
            stops.append(postgres.stop)
            redis = start_redis(work / "redis")
            stops.append(redis.stop)
            env = {"MANIFOLD_DATABASE_URL": postgres.url, "MANIFOLD_REDIS_URL": redis.url,
                   "MANIFOLD_CLUSTER": "true"}  # fmt: skip
        print("database:", "PostgreSQL + Redis (cluster)" if args.cluster else "SQLite")
        await round_trips(args, work, env)
        if not args.skip_memory:
            await listing_memory(args, work)
    finally:
        for stop in stops:
            stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", action="store_true", help="PostgreSQL and Redis, cluster on")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--folders", type=int, default=20)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--skip-memory", action="store_true")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
