"""What real S3 clients meet beyond the plain requests, through boto3: listing bounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from manifold.container import Services
from tests.protocols.s3_helpers import BUCKET, Site, blocking, s3_site

MIB = 1 << 20


@pytest.fixture
async def site(services: Services, tmp_path: Path) -> Any:
    async with s3_site(services, tmp_path / "root") as served:
        yield served


async def failing(call: Any, **kwargs: Any) -> tuple[str, int]:
    with pytest.raises(ClientError) as caught:
        await blocking(call, **kwargs)
    response = caught.value.response
    return str(response["Error"]["Code"]), int(response["ResponseMetadata"]["HTTPStatusCode"])


async def body_of(site: Site, key: str, bucket: str = BUCKET) -> bytes:
    got = await blocking(site.client().get_object, Bucket=bucket, Key=key)
    return bytes(await blocking(got["Body"].read))


async def multipart(site: Site, key: str, parts: list[bytes], **extra: Any) -> dict[str, Any]:
    client = site.client()
    made = await blocking(client.create_multipart_upload, Bucket=BUCKET, Key=key, **extra)
    upload = {"Bucket": BUCKET, "Key": key, "UploadId": made["UploadId"]}
    sent = []
    for number, data in enumerate(parts, start=1):
        part = await blocking(client.upload_part, PartNumber=number, Body=data, **upload)
        sent.append({"PartNumber": number, "ETag": part["ETag"]})
    return {"upload": upload, "parts": {"Parts": sent}}


async def test_a_prefix_no_key_starts_with_lists_nothing(site: Site) -> None:
    client = site.client()
    for key in ("a", "b/c"):
        await blocking(client.put_object, Bucket=BUCKET, Key=key, Body=b"x")
    for prefix in ("/", "/a", "b//", "./b", "b/./"):
        listed = await blocking(client.list_objects_v2, Bucket=BUCKET, Prefix=prefix)
        assert listed["KeyCount"] == 0 and "Contents" not in listed, prefix
    assert (await blocking(client.list_objects, Bucket=BUCKET, Prefix="/")).get("Contents") is None


async def test_max_keys_zero_is_an_empty_listing_that_is_not_truncated(site: Site) -> None:
    client = site.client()
    await blocking(client.put_object, Bucket=BUCKET, Key="a", Body=b"x")
    v2 = await blocking(client.list_objects_v2, Bucket=BUCKET, MaxKeys=0)
    assert (v2["IsTruncated"], v2["KeyCount"], "Contents" in v2) == (False, 0, False)
    assert "NextContinuationToken" not in v2
    v1 = await blocking(client.list_objects, Bucket=BUCKET, MaxKeys=0)
    assert (v1["IsTruncated"], "Contents" in v1) == (False, False)
