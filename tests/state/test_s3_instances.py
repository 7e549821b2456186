"""The S3 server on two instances sharing one database, each with its own data folder:
every instance lists every multipart upload and may abort any, and only the one that
started an upload (whose disk has its parts) takes its parts and completes it; the
other answers NoSuchUpload saying so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from manifold.app import start_s3
from tests.protocols.s3_helpers import BUCKET, Site, blocking, s3_site
from tests.state.conftest import instances

PART = b"p" * (5 << 20)


@dataclass(slots=True)
class Two:
    a: Site
    b: Site


@pytest.fixture
async def two(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Two]:
    async with AsyncExitStack() as stack:
        made = await stack.enter_async_context(instances(request, tmp_path))
        a = await stack.enter_async_context(s3_site(made[0], tmp_path / "files"))
        for services in made:
            await services.state.bus.sync()
        listener = await start_s3(made[1], port=0)
        stack.push_async_callback(listener.stop)
        yield Two(a, Site(f"http://127.0.0.1:{listener.port}", a.root, made[1]))


def error_of(exc: ClientError) -> tuple[str, str]:
    error: dict[str, Any] = exc.response["Error"]
    return str(error["Code"]), str(error.get("Message", ""))


async def uploads_at(site: Site) -> list[str]:
    listed = await blocking(site.client().list_multipart_uploads, Bucket=BUCKET)
    return [u["UploadId"] for u in listed.get("Uploads", [])]


async def test_parts_go_to_the_instance_that_started_the_upload(two: Two) -> None:
    a, b = two.a.client(), two.b.client()
    started = await blocking(a.create_multipart_upload, Bucket=BUCKET, Key="big.bin")
    upload_id = started["UploadId"]
    assert await uploads_at(two.b) == [upload_id]
    with pytest.raises(ClientError) as refused:
        await blocking(
            b.upload_part, Bucket=BUCKET, Key="big.bin", UploadId=upload_id, PartNumber=1, Body=PART
        )
    code, message = error_of(refused.value)
    assert code == "NoSuchUpload"
    assert "another server (one)" in message
    part = await blocking(
        a.upload_part, Bucket=BUCKET, Key="big.bin", UploadId=upload_id, PartNumber=1, Body=PART
    )
    done = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    with pytest.raises(ClientError) as elsewhere:
        await blocking(
            b.complete_multipart_upload,
            Bucket=BUCKET, Key="big.bin", UploadId=upload_id, MultipartUpload=done,
        )  # fmt: skip
    assert error_of(elsewhere.value)[0] == "NoSuchUpload"
    await blocking(
        a.complete_multipart_upload,
        Bucket=BUCKET, Key="big.bin", UploadId=upload_id, MultipartUpload=done,
    )  # fmt: skip
    assert (two.a.data / "big.bin").read_bytes() == PART
    assert await uploads_at(two.b) == []


async def test_an_upload_aborted_on_the_other_instance_is_gone(two: Two) -> None:
    a, b = two.a.client(), two.b.client()
    started = await blocking(a.create_multipart_upload, Bucket=BUCKET, Key="gone")
    upload_id = started["UploadId"]
    await blocking(b.abort_multipart_upload, Bucket=BUCKET, Key="gone", UploadId=upload_id)
    assert await uploads_at(two.a) == []
    with pytest.raises(ClientError) as refused:
        await blocking(
            a.upload_part, Bucket=BUCKET, Key="gone", UploadId=upload_id, PartNumber=1, Body=b"."
        )
    assert error_of(refused.value)[0] == "NoSuchUpload"


async def test_a_sweep_drops_only_its_own_idle_uploads(two: Two) -> None:
    mine = await blocking(two.a.client().create_multipart_upload, Bucket=BUCKET, Key="a.bin")
    theirs = await blocking(two.b.client().create_multipart_upload, Bucket=BUCKET, Key="b.bin")
    two.a.services.config.s3_upload_expiry_seconds = 1
    await asyncio.sleep(1.5)  # both idle for longer than the first's expiry
    again = await start_s3(two.a.services, port=0)  # a restart of the first sweeps
    await again.stop()
    assert await uploads_at(two.b) == [theirs["UploadId"]]
    assert mine["UploadId"] not in await uploads_at(two.a)
