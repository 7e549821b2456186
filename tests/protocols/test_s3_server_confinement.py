"""A bucket is a root as a user's base path is: no link or Alias takes a key out of it.

The world: a Local storage at ``/local`` whose ``data/users`` folder holds bob's and
carol's folders. Bucket ``bob`` is bob's folder; bucket ``files`` is ``data``, which
holds both. In bob's folder ``link_carol`` links to carol's folder, ``docs/lc`` too
(deeper down), ``docs/lf`` to her file, and ``one`` is an Alias of bob's ``docs``.
Through bucket ``bob`` every request for carol's files is refused, as the API, WebDAV,
SFTP and FTP refuse a user based at bob's folder; through ``files``, whose folder holds
carol's, the same links lead inside and are followed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from manifold.container import Services
from tests.api.fs_helpers import make_tree, save_settings
from tests.conftest import open_api
from tests.protocols.s3_helpers import Site, blocking, s3_site

SECRET = b"CAROL-SECRET"
# Each way from bucket bob into carol's folder: a link at the top, one deeper down, one
# inside an Alias's target.
WAYS = ["link_carol/", "docs/lc/", "one/lc/"]


@pytest.fixture
async def site(services: Services, tmp_path: Path) -> AsyncIterator[Site]:
    async with s3_site(services, tmp_path / "root") as served:
        users = make_tree(
            served.data / "users",
            {"carol/private.txt": SECRET, "carol/inner/deep.txt": SECRET, "bob/own.txt": "own",
             "bob/docs/mine.txt": "mine"},
        )  # fmt: skip
        bob = users / "bob"
        (bob / "link_carol").symlink_to("../carol", target_is_directory=True)
        (bob / "docs/lc").symlink_to("../../carol", target_is_directory=True)
        (bob / "docs/lf").symlink_to("../../carol/private.txt")
        async with open_api(services) as api:
            await api.as_admin()
            alias = {"paths": "/local/data/users/bob/docs", "writable": True}
            body = {"mount_path": "/local/data/users/bob/one", "driver": "Alias",
                    "addition": json.dumps(alias)}  # fmt: skip
            assert (await api.post("/api/admin/storage/create", body))["code"] == 200
            buckets = [
                {"name": "bob", "path": "/local/data/users/bob"},
                {"name": "files", "path": "/local/data"},
            ]
            await save_settings(api, s3_buckets=json.dumps(buckets))
        yield served


def carol_intact(site: Site) -> None:
    carol = site.data / "users/carol"
    assert sorted(p.name for p in carol.iterdir()) == ["inner", "private.txt"]
    assert (carol / "private.txt").read_bytes() == SECRET


async def refused(call: object, **kwargs: object) -> None:
    with pytest.raises(ClientError) as caught:
        await blocking(call, **kwargs)  # type: ignore[arg-type]
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403, kwargs
    assert SECRET not in json.dumps(caught.value.response, default=str).encode()


@pytest.mark.parametrize("way", WAYS)
async def test_reads_through_a_link_out_of_the_bucket_are_refused(site: Site, way: str) -> None:
    client = site.client()
    own = await blocking(client.get_object, Bucket="bob", Key="docs/mine.txt")
    assert await blocking(own["Body"].read) == b"mine"  # the premise: the bucket is served
    await refused(client.get_object, Bucket="bob", Key=f"{way}private.txt")
    await refused(client.head_object, Bucket="bob", Key=f"{way}private.txt")
    await refused(client.list_objects_v2, Bucket="bob", Prefix=way)
    await refused(client.list_objects_v2, Bucket="bob", Prefix=f"{way}inner/")
    source = {"Bucket": "bob", "Key": f"{way}private.txt"}
    await refused(client.copy_object, Bucket="files", Key="stolen.txt", CopySource=source)
    assert not (site.data / "stolen.txt").exists()


async def test_a_linked_file_out_of_the_bucket_is_refused(site: Site) -> None:
    client = site.client()
    await refused(client.get_object, Bucket="bob", Key="docs/lf")
    await refused(client.head_object, Bucket="bob", Key="docs/lf")


@pytest.mark.parametrize("way", WAYS)
async def test_writes_through_a_link_out_of_the_bucket_are_refused(site: Site, way: str) -> None:
    client = site.client()
    await refused(client.put_object, Bucket="bob", Key=f"{way}planted.txt", Body=b"x")
    await refused(client.put_object, Bucket="bob", Key=f"{way}private.txt", Body=b"x")
    await refused(client.delete_object, Bucket="bob", Key=f"{way}private.txt")
    deleted = await blocking(
        client.delete_objects, Bucket="bob", Delete={"Objects": [{"Key": f"{way}private.txt"}]}
    )
    assert [e["Code"] for e in deleted["Errors"]] == ["AccessDenied"]
    await refused(client.create_multipart_upload, Bucket="bob", Key=f"{way}big.bin")
    source = {"Bucket": "files", "Key": "users/bob/own.txt"}
    await refused(client.copy_object, Bucket="bob", Key=f"{way}copy.txt", CopySource=source)
    carol_intact(site)


async def test_an_upload_started_inside_cannot_take_parts_from_outside(site: Site) -> None:
    client = site.client()
    made = await blocking(client.create_multipart_upload, Bucket="bob", Key="big.bin")
    upload = {"Bucket": "bob", "Key": "big.bin", "UploadId": made["UploadId"]}
    source = {"Bucket": "bob", "Key": "link_carol/private.txt"}
    await refused(client.upload_part_copy, PartNumber=1, CopySource=source, **upload)
    listed = await blocking(client.list_parts, **upload)
    assert "Parts" not in listed


async def test_a_whole_listing_leaves_out_what_links_take_away(site: Site) -> None:
    client = site.client()
    listed = await blocking(client.list_objects_v2, Bucket="bob")
    keys = [c["Key"] for c in listed["Contents"]]
    assert not [k for k in keys if k.startswith(("link_carol/", "docs/lc/", "one/lc/"))]
    assert {"own.txt", "docs/mine.txt", "one/mine.txt"} <= set(keys)
    shallow = await blocking(client.list_objects_v2, Bucket="bob", Delimiter="/")
    assert "link_carol/" in [p["Prefix"] for p in shallow["CommonPrefixes"]]


async def test_a_bucket_that_holds_the_link_target_follows_it(site: Site) -> None:
    client = site.client()
    got = await blocking(client.get_object, Bucket="files", Key="users/bob/link_carol/private.txt")
    assert await blocking(got["Body"].read) == SECRET
    source = {"Bucket": "files", "Key": "users/bob/own.txt"}
    await blocking(client.copy_object, Bucket="bob", Key="copied/own.txt", CopySource=source)
    assert (site.data / "users/bob/copied/own.txt").read_bytes() == b"own"
