"""The S3 server through boto3, a real client, against a live listener over a Local storage."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from manifold.container import Services
from tests.api.fs_helpers import mount_local
from tests.conftest import open_api
from tests.protocols.s3_helpers import BUCKET, Site, blocking, s3_site


@pytest.fixture
async def site(services: Services, tmp_path: Path) -> Any:
    async with s3_site(services, tmp_path / "root") as served:
        yield served


def code_of(error: ClientError) -> str:
    return str(error.response["Error"]["Code"])


async def failing(call: Any, **kwargs: Any) -> ClientError:
    with pytest.raises(ClientError) as caught:
        await blocking(call, **kwargs)
    return caught.value


async def read_body(response: dict[str, Any]) -> bytes:
    return await blocking(response["Body"].read)


async def test_list_buckets_names_the_configured_ones(site: Site) -> None:
    found = await blocking(site.client().list_buckets)
    assert [b["Name"] for b in found["Buckets"]] == [BUCKET, "other"]


async def test_put_get_head_and_ranges(site: Site) -> None:
    client = site.client()
    body = bytes(range(256)) * 40
    await blocking(client.put_object, Bucket=BUCKET, Key="deep/er/file.bin", Body=body)
    assert (site.data / "deep/er/file.bin").read_bytes() == body
    got = await blocking(client.get_object, Bucket=BUCKET, Key="deep/er/file.bin")
    assert await read_body(got) == body
    head = await blocking(client.head_object, Bucket=BUCKET, Key="deep/er/file.bin")
    assert head["ContentLength"] == len(body)
    assert head["ETag"] == got["ETag"] and head["ETag"].startswith('"')
    part = await blocking(
        client.get_object, Bucket=BUCKET, Key="deep/er/file.bin", Range="bytes=100-199"
    )
    assert part["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert part["ContentRange"] == f"bytes 100-199/{len(body)}"
    assert await read_body(part) == body[100:200]
    tail = await blocking(
        client.get_object, Bucket=BUCKET, Key="deep/er/file.bin", Range="bytes=-10"
    )
    assert await read_body(tail) == body[-10:]
    error = await failing(
        client.get_object, Bucket=BUCKET, Key="deep/er/file.bin", Range=f"bytes={len(body)}-"
    )
    assert code_of(error) == "InvalidRange"
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 416


async def test_conditional_get(site: Site) -> None:
    client = site.client()
    await blocking(client.put_object, Bucket=BUCKET, Key="c.txt", Body=b"same")
    tag = (await blocking(client.head_object, Bucket=BUCKET, Key="c.txt"))["ETag"]
    error = await failing(client.get_object, Bucket=BUCKET, Key="c.txt", IfNoneMatch=tag)
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    error = await failing(client.get_object, Bucket=BUCKET, Key="c.txt", IfMatch='"other"')
    assert code_of(error) == "PreconditionFailed"


async def test_missing_key_and_bucket(site: Site) -> None:
    client = site.client()
    error = await failing(client.get_object, Bucket=BUCKET, Key="nothing/here")
    assert code_of(error) == "NoSuchKey"
    error = await failing(client.list_objects_v2, Bucket="nobucket")
    assert code_of(error) == "NoSuchBucket"
    (site.data / "folder").mkdir()
    error = await failing(client.get_object, Bucket=BUCKET, Key="folder")
    assert code_of(error) == "NoSuchKey"  # a folder is no object


async def test_listing_with_prefix_delimiter_and_pages(site: Site) -> None:
    client = site.client()
    for name in ("a/1", "a/2", "a-b", "a.c", "b/x/y", "b/z", "top"):
        path = site.data / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(name.encode())
    (site.data / "empty").mkdir()
    whole = await blocking(client.list_objects_v2, Bucket=BUCKET)
    keys = [c["Key"] for c in whole["Contents"]]
    assert keys == ["a-b", "a.c", "a/1", "a/2", "b/x/y", "b/z", "empty/", "top"]
    assert keys == sorted(keys, key=lambda k: k.encode())
    shallow = await blocking(client.list_objects_v2, Bucket=BUCKET, Delimiter="/")
    assert [c["Key"] for c in shallow["Contents"]] == ["a-b", "a.c", "top"]
    assert [p["Prefix"] for p in shallow["CommonPrefixes"]] == ["a/", "b/", "empty/"]
    inside = await blocking(client.list_objects_v2, Bucket=BUCKET, Prefix="b/", Delimiter="/")
    assert [c["Key"] for c in inside["Contents"]] == ["b/z"]
    assert [p["Prefix"] for p in inside["CommonPrefixes"]] == ["b/x/"]
    started = await blocking(client.list_objects_v2, Bucket=BUCKET, Prefix="a")
    assert [c["Key"] for c in started["Contents"]] == ["a-b", "a.c", "a/1", "a/2"]
    paged: list[str] = []
    token: dict[str, str] = {}
    while True:
        page = await blocking(client.list_objects_v2, Bucket=BUCKET, MaxKeys=3, **token)
        assert page["KeyCount"] <= 3
        paged += [c["Key"] for c in page.get("Contents", [])]
        if not page["IsTruncated"]:
            break
        token = {"ContinuationToken": page["NextContinuationToken"]}
    assert paged == keys
    after = await blocking(client.list_objects_v2, Bucket=BUCKET, StartAfter="a/2")
    assert [c["Key"] for c in after["Contents"]] == keys[4:]
    v1 = await blocking(client.list_objects, Bucket=BUCKET, Delimiter="/", MaxKeys=2)
    assert v1["IsTruncated"] and [c["Key"] for c in v1["Contents"]] == ["a-b", "a.c"]
    rest = await blocking(
        client.list_objects, Bucket=BUCKET, Delimiter="/", Marker=v1["NextMarker"]
    )
    assert [p["Prefix"] for p in rest["CommonPrefixes"]] == ["a/", "b/", "empty/"]


async def test_copy_delete_and_delete_objects(site: Site) -> None:
    client = site.client()
    await blocking(client.put_object, Bucket=BUCKET, Key="src.txt", Body=b"source")
    source = {"Bucket": BUCKET, "Key": "src.txt"}
    await blocking(client.copy_object, Bucket="other", Key="n/copy #1.txt", CopySource=source)
    assert (site.root / "other/n/copy #1.txt").read_bytes() == b"source"
    await blocking(client.delete_object, Bucket=BUCKET, Key="src.txt")
    assert not (site.data / "src.txt").exists()
    # A key that names nothing is deleted already, as S3 answers.
    gone = await blocking(client.delete_object, Bucket=BUCKET, Key="src.txt")
    assert gone["ResponseMetadata"]["HTTPStatusCode"] == 204
    for name in ("m/1", "m/2", "m/3"):
        await blocking(client.put_object, Bucket=BUCKET, Key=name, Body=b"x")
    keys = [{"Key": "m/1"}, {"Key": "m/2"}, {"Key": "m/missing"}]
    result = await blocking(client.delete_objects, Bucket=BUCKET, Delete={"Objects": keys})
    assert sorted(d["Key"] for d in result["Deleted"]) == ["m/1", "m/2", "m/missing"]
    quiet = await blocking(
        client.delete_objects,
        Bucket=BUCKET,
        Delete={"Objects": [{"Key": "m/3"}], "Quiet": True},
    )
    assert "Deleted" not in quiet and "Errors" not in quiet
    assert sorted(os.listdir(site.data / "m")) == []


async def test_folder_keys_make_and_remove_folders(site: Site) -> None:
    client = site.client()
    await blocking(client.put_object, Bucket=BUCKET, Key="console/folder/", Body=b"")
    assert (site.data / "console/folder").is_dir()
    head = await blocking(client.head_object, Bucket=BUCKET, Key="console/folder/")
    assert head["ContentLength"] == 0
    await blocking(client.put_object, Bucket=BUCKET, Key="console/kept", Body=b"k")
    # The marker of a folder that holds keys goes; the keys below it stay.
    await blocking(client.delete_object, Bucket=BUCKET, Key="console/")
    assert (site.data / "console/kept").read_bytes() == b"k"
    await blocking(client.delete_object, Bucket=BUCKET, Key="console/folder/")
    assert not (site.data / "console/folder").exists()


async def test_presigned_get_and_its_expiry(site: Site) -> None:
    client = site.client()
    await blocking(client.put_object, Bucket=BUCKET, Key="shared name.txt", Body=b"signed")
    params = {"Bucket": BUCKET, "Key": "shared name.txt"}
    url = await blocking(client.generate_presigned_url, "get_object", Params=params)

    def fetch(address: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(address) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    assert await blocking(fetch, url) == (200, b"signed")
    status, body = await blocking(fetch, url.replace("Signature=", "Signature=0"))
    assert status == 403 and b"SignatureDoesNotMatch" in body
    expired = await blocking(
        client.generate_presigned_url, "get_object", Params=params, ExpiresIn=0
    )
    status, body = await blocking(fetch, expired)
    assert status == 403 and b"Request has expired" in body


async def test_wrong_secret_and_wrong_key_id(site: Site) -> None:
    wrong_secret = site.client(secret="not-the-secret")
    error = await failing(wrong_secret.list_objects_v2, Bucket=BUCKET)
    assert code_of(error) == "SignatureDoesNotMatch"
    wrong_key = site.client(key_id="someone-else")
    error = await failing(wrong_key.put_object, Bucket=BUCKET, Key="x", Body=b"x")
    assert code_of(error) == "InvalidAccessKeyId"
    assert not (site.data / "x").exists()


async def test_a_tampered_body_is_refused_and_nothing_appears(site: Site) -> None:
    client = site.client()
    # Content-MD5 of other bytes: the upload is abandoned, nothing is left.
    error = await failing(
        client.put_object,
        Bucket=BUCKET,
        Key="md5.txt",
        Body=b"these bytes",
        ContentMD5="1B2M2Y8AsgTpgAmY7PhCfg==",
    )
    assert code_of(error) == "BadDigest"
    assert not (site.data / "md5.txt").exists()


async def test_multipart_upload_of_64_mib_in_8_mib_parts(site: Site) -> None:
    client = site.client()
    part_size = 8 << 20
    parts_data = [os.urandom(part_size) for _ in range(8)]
    made = await blocking(client.create_multipart_upload, Bucket=BUCKET, Key="big/file.bin")
    upload_id = made["UploadId"]
    parts = []
    for number, data in enumerate(parts_data, start=1):
        sent = await blocking(
            client.upload_part,
            Bucket=BUCKET,
            Key="big/file.bin",
            UploadId=upload_id,
            PartNumber=number,
            Body=data,
        )
        parts.append({"PartNumber": number, "ETag": sent["ETag"]})
    listed = await blocking(
        client.list_parts, Bucket=BUCKET, Key="big/file.bin", UploadId=upload_id
    )
    assert [p["Size"] for p in listed["Parts"]] == [part_size] * 8
    assert not (site.data / "big/file.bin").exists()  # nothing before completion
    done = await blocking(
        client.complete_multipart_upload,
        Bucket=BUCKET,
        Key="big/file.bin",
        UploadId=upload_id,
        MultipartUpload={"Parts": parts},
    )
    assert done["ETag"].endswith('-8"')
    got = await blocking(client.get_object, Bucket=BUCKET, Key="big/file.bin")
    assert await read_body(got) == b"".join(parts_data)
    error = await failing(client.list_parts, Bucket=BUCKET, Key="big/file.bin", UploadId=upload_id)
    assert code_of(error) == "NoSuchUpload"


async def test_completion_checks_its_parts(site: Site) -> None:
    client = site.client()
    made = await blocking(client.create_multipart_upload, Bucket=BUCKET, Key="p.bin")
    upload = {"Bucket": BUCKET, "Key": "p.bin", "UploadId": made["UploadId"]}
    first = await blocking(client.upload_part, PartNumber=1, Body=b"small", **upload)
    second = await blocking(client.upload_part, PartNumber=2, Body=b"end", **upload)
    wrong = [{"PartNumber": 1, "ETag": '"0123456789abcdef0123456789abcdef"'}]
    error = await failing(
        client.complete_multipart_upload, MultipartUpload={"Parts": wrong}, **upload
    )
    assert code_of(error) == "InvalidPart"
    small = [
        {"PartNumber": 1, "ETag": first["ETag"]},
        {"PartNumber": 2, "ETag": second["ETag"]},
    ]
    error = await failing(
        client.complete_multipart_upload, MultipartUpload={"Parts": small}, **upload
    )
    assert code_of(error) == "EntityTooSmall"
    assert not (site.data / "p.bin").exists()


async def test_abort_leaves_no_parts(site: Site) -> None:
    client = site.client()
    made = await blocking(client.create_multipart_upload, Bucket=BUCKET, Key="gone.bin")
    upload = {"Bucket": BUCKET, "Key": "gone.bin", "UploadId": made["UploadId"]}
    await blocking(client.upload_part, PartNumber=1, Body=b"x" * 1000, **upload)
    listed = await blocking(client.list_multipart_uploads, Bucket=BUCKET)
    assert [u["Key"] for u in listed["Uploads"]] == ["gone.bin"]
    spool = site.services.config.data_dir / "temp" / "s3-multipart"
    assert any(spool.rglob("part-*"))
    await blocking(client.abort_multipart_upload, **upload)
    assert not any(spool.rglob("*part*"))
    listed = await blocking(client.list_multipart_uploads, Bucket=BUCKET)
    assert "Uploads" not in listed
    error = await failing(client.upload_part, PartNumber=2, Body=b"y", **upload)
    assert code_of(error) == "NoSuchUpload"
    assert not (site.data / "gone.bin").exists()


async def test_the_main_port_points_elsewhere(services: Services, tmp_path: Path) -> None:
    async with open_api(services) as api:
        body = await api.get("/s3/files/key")
        assert body == {"code": 403, "message": "S3 server is not enabled", "data": None}
    services.config.s3_port = 5246
    async with open_api(services) as api:
        body = await api.call("PUT", "/s3/files/key")
        assert body["message"] == "S3 server bound to single port"


async def test_hide_rules_and_folder_passwords_apply(site: Site) -> None:
    """Unlike AList's S3 server, hide rules and folder passwords hold here as on every
    other protocol (tests/protocols/test_permission_table.py has the whole table)."""
    async with open_api(site.services) as api:
        admin = await api.login()
        for meta in (
            {"path": "/local/data", "hide": "secret"},
            {"path": "/local/data/locked", "password": "pw", "p_sub": True},
        ):
            body = await api.post("/api/admin/meta/create", meta, token=admin)
            assert body["code"] == 200, body
    (site.data / "secret.txt").write_bytes(b"s")
    (site.data / "shown.txt").write_bytes(b"v")
    (site.data / "locked").mkdir()
    (site.data / "locked" / "in.txt").write_bytes(b"l")
    listed = await blocking(site.client().list_objects_v2, Bucket=BUCKET)
    assert [c["Key"] for c in listed["Contents"]] == ["shown.txt"]
    error = await failing(site.client().get_object, Bucket=BUCKET, Key="locked/in.txt")
    assert code_of(error) == "AccessDenied"


async def test_no_keys_means_no_authentication(services: Services, tmp_path: Path) -> None:
    async with s3_site(services, tmp_path / "open", key_id="", secret="") as site:
        anyone = site.client(key_id="whoever", secret="whatever")
        await blocking(anyone.put_object, Bucket=BUCKET, Key="open.txt", Body=b"o")
        assert (site.data / "open.txt").read_bytes() == b"o"


async def test_a_second_storage_is_reached_only_through_its_bucket(site: Site) -> None:
    async with open_api(site.services) as api:
        outside = site.root.parent / "outside"
        outside.mkdir()
        (outside / "private.txt").write_bytes(b"p")
        await mount_local(api, "/private", outside)
    error = await failing(site.client().get_object, Bucket=BUCKET, Key="../../private/private.txt")
    assert code_of(error) in {"AccessDenied", "NoSuchKey"}
