"""Multipart uploads outlive a restart, and those idle longer than
``s3_upload_expiry_seconds`` go with their parts: at start and while the server runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from manifold.app import start_s3
from manifold.container import Services
from tests.protocols.s3_helpers import BUCKET, Site, blocking, s3_site

PART = b"p" * (5 << 20)


@pytest.fixture
async def site(services: Services, tmp_path: Path) -> Any:
    async with s3_site(services, tmp_path / "root") as served:
        yield served


def spool(site: Site) -> Path:
    return site.services.config.data_dir / "temp" / "s3-multipart"


async def started(site: Site, key: str) -> dict[str, str]:
    made = await blocking(site.client().create_multipart_upload, Bucket=BUCKET, Key=key)
    upload = {"Bucket": BUCKET, "Key": key, "UploadId": made["UploadId"]}
    await blocking(site.client().upload_part, PartNumber=1, Body=PART, **upload)
    return upload


async def uploads(site: Site) -> list[str]:
    listed = await blocking(site.client().list_multipart_uploads, Bucket=BUCKET)
    return [u["UploadId"] for u in listed.get("Uploads", [])]


async def test_an_upload_outlives_a_restart(site: Site) -> None:
    upload = await started(site, "kept.bin")
    again = await start_s3(site.services, port=0)  # what a restart does at start
    try:
        after = Site(f"http://127.0.0.1:{again.port}", site.root, site.services)
        assert await uploads(after) == [upload["UploadId"]]
        parts = await blocking(after.client().list_parts, **upload)
        done = {"Parts": [{"PartNumber": 1, "ETag": parts["Parts"][0]["ETag"]}]}
        await blocking(after.client().complete_multipart_upload, MultipartUpload=done, **upload)
    finally:
        await again.stop()
    assert (site.data / "kept.bin").read_bytes() == PART


async def test_an_idle_upload_goes_at_start(site: Site) -> None:
    upload = await started(site, "idle.bin")
    assert any(spool(site).rglob("part-*"))
    site.services.config.s3_upload_expiry_seconds = 1
    await asyncio.sleep(1.5)  # idle for longer than the expiry
    again = await start_s3(site.services, port=0)
    await again.stop()
    assert upload["UploadId"] not in await uploads(site)
    assert not any(spool(site).iterdir())


async def test_an_idle_upload_goes_while_the_server_runs(
    services: Services, tmp_path: Path
) -> None:
    services.config.s3_upload_expiry_seconds = 1
    async with s3_site(services, tmp_path / "root") as site:
        made = await blocking(site.client().create_multipart_upload, Bucket=BUCKET, Key="x")
        for _ in range(300):
            if made["UploadId"] not in await uploads(site):
                break
            await asyncio.sleep(0.1)
        assert made["UploadId"] not in await uploads(site)
        assert not any(spool(site).iterdir())
