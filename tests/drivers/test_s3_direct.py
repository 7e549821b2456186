"""Direct uploads to an S3 storage (OpenList's ``enable_direct_upload``): the browser
asks ``/api/fs/get_direct_upload_info`` for a presigned PUT of one key and sends the
bytes to the bucket itself, after the checks an ``/api/fs/put`` passes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest

from manifold.container import Services
from tests.conftest import Api, open_api
from tests.drivers.s3_server import S3Server, started
from tests.protocols.s3_helpers import BUCKET as BUCKET_FILES
from tests.protocols.s3_helpers import KEY_ID, SECRET, s3_site

BUCKET = "direct"


@pytest.fixture(scope="module")
async def s3(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[S3Server]:
    logs: Path = tmp_path_factory.mktemp("s3-direct-logs")
    async for server in started(logs):
        await server.bucket(BUCKET)
        yield server


async def mount(api: Api, s3: S3Server, path: str, **options: Any) -> None:
    addition = s3.options(BUCKET, root_folder_path="/root", **options).model_dump_json()
    body = {"mount_path": path, "driver": "S3", "addition": addition}
    created = await api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created


async def ask(api: Api, folder: str, name: str, **headers: str) -> dict[str, Any]:
    body = {"path": folder, "file_name": name, "file_size": 10, "tool": "HttpDirect"}
    return await api.post("/api/fs/get_direct_upload_info", body, headers=headers)


async def test_the_url_puts_exactly_that_key_and_lives_as_long_as_links(
    api: Api, s3: S3Server
) -> None:
    await api.as_admin()
    await mount(api, s3, "/bucket", enable_direct_upload=True, sign_url_expire=2)
    answer = await ask(api, "/bucket/in coming", "report ü.bin")
    assert answer["code"] == 200, answer
    info = answer["data"]
    assert (info["method"], info["chunk_size"]) == ("PUT", 0)
    url = urlsplit(info["upload_url"])
    assert unquote(url.path) == f"/{BUCKET}/root/in coming/report ü.bin"
    query = parse_qs(url.query)
    assert query["X-Amz-Expires"] == ["7200"]
    assert query["X-Amz-SignedHeaders"] == ["host"]
    data = os.urandom(200_000)
    async with httpx.AsyncClient() as http:
        put = await http.put(info["upload_url"], content=data)
    assert put.status_code == 200, put.text
    stored = await s3.client.get_object(Bucket=BUCKET, Key="root/in coming/report ü.bin")
    assert await stored["Body"].read() == data


async def test_fs_list_names_the_tool_only_where_it_is_on_and_the_caller_may_write(
    api: Api, s3: S3Server
) -> None:
    await api.as_admin()
    await mount(api, s3, "/on", enable_direct_upload=True)
    await mount(api, s3, "/off")
    on = await api.post("/api/fs/list", {"path": "/on"})
    assert on["data"]["direct_upload_tools"] == ["HttpDirect"]
    off = await api.post("/api/fs/list", {"path": "/off"})
    assert "direct_upload_tools" not in off["data"]
    await api.make_user("reader", "reader-pass-1", base_path="/", permission=0)
    api.token = await api.login("reader", "reader-pass-1")
    read_only = await api.post("/api/fs/list", {"path": "/on"})
    assert "direct_upload_tools" not in read_only["data"]


async def test_a_storage_without_it_answers_not_implement(api: Api, s3: S3Server) -> None:
    await api.as_admin()
    await mount(api, s3, "/off")
    answer = await ask(api, "/off", "a.bin")
    assert (answer["code"], answer["message"]) == (500, "not implement")


async def test_the_checks_of_a_put_come_before_anything_is_signed(api: Api, s3: S3Server) -> None:
    await api.as_admin()
    await mount(api, s3, "/bucket", enable_direct_upload=True)
    await s3.put(BUCKET, "root/taken.bin")
    taken = await ask(api, "/bucket", "taken.bin", Overwrite="false")
    assert (taken["code"], taken["message"]) == (403, "file exists")
    assert (await ask(api, "/bucket", "../escape.bin"))["code"] in (400, 403)
    assert (await ask(api, "/bucket", ".."))["code"] in (400, 403)
    await api.make_user("reader", "reader-pass-1", base_path="/", permission=0)
    await api.make_user("jailed", "jailed-pass-1", base_path="/bucket/jail", permission=8)
    api.token = await api.login("reader", "reader-pass-1")
    refused = await ask(api, "/bucket", "a.bin")
    assert (refused["code"], refused["message"]) == (403, "permission denied")
    api.token = await api.login("jailed", "jailed-pass-1")
    inside = await ask(api, "/", "b.bin")
    assert inside["code"] == 200, inside
    assert unquote(urlsplit(inside["data"]["upload_url"]).path).endswith("/root/jail/b.bin")
    outside = await ask(api, "/../..", "c.bin")
    assert (outside["code"], outside["data"]) == (403, None)


async def test_the_url_is_refused_for_any_other_key_by_a_store_that_checks_signatures(
    services: Services, tmp_path: Path
) -> None:
    # moto takes any signature; Manifold's own S3 server checks presigned URLs as AWS does.
    async with s3_site(services, tmp_path / "site") as site, open_api(services) as api:
        await api.as_admin()
        options = {
            "root_folder_path": "/",
            "bucket": BUCKET_FILES,
            "endpoint": site.url,
            "region": "us-east-1",
            "access_key_id": KEY_ID,
            "secret_access_key": SECRET,
            "force_path_style": True,
            "enable_direct_upload": True,
        }
        await api.mount("S3", "/store", options)
        answer = await ask(api, "/store", "mine.bin")
        assert answer["code"] == 200, answer
        url = answer["data"]["upload_url"]
        async with httpx.AsyncClient() as http:
            assert (await http.put(url, content=b"mine")).status_code == 200
            other = url.replace("/mine.bin?", "/theirs.bin?")
            assert other != url
            assert (await http.put(other, content=b"theirs")).status_code == 403
            tampered = url.replace("X-Amz-Expires=14400", "X-Amz-Expires=604800")
            assert tampered != url
            assert (await http.put(tampered, content=b"later")).status_code == 403
    assert (site.data / "mine.bin").read_bytes() == b"mine"
    assert not (site.data / "theirs.bin").exists()
