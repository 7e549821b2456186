"""Multipart uploads to an S3 storage (moto) go straight into the bucket's own
multipart upload, and to an Azure Blob storage (Azurite) into staged blocks: nothing
is staged on this server's disk, a restart or another instance continues the same
upload, and abort, expiry and a wrong hash leave nothing in the bucket (on Azure,
nothing committed)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.drivers.base import RESERVED_PREFIX
from tests.api.fs_helpers import CREATE, save_settings
from tests.api.test_multipart import (
    complete,
    init,
    instance,
    payload,
    pieces,
    send,
    staged,
    status,
)
from tests.conftest import Api
from tests.drivers import s3_server
from tests.drivers.azurite_server import Azurite, azurite

MB = 1 << 20
CHUNK = 5 * MB  # S3's smallest part
TREE: dict[str, str] = {}


@pytest.fixture(scope="module")
async def s3(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[s3_server.S3Server]:
    async for server in s3_server.started(tmp_path_factory.mktemp("moto")):
        yield server


@pytest.fixture
async def bucket(s3: s3_server.S3Server) -> str:
    """A bucket of the test's own, so its uploads are the test's alone."""
    return await s3.bucket(f"mp-{secrets.token_hex(4)}")


async def mount_s3(api: Api, s3: s3_server.S3Server, bucket: str) -> None:
    body = {"mount_path": "/bucket", "driver": "S3", "addition": json.dumps(addition(s3, bucket))}
    created = await api.post(CREATE, body, token=await api.login())
    assert created["code"] == 200, created


def addition(s3: s3_server.S3Server, bucket: str) -> dict[str, Any]:
    return s3.options(bucket).model_dump()


@pytest.fixture
async def on_s3(api: Api, s3: s3_server.S3Server, bucket: str) -> Api:
    await api.as_admin()
    await mount_s3(api, s3, bucket)
    return api


async def uploads(s3: s3_server.S3Server, bucket: str) -> list[tuple[str, str]]:
    """(key, upload id) of every multipart upload open in ``bucket``."""
    answer = await s3.client.list_multipart_uploads(Bucket=bucket)
    return [(u["Key"], u["UploadId"]) for u in answer.get("Uploads") or ()]


async def content(s3: s3_server.S3Server, bucket: str, key: str) -> bytes:
    answer = await s3.client.get_object(Bucket=bucket, Key=key)
    async with answer["Body"] as body:
        data: bytes = await body.read()
    return data


NO_HASH = {"X-File-Sha256": ""}


@pytest.mark.parametrize("hashes", ["sha256", "none"])
async def test_chunks_go_to_the_bucket_in_any_order_and_never_to_the_staging_folder(
    on_s3: Api, services: Services, s3: s3_server.S3Server, bucket: str, hashes: str
) -> None:
    data = payload(2 * CHUNK + 12345)
    extra = NO_HASH if hashes == "none" else {}
    shot = (await init(on_s3, "/bucket/dir/big.bin", data, chunk=CHUNK, **extra))["data"]
    assert (shot["chunk_size"], shot["total_chunks"]) == (CHUNK, 3)
    parts = pieces(data, CHUNK)
    for index in (2, 0, 0, 1):  # out of order, one twice
        answer = await send(on_s3, shot["upload_id"], index, parts[index])
        assert answer["code"] == 200, answer
        assert staged(services) == []
        assert "dir/big.bin" not in await s3.keys(bucket)
    open_uploads = await uploads(s3, bucket)
    assert len(open_uploads) == 1
    if hashes == "none":
        assert open_uploads[0][0] == "dir/big.bin"
    else:  # finished under a temporary name, checked, then copied into place
        assert open_uploads[0][0].startswith(f"dir/{RESERVED_PREFIX}")
    done = await complete(on_s3, shot["upload_id"])
    assert done["code"] == 200, done
    assert await content(s3, bucket, "dir/big.bin") == data
    assert await s3.keys(bucket, "dir/") == ["dir/.alist", "dir/big.bin"]  # .alist: the folder
    assert await uploads(s3, bucket) == []
    assert staged(services) == []


async def test_a_wrong_hash_leaves_nothing_in_the_bucket(
    on_s3: Api, services: Services, s3: s3_server.S3Server, bucket: str
) -> None:
    data = payload(CHUNK + 10)
    extra = {"X-File-Md5": "0" * 32}
    shot = (await init(on_s3, "/bucket/bad.bin", data, chunk=CHUNK, **extra))["data"]
    for index, part in enumerate(pieces(data, CHUNK)):
        await send(on_s3, shot["upload_id"], index, part)
    refused = await complete(on_s3, shot["upload_id"])
    assert refused["code"] == 400
    assert "md5" in refused["message"]
    assert await s3.keys(bucket) == []
    assert await uploads(s3, bucket) == []
    assert (await status(on_s3, shot["upload_id"]))["code"] == 404


async def test_abort_leaves_no_upload_in_the_bucket(
    on_s3: Api, s3: s3_server.S3Server, bucket: str
) -> None:
    data = payload(2 * CHUNK)
    shot = (await init(on_s3, "/bucket/gone.bin", data, chunk=CHUNK))["data"]
    await send(on_s3, shot["upload_id"], 1, pieces(data, CHUNK)[1])
    assert len(await uploads(s3, bucket)) == 1
    aborted = await on_s3.post(
        "/api/fs/multipart/abort", headers={"X-Upload-Id": shot["upload_id"]}
    )
    assert aborted["code"] == 200
    assert await uploads(s3, bucket) == []
    assert (await status(on_s3, shot["upload_id"]))["code"] == 404


async def test_the_sweep_leaves_no_upload_in_the_bucket(
    on_s3: Api, services: Services, s3: s3_server.S3Server, bucket: str
) -> None:
    data = payload(2 * CHUNK)
    shot = (await init(on_s3, "/bucket/idle.bin", data, chunk=CHUNK))["data"]
    await send(on_s3, shot["upload_id"], 0, pieces(data, CHUNK)[0])
    await save_settings(on_s3, multipart_idle_seconds="1")
    await asyncio.sleep(2.5)
    assert await services.multipart.sweep() == 1
    assert await uploads(s3, bucket) == []
    assert (await status(on_s3, shot["upload_id"]))["code"] == 404


async def test_chunks_under_the_stores_smallest_part_are_staged(
    on_s3: Api, services: Services, s3: s3_server.S3Server, bucket: str
) -> None:
    data = payload(3 * MB + 7)
    shot = (await init(on_s3, "/bucket/small.bin", data, chunk=MB))["data"]
    assert shot["chunk_size"] == MB
    await send(on_s3, shot["upload_id"], 0, pieces(data, MB)[0])
    assert staged(services) != []
    assert await uploads(s3, bucket) == []
    for index, part in enumerate(pieces(data, MB)[1:], start=1):
        await send(on_s3, shot["upload_id"], index, part)
    assert (await complete(on_s3, shot["upload_id"]))["code"] == 200
    assert await content(s3, bucket, "small.bin") == data
    assert staged(services) == []


async def test_native_chunks_are_outside_the_staging_budget(
    on_s3: Api, s3: s3_server.S3Server, bucket: str
) -> None:
    await save_settings(on_s3, multipart_staging_budget="1")  # MB: less than one chunk
    data = payload(2 * CHUNK + 1)
    shot = (await init(on_s3, "/bucket/wide.bin", data, chunk=CHUNK))["data"]
    for index, part in enumerate(pieces(data, CHUNK)):
        assert (await send(on_s3, shot["upload_id"], index, part))["code"] == 200
    assert (await complete(on_s3, shot["upload_id"]))["code"] == 200
    assert await content(s3, bucket, "wide.bin") == data


async def test_a_native_chunk_of_the_wrong_length_is_refused(
    on_s3: Api, s3: s3_server.S3Server, bucket: str
) -> None:
    data = payload(CHUNK + 5)
    shot = (await init(on_s3, "/bucket/len.bin", data, chunk=CHUNK))["data"]
    short = await send(on_s3, shot["upload_id"], 0, data[: CHUNK - 1])
    assert short["code"] == 400
    assert (await status(on_s3, shot["upload_id"]))["data"]["received"] == []
    assert (await send(on_s3, shot["upload_id"], 0, data[:CHUNK]))["code"] == 200


async def test_a_restart_between_chunks_continues_the_same_s3_upload(
    tmp_path: Path, s3: s3_server.S3Server, bucket: str
) -> None:
    data_dir = tmp_path / "data"
    data = payload(2 * CHUNK + 3)
    parts = pieces(data, CHUNK)
    async with instance(data_dir) as api:
        await mount_s3(api, s3, bucket)
        upload_id = (await init(api, "/bucket/r.bin", data, chunk=CHUNK))["data"]["upload_id"]
        await send(api, upload_id, 2, parts[2])
        begun = await uploads(s3, bucket)
    async with instance(data_dir) as api:
        resumed = (await init(api, "/bucket/r.bin", data, chunk=CHUNK))["data"]
        assert (resumed["upload_id"], resumed["received"]) == (upload_id, [[2, 2]])
        await send(api, upload_id, 0, parts[0])
        await send(api, upload_id, 1, parts[1])
        assert await uploads(s3, bucket) == begun  # the same S3 upload, no other
        assert staged(api.services) == []
        assert (await complete(api, upload_id))["code"] == 200
    assert await content(s3, bucket, "r.bin") == data
    assert await uploads(s3, bucket) == []


async def test_two_instances_send_alternate_chunks_into_one_s3_upload(
    tmp_path: Path, s3: s3_server.S3Server, bucket: str
) -> None:
    data_dir = tmp_path / "data"
    data = payload(4 * CHUNK + 99)
    parts = pieces(data, CHUNK)
    async with instance(data_dir) as first:
        await mount_s3(first, s3, bucket)
        async with instance(data_dir) as second:
            upload_id = (await init(first, "/bucket/two.bin", data, chunk=CHUNK))["data"][
                "upload_id"
            ]
            sent = await asyncio.gather(
                *(send((first, second)[i % 2], upload_id, i, part) for i, part in enumerate(parts))
            )
            assert [answer["code"] for answer in sent] == [200] * len(parts)
            assert (await complete(second, upload_id))["code"] == 200
    assert hashlib.sha256(await content(s3, bucket, "two.bin")).digest() == (
        hashlib.sha256(data).digest()
    )
    assert await uploads(s3, bucket) == []


# --- Azure Blob: staged blocks ------------------------------------------------------------


@pytest.fixture(scope="module")
def blobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    yield from azurite(tmp_path_factory.mktemp("azurite"))


async def mount_azure(api: Api, server: Azurite, container: str) -> None:
    options = server.options(container).model_dump()
    body = {"mount_path": "/az", "driver": "Azure Blob Storage", "addition": json.dumps(options)}
    created = await api.post(CREATE, body, token=await api.login())
    assert created["code"] == 200, created


@pytest.fixture
async def on_azure(api: Api, blobs: Azurite) -> tuple[Api, str]:
    container = f"mp-{secrets.token_hex(4)}"
    await api.as_admin()
    await mount_azure(api, blobs, container)
    return api, container


async def blob(server: Azurite, container: str, name: str) -> bytes:
    async with server.client() as service:
        found = await service.get_container_client(container).download_blob(name)
        data: bytes = await found.readall()
    return data


@pytest.mark.parametrize("hashes", ["sha256", "none"])
async def test_chunks_go_to_staged_blocks_in_any_order_and_never_to_the_staging_folder(
    on_azure: tuple[Api, str], services: Services, blobs: Azurite, hashes: str
) -> None:
    api, container = on_azure
    data = payload(3 * MB + 321)
    extra = NO_HASH if hashes == "none" else {}
    shot = (await init(api, "/az/dir/big.bin", data, chunk=MB, **extra))["data"]
    parts = pieces(data, MB)
    for index in (3, 1, 1, 0, 2):  # out of order, one twice; any block size will do
        assert (await send(api, shot["upload_id"], index, parts[index]))["code"] == 200
        assert staged(services) == []
        assert await blobs.names(container, "dir/b") == []  # nothing committed yet
    done = await complete(api, shot["upload_id"])
    assert done["code"] == 200, done
    assert await blob(blobs, container, "dir/big.bin") == data
    assert await blobs.names(container, "dir/") == ["dir/", "dir/big.bin"]  # and the folder


async def test_a_wrong_hash_commits_nothing_on_azure(
    on_azure: tuple[Api, str], blobs: Azurite
) -> None:
    api, container = on_azure
    data = payload(2 * MB + 1)
    shot = (await init(api, "/az/bad.bin", data, chunk=MB, **{"X-File-Md5": "0" * 32}))["data"]
    for index, part in enumerate(pieces(data, MB)):
        await send(api, shot["upload_id"], index, part)
    refused = await complete(api, shot["upload_id"])
    assert refused["code"] == 400
    assert "md5" in refused["message"]
    assert await blobs.names(container) == []
    assert (await status(api, shot["upload_id"]))["code"] == 404


async def test_an_aborted_azure_upload_commits_nothing(
    on_azure: tuple[Api, str], services: Services, blobs: Azurite
) -> None:
    """The service cannot discard staged blocks: they stay uncommitted (invisible) until
    it drops them itself, as the README says of any failed upload."""
    api, container = on_azure
    data = payload(2 * MB)
    shot = (await init(api, "/az/gone.bin", data, chunk=MB, **NO_HASH))["data"]
    await send(api, shot["upload_id"], 0, pieces(data, MB)[0])
    aborted = await api.post("/api/fs/multipart/abort", headers={"X-Upload-Id": shot["upload_id"]})
    assert aborted["code"] == 200
    assert await blobs.names(container) == []
    assert await blobs.names(container, uncommitted=True) == ["gone.bin"]
    assert staged(services) == []


async def test_a_restart_between_chunks_continues_the_azure_upload(
    tmp_path: Path, blobs: Azurite
) -> None:
    container = f"mp-{secrets.token_hex(4)}"
    data_dir = tmp_path / "data"
    data = payload(2 * MB + 3)
    parts = pieces(data, MB)
    async with instance(data_dir) as api:
        await mount_azure(api, blobs, container)
        upload_id = (await init(api, "/az/r.bin", data, chunk=MB))["data"]["upload_id"]
        await send(api, upload_id, 2, parts[2])
    async with instance(data_dir) as api:
        resumed = (await init(api, "/az/r.bin", data, chunk=MB))["data"]
        assert (resumed["upload_id"], resumed["received"]) == (upload_id, [[2, 2]])
        await send(api, upload_id, 0, parts[0])
        await send(api, upload_id, 1, parts[1])
        assert staged(api.services) == []
        assert (await complete(api, upload_id))["code"] == 200
    assert await blob(blobs, container, "r.bin") == data
