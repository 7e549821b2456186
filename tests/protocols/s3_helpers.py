"""A live S3 server over a Local storage, and clients for it (boto3, rclone)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import boto3
from botocore.config import Config as BotoConfig

from manifold.app import start_s3
from manifold.container import Services
from tests.api.fs_helpers import mount_local, save_settings
from tests.conftest import open_api

KEY_ID = "manifold-test-key"
SECRET = "manifold-test-secret-0123456789"
BUCKET = "files"
T = TypeVar("T")


@dataclass(slots=True)
class Site:
    url: str
    root: Path  # the Local storage's folder; the bucket is its ``data`` folder
    services: Services

    @property
    def data(self) -> Path:
        return self.root / "data"

    def client(self, key_id: str = KEY_ID, secret: str = SECRET, **options: Any) -> Any:
        config = BotoConfig(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            retries={"max_attempts": 1, "mode": "standard"},
            **options,
        )
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            region_name="us-east-1",
            config=config,
        )


async def blocking(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A client's blocking call, off the loop that serves it."""
    return await asyncio.to_thread(func, *args, **kwargs)


@asynccontextmanager
async def s3_site(
    services: Services, root: Path, key_id: str = KEY_ID, secret: str = SECRET
) -> AsyncIterator[Site]:
    """Serve ``root`` as a Local storage at ``/local``; bucket ``files`` is ``/local/data``,
    bucket ``other`` is ``/local/other``."""
    (root / "data").mkdir(parents=True)
    (root / "other").mkdir()
    buckets = [
        {"name": BUCKET, "path": "/local/data"},
        {"name": "other", "path": "/local/other"},
    ]
    async with open_api(services) as api:
        await mount_local(api, "/local", root)
        await save_settings(
            api,
            s3_buckets=json.dumps(buckets),
            s3_access_key_id=key_id,
            s3_secret_access_key=secret,
        )
    listener = await start_s3(services, port=0)
    try:
        yield Site(f"http://127.0.0.1:{listener.port}", root, services)
    finally:
        await listener.stop()
