"""A real S3 server for the S3 driver's tests: moto's, on a private port.

``S3Server`` starts ``moto_server`` as a ``Daemon`` and holds an admin client of its
own (the test's view of the bucket, independent of the driver under test): making
buckets, planting keys the driver would not make, and reading what is really there.
moto keeps everything in memory, so a killed server comes back empty; ``start``
makes the bucket again.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from manifold.drivers.s3.driver import S3Driver
from manifold.drivers.s3.meta import Addition
from manifold.models import Storage
from tests.fixtures.processes import Daemon, free_port, port_open

MOTO = str(Path(sys.executable).with_name("moto_server"))
REGION = "alist"  # the driver's default region, so buckets are made where it looks
ACCESS_KEY = "manifold-test-access"
SECRET_KEY = "manifold-test-SECRET-do-not-show"


# A TCP relay in a process of its own: a test kills it to cut the driver off from a
# store that keeps its state (moto forgets everything when it is killed itself).
RELAY = """
import asyncio, sys

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()

async def serve(reader, writer):
    try:
        upstream = await asyncio.open_connection("127.0.0.1", int(sys.argv[2]))
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, upstream[1]), pipe(upstream[0], writer))

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]))
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


def relay(log_dir: Path, target: int) -> tuple[Daemon, str]:
    """A relay to ``target`` (started), and the endpoint that reaches the store through it."""
    port = free_port()
    argv = [sys.executable, "-c", RELAY, str(port), str(target)]
    daemon = Daemon(f"relay-{port}", argv, lambda: port_open(port), log_dir / f"relay-{port}.log")
    return daemon.start(), f"http://127.0.0.1:{port}"


class S3Server:
    """One moto server and an admin client for it."""

    def __init__(self, log_dir: Path, *, tls: bool = False) -> None:
        self.port = free_port()
        scheme = "https" if tls else "http"
        self.endpoint = f"{scheme}://127.0.0.1:{self.port}"
        argv = [MOTO, "-H", "127.0.0.1", "-p", str(self.port)] + (["-s"] if tls else [])
        self.daemon = Daemon(
            f"moto-{self.port}",
            argv,
            lambda: port_open(self.port),
            log_dir / f"moto-{self.port}.log",
        )
        self.buckets: list[str] = []
        self._stack = AsyncExitStack()
        self.client: Any = None

    async def start(self) -> S3Server:
        if self.daemon.running:
            return self
        self.daemon.start()
        if self.client is None:
            config = AioConfig(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                retries={"mode": "standard", "total_max_attempts": 1},
            )
            self.client = await self._stack.enter_async_context(
                get_session().create_client(
                    "s3",
                    region_name=REGION,
                    endpoint_url=self.endpoint,
                    aws_access_key_id=ACCESS_KEY,
                    aws_secret_access_key=SECRET_KEY,
                    verify=False,
                    config=config,
                )
            )
        for bucket in self.buckets:
            await self._make(bucket)
        return self

    async def stop(self) -> None:
        self.daemon.stop()
        await self._stack.aclose()
        self.client = None

    async def bucket(self, name: str) -> str:
        """Make bucket ``name`` (again after every restart)."""
        self.buckets.append(name)
        await self._make(name)
        return name

    async def _make(self, name: str) -> None:
        await self.client.create_bucket(
            Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION}
        )

    async def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under ``prefix``, as the store has them."""
        found: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            found += [item["Key"] for item in page.get("Contents") or ()]
        return found

    async def uploads(self, bucket: str) -> list[str]:
        """Keys of the multipart uploads begun and neither completed nor aborted."""
        answer = await self.client.list_multipart_uploads(Bucket=bucket)
        return [upload["Key"] for upload in answer.get("Uploads") or ()]

    async def put(self, bucket: str, key: str, body: bytes = b"x", **params: Any) -> None:
        await self.client.put_object(Bucket=bucket, Key=key, Body=body, **params)

    def options(self, bucket: str, **options: Any) -> Addition:
        fields: dict[str, Any] = {
            "root_folder_path": "/",
            "bucket": bucket,
            "endpoint": self.endpoint,
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            "force_path_style": True,
        }
        return Addition(**(fields | options))


async def s3_driver(
    server: S3Server, bucket: str, cls: type[S3Driver] = S3Driver, **options: Any
) -> S3Driver:
    """An initialised driver of ``cls`` for ``bucket`` on ``server``."""
    storage = Storage(id=1, mount_path="/s3", driver="S3")
    driver = cls(storage, server.options(bucket, **options))
    await driver.init()
    return driver


async def started(log_dir: Path, *, tls: bool = False) -> AsyncIterator[S3Server]:
    """A started server for a fixture, stopped when the fixture ends."""
    server = S3Server(log_dir, tls=tls)
    try:
        yield await server.start()
    finally:
        await server.stop()
