"""What real S3 clients meet beyond the plain requests, through boto3: listing bounds,
conditional writes and copies, the answers of a multipart upload kept with its object
(ETag, metadata), UploadPartCopy, and the same completion sent twice."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from manifold.container import Services
from tests.conftest import open_api
from tests.protocols.dav_helpers import Dav, user
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


async def test_put_conditions(site: Site) -> None:
    client = site.client()
    first = await blocking(client.put_object, Bucket=BUCKET, Key="k", Body=b"one")
    code = await failing(client.put_object, Bucket=BUCKET, Key="k", Body=b"two", IfNoneMatch="*")
    assert code == ("PreconditionFailed", 412)
    assert (site.data / "k").read_bytes() == b"one"
    await blocking(client.put_object, Bucket=BUCKET, Key="new", Body=b"n", IfNoneMatch="*")
    assert (site.data / "new").read_bytes() == b"n"
    code = await failing(client.put_object, Bucket=BUCKET, Key="k", Body=b"two", IfMatch='"0-1"')
    assert code == ("PreconditionFailed", 412)
    assert (site.data / "k").read_bytes() == b"one"
    await blocking(client.put_object, Bucket=BUCKET, Key="k", Body=b"two", IfMatch=first["ETag"])
    assert (site.data / "k").read_bytes() == b"two"
    code = await failing(client.put_object, Bucket=BUCKET, Key="none", Body=b"x", IfMatch="*")
    assert code == ("NoSuchKey", 404)
    assert not (site.data / "none").exists()


async def test_a_completion_with_if_none_match_keeps_an_existing_object(site: Site) -> None:
    client = site.client()
    await blocking(client.put_object, Bucket=BUCKET, Key="m.bin", Body=b"kept")
    started = await multipart(site, "m.bin", [b"new"])
    code = await failing(
        client.complete_multipart_upload,
        MultipartUpload=started["parts"], IfNoneMatch="*", **started["upload"],
    )  # fmt: skip
    assert code == ("PreconditionFailed", 412)
    assert (site.data / "m.bin").read_bytes() == b"kept"


async def test_copy_source_conditions(site: Site) -> None:
    client = site.client()
    await blocking(client.put_object, Bucket=BUCKET, Key="src", Body=b"source")
    tag = (await blocking(client.head_object, Bucket=BUCKET, Key="src"))["ETag"]
    later, earlier = datetime.now(UTC) + timedelta(days=1), datetime(2000, 1, 1, tzinfo=UTC)
    copy = {"Bucket": BUCKET, "Key": "dst", "CopySource": {"Bucket": BUCKET, "Key": "src"}}
    for condition in (
        {"CopySourceIfMatch": '"another"'},
        {"CopySourceIfNoneMatch": tag},
        {"CopySourceIfModifiedSince": later},
        {"CopySourceIfUnmodifiedSince": earlier},
    ):
        code = await failing(client.copy_object, **copy, **condition)
        assert code == ("PreconditionFailed", 412), condition
        assert not (site.data / "dst").exists()
    for condition in (
        {"CopySourceIfMatch": tag},
        {"CopySourceIfNoneMatch": '"another"'},
        {"CopySourceIfModifiedSince": earlier},
        {"CopySourceIfUnmodifiedSince": later},
        # A tag that matches overrules the time, as S3 has it.
        {"CopySourceIfMatch": tag, "CopySourceIfUnmodifiedSince": earlier},
    ):
        await blocking(client.copy_object, **copy, **condition)
        assert (site.data / "dst").read_bytes() == b"source"


async def test_the_same_completion_sent_again_gets_the_same_answer(site: Site) -> None:
    client = site.client()
    started = await multipart(site, "twice.bin", [b"a" * (5 * MIB), b"end"])
    complete = {"MultipartUpload": started["parts"], **started["upload"]}
    first = await blocking(client.complete_multipart_upload, **complete)
    again = await blocking(client.complete_multipart_upload, **complete)
    assert (again["ETag"], again["Key"], again["Bucket"]) == (first["ETag"], "twice.bin", BUCKET)
    other = {"Parts": started["parts"]["Parts"][:1]}
    code = await failing(client.complete_multipart_upload, **{**complete, "MultipartUpload": other})
    assert code == ("NoSuchUpload", 404)
    assert await body_of(site, "twice.bin") == b"a" * (5 * MIB) + b"end"


async def test_a_multipart_objects_tag_is_the_completions(site: Site) -> None:
    client = site.client()
    started = await multipart(site, "d/mp.bin", [b"a" * (5 * MIB), b"b" * 10])
    done = await blocking(
        client.complete_multipart_upload, MultipartUpload=started["parts"], **started["upload"]
    )
    assert done["ETag"].endswith('-2"')
    head = await blocking(client.head_object, Bucket=BUCKET, Key="d/mp.bin")
    got = await blocking(client.get_object, Bucket=BUCKET, Key="d/mp.bin")
    await blocking(got["Body"].read)
    listed = await blocking(client.list_objects_v2, Bucket=BUCKET, Prefix="d/")
    v1 = await blocking(client.list_objects, Bucket=BUCKET, Prefix="d/")
    assert head["ETag"] == got["ETag"] == done["ETag"]
    assert listed["Contents"][0]["ETag"] == v1["Contents"][0]["ETag"] == done["ETag"]
    code = await failing(client.get_object, Bucket=BUCKET, Key="d/mp.bin", IfNoneMatch=done["ETag"])
    assert code[1] == 304
    # The file changed by other means is another version: the upload's tag is gone.
    with (site.data / "d/mp.bin").open("ab") as file:
        file.write(b"more")
    changed = await blocking(client.head_object, Bucket=BUCKET, Key="d/mp.bin")
    assert changed["ETag"] != done["ETag"]


async def test_metadata_is_kept_and_answered(site: Site) -> None:
    client = site.client()
    meta = {"colour": "blue", "mtime": "1700000000.5"}
    await blocking(
        client.put_object, Bucket=BUCKET, Key="m.txt", Body=b"m", Metadata=meta,
        ContentType="text/x-custom", CacheControl="no-cache",
    )  # fmt: skip
    head = await blocking(client.head_object, Bucket=BUCKET, Key="m.txt")
    assert head["Metadata"] == meta
    assert (head["ContentType"], head["CacheControl"]) == ("text/x-custom", "no-cache")
    assert (site.data / "m.txt").stat().st_mtime == 1700000000.5
    got = await blocking(client.get_object, Bucket=BUCKET, Key="m.txt")
    assert await blocking(got["Body"].read) == b"m"
    assert got["Metadata"] == meta and got["ContentType"] == "text/x-custom"
    plain = await blocking(client.put_object, Bucket=BUCKET, Key="m.txt", Body=b"again")
    head = await blocking(client.head_object, Bucket=BUCKET, Key="m.txt")
    assert head["Metadata"] == {} and head["ETag"] == plain["ETag"]
    too_much = {"big": "x" * 2048}
    code = await failing(
        client.put_object, Bucket=BUCKET, Key="big.txt", Body=b"b", Metadata=too_much
    )
    assert code == ("MetadataTooLarge", 400)


async def test_a_multipart_upload_keeps_the_metadata_it_started_with(site: Site) -> None:
    client = site.client()
    meta = {"origin": "camera", "mtime": "1600000000"}
    started = await multipart(site, "mp.bin", [b"z"], Metadata=meta, ContentType="video/mp4")
    await blocking(
        client.complete_multipart_upload, MultipartUpload=started["parts"], **started["upload"]
    )
    head = await blocking(client.head_object, Bucket=BUCKET, Key="mp.bin")
    assert (head["Metadata"], head["ContentType"]) == (meta, "video/mp4")
    assert (site.data / "mp.bin").stat().st_mtime == 1600000000


async def test_a_copy_takes_or_replaces_the_metadata(site: Site) -> None:
    client = site.client()
    meta = {"colour": "red"}
    await blocking(client.put_object, Bucket=BUCKET, Key="s", Body=b"s", Metadata=meta)
    source = {"Bucket": BUCKET, "Key": "s"}
    await blocking(client.copy_object, Bucket="other", Key="kept", CopySource=source)
    head = await blocking(client.head_object, Bucket="other", Key="kept")
    assert head["Metadata"] == meta
    await blocking(
        client.copy_object, Bucket=BUCKET, Key="new", CopySource=source,
        MetadataDirective="REPLACE", Metadata={"colour": "green"},
    )  # fmt: skip
    assert (await blocking(client.head_object, Bucket=BUCKET, Key="new"))["Metadata"] == {
        "colour": "green"
    }
    code = await failing(client.copy_object, Bucket=BUCKET, Key="s", CopySource=source)
    assert code == ("InvalidRequest", 400)
    before = await blocking(client.head_object, Bucket=BUCKET, Key="s")
    await blocking(
        client.copy_object, Bucket=BUCKET, Key="s", CopySource=source,
        MetadataDirective="REPLACE", Metadata={"colour": "gold"},
    )  # fmt: skip
    after = await blocking(client.head_object, Bucket=BUCKET, Key="s")
    assert after["Metadata"] == {"colour": "gold"} and after["ETag"] == before["ETag"]


async def test_upload_part_copy_with_ranges(site: Site) -> None:
    client = site.client()
    data = os.urandom(7 * MIB)
    await blocking(client.put_object, Bucket="other", Key="src.bin", Body=data)
    made = await blocking(client.create_multipart_upload, Bucket=BUCKET, Key="joined.bin")
    upload = {"Bucket": BUCKET, "Key": "joined.bin", "UploadId": made["UploadId"]}
    source = {"Bucket": "other", "Key": "src.bin"}
    # The first 5 MiB, the whole source, the last 2 MiB: a range, none, a range.
    spans = [f"bytes=0-{5 * MIB - 1}", "", f"bytes={5 * MIB}-{7 * MIB - 1}"]
    parts = []
    for number, span in enumerate(spans, start=1):
        ranged = {"CopySourceRange": span} if span else {}
        copied = await blocking(
            client.upload_part_copy, PartNumber=number, CopySource=source, **ranged, **upload
        )
        parts.append({"PartNumber": number, "ETag": copied["CopyPartResult"]["ETag"]})
    code = await failing(
        client.upload_part_copy, PartNumber=4, CopySource=source,
        CopySourceRange=f"bytes=0-{7 * MIB}", **upload,
    )  # fmt: skip
    assert code == ("InvalidArgument", 400)
    code = await failing(
        client.upload_part_copy, PartNumber=4, CopySource=source,
        CopySourceIfMatch='"another"', **upload,
    )  # fmt: skip
    assert code == ("PreconditionFailed", 412)
    await blocking(client.complete_multipart_upload, MultipartUpload={"Parts": parts}, **upload)
    assert (site.data / "joined.bin").read_bytes() == data[: 5 * MIB] + data + data[5 * MIB :]


async def test_a_managed_copy_in_parts(site: Site) -> None:
    client = site.client()
    data = os.urandom(11 * MIB)
    meta = {"kind": "large"}
    await blocking(client.put_object, Bucket=BUCKET, Key="large.bin", Body=data, Metadata=meta)
    config = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)
    source = {"Bucket": BUCKET, "Key": "large.bin"}
    await blocking(client.copy, source, "other", "copy/large.bin", Config=config)
    assert (site.root / "other/copy/large.bin").read_bytes() == data
    head = await blocking(client.head_object, Bucket="other", Key="copy/large.bin")
    assert head["ETag"].endswith('-3"') and head["Metadata"] == meta


async def test_metadata_is_no_webdav_property_and_moves_with_its_file(site: Site) -> None:
    client = site.client()
    meta = {"colour": "teal"}
    await blocking(client.put_object, Bucket=BUCKET, Key="n.txt", Body=b"n", Metadata=meta)
    await user(site.services, "dora")
    async with open_api(site.services) as api:
        dav = Dav(api.client, "dora")
        found = await dav("PROPFIND", "/local/data/n.txt", Depth="0")
        assert found.status_code == 207
        assert b"manifold" not in found.content and b"teal" not in found.content
        moved = await dav("MOVE", "/local/data/n.txt", Destination="/dav/local/data/m.txt")
        assert moved.status_code == 201
    head = await blocking(client.head_object, Bucket=BUCKET, Key="m.txt")
    assert head["Metadata"] == meta
