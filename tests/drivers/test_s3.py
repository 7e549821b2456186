"""The S3 driver against moto's S3 server: the conformance suite, the options, paging,
links, multipart uploads, folder operations that fail midway, faults, and the API."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from manifold.drivers.base import Driver, LinkArgs, Upload
from manifold.drivers.registry import builtin_registry
from manifold.drivers.s3.driver import S3Driver
from manifold.drivers.s3.listing_xml import read_page
from manifold.drivers.s3.meta import CONFIG, DIRECT_UPLOAD_HELP
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    ObjectNotFound,
    TemporaryFailure,
)
from manifold.models import Storage
from manifold.services.fs.streams import open_range
from manifold.testing.conformance import (
    DriverConformance,
    DriverFactory,
    StreamAborted,
    aborted_stream,
    chunks,
    find,
    put_bytes,
    read_obj,
)
from manifold.vfs.layers import wrap
from tests.conftest import Api
from tests.drivers.driver_helpers import (
    Built,
    check_link_reads,
    check_served_through_the_api,
    driver_form,
    made,
)
from tests.drivers.s3_server import SECRET_KEY, S3Server, relay, s3_driver, started
from tests.fixtures.processes import free_port

BUCKET = "manifold-s3-tests"
MIB = 1 << 20
# Over two of ``SmallParts``' parts: S3's smallest part is 5 MiB.
BIG = 11 * MIB + 5


class SmallParts(S3Driver):
    """Parts and part-wise copies at S3's smallest part size, so a test of a few MiB
    goes through a multipart upload and an UploadPartCopy."""

    PART_SIZE = 5 * MIB
    COPY_LIMIT = 6 * MIB
    COPY_PART_SIZE = 5 * MIB


class SmallPages(S3Driver):
    PAGE_SIZE = 400
    DELETE_BATCH = 150


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("s3-logs")


@pytest.fixture(scope="module")
async def s3(logs: Path) -> AsyncIterator[S3Server]:
    async for server in started(logs):
        await server.bucket(BUCKET)
        yield server


@pytest.fixture
async def fragile(logs: Path) -> AsyncIterator[S3Server]:
    """A server of the test's own, which the test kills and starts again."""
    async for server in started(logs):
        await server.bucket("fragile")
        yield server


@pytest.fixture
async def folder(s3: S3Server) -> str:
    """A fresh folder name for a test (its keys are the test's own)."""
    return f"t-{secrets.token_hex(5)}"


Drivers = Built[S3Driver]


@pytest.fixture
async def drivers() -> AsyncIterator[Drivers]:
    built = Built(s3_driver, CONFIG)
    yield built
    await built.drop()


class TestS3Conformance(DriverConformance):
    @pytest.fixture
    def driver_factory(self, s3: S3Server) -> DriverFactory:
        async def build() -> Driver[Any]:
            return wrap(await s3_driver(s3, BUCKET), CONFIG)

        return build


# --- options and init ----------------------------------------------------------------

ALIST_OPTIONS = [
    ("root_folder_path", "string", "/", "", True, ""),
    ("bucket", "string", "", "", True, ""),
    ("endpoint", "string", "", "", True, ""),
    ("region", "string", "", "", False, ""),
    ("access_key_id", "string", "", "", True, ""),
    ("secret_access_key", "string", "", "", True, ""),
    ("session_token", "string", "", "", False, ""),
    ("custom_host", "string", "", "", False, ""),
    ("enable_custom_host_presign", "bool", "", "", False, ""),
    ("sign_url_expire", "number", "4", "", False, ""),
    ("placeholder", "string", "", "", False, ""),
    ("force_path_style", "bool", "", "", False, ""),
    ("list_object_version", "select", "v1", "v1,v2", False, ""),
    (
        "remove_bucket",
        "bool",
        "",
        "",
        False,
        "Remove bucket name from path when using custom host.",
    ),
    (
        "add_filename_to_disposition",
        "bool",
        "",
        "",
        False,
        "Add filename to Content-Disposition header.",
    ),
    # OpenList's, after AList's.
    ("enable_direct_upload", "bool", "", "", False, DIRECT_UPLOAD_HELP),
]
ITEM_KEYS = ("name", "type", "default", "options", "required", "help")


async def test_the_form_shows_alists_options_then_the_tls_switch(api: Api) -> None:
    info = await driver_form(api, "S3")
    items = info["additional"]
    assert [tuple(item[k] for k in ITEM_KEYS) for item in items[:-1]] == ALIST_OPTIONS
    tls = items[-1]
    assert (tls["name"], tls["type"], tls["default"], tls["required"]) == (
        "tls_insecure_skip_verify",
        "bool",
        "false",
        False,
    )
    assert "unsafe" in tls["help"].lower()
    assert info["config"] == {
        "name": "S3",
        "local_sort": True,
        "only_local": False,
        "only_proxy": False,
        "no_cache": False,
        "no_upload": False,
        "need_ms": False,
        "default_root": "/",
        "alert": "",
    }


async def test_a_missing_bucket_fails_init_by_name_without_the_secret(s3: S3Server) -> None:
    with pytest.raises(ObjectNotFound) as caught:
        await s3_driver(s3, "no-such-bucket-here")
    assert caught.value.message == "bucket no-such-bucket-here not found"
    assert SECRET_KEY not in str(caught.value)


async def test_an_unreachable_endpoint_fails_init_as_temporary_without_the_secret(
    s3: S3Server,
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(TemporaryFailure) as caught:
        await s3_driver(s3, BUCKET, endpoint=closed)
    text = f"{caught.value} {caught.value.__cause__}"
    assert SECRET_KEY not in text
    assert "cannot reach the s3 server at http://" in caught.value.message


async def test_missing_options_are_named_without_echoing_the_others(s3: S3Server) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await s3_driver(s3, "", access_key_id="")
    assert caught.value.message == "bucket, access_key_id is required"
    assert SECRET_KEY not in caught.value.message


async def test_an_endpoint_that_is_no_url_is_refused_at_init(s3: S3Server) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await s3_driver(s3, BUCKET, endpoint="http://[::1")
    assert caught.value.message == "endpoint is not a valid URL"


def test_an_addition_that_fails_validation_does_not_echo_the_secret() -> None:
    addition = json.dumps({"bucket": "b", "secret_access_key": SECRET_KEY})  # no root
    storage = Storage(id=1, mount_path="/s3", driver="S3", addition=addition)
    with pytest.raises(InvalidRequest) as caught:
        builtin_registry().build(storage)
    assert "root_folder_path" in caught.value.message
    assert SECRET_KEY not in caught.value.message


@pytest.fixture(scope="module")
async def tls_s3(logs: Path) -> AsyncIterator[S3Server]:
    async for server in started(logs, tls=True):
        await server.bucket("tls-bucket")
        yield server


async def test_tls_certificates_are_verified_unless_the_unsafe_option_says_not(
    tls_s3: S3Server, drivers: Drivers
) -> None:
    with pytest.raises(TemporaryFailure) as caught:
        await s3_driver(tls_s3, "tls-bucket")
    assert "TLS" in caught.value.message
    driver = await drivers(tls_s3, "tls-bucket", tls_insecure_skip_verify=True)
    assert await driver.list(await driver.root_obj()) == []
    file = await put_bytes(driver, await driver.root_obj(), "tls.bin", b"over tls")
    try:
        # Its presigned link says the certificate is not to be checked, and is read so.
        link = await driver.link(file, LinkArgs())
        assert (link.url.startswith("https://"), link.verify) == (True, False)
        assert await read_obj(driver, file) == b"over tls"
    finally:
        await driver.remove(file)


# --- folders, placeholders and pages ----------------------------------------------------


async def test_a_new_folder_is_a_placeholder_object_that_listings_hide(
    s3: S3Server, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(s3, BUCKET, placeholder="keep.me")
    made_folder = await made(driver, folder)
    assert await s3.keys(BUCKET, f"{folder}/") == [f"{folder}/keep.me"]
    await s3.put(BUCKET, f"{folder}/", b"")  # a folder's own key, as other tools make
    assert await driver.list(made_folder) == []
    assert (await driver.get(f"/{folder}")).is_dir
    with pytest.raises(ObjectNotFound):
        await driver.get(f"/{folder}/keep.me")
    with pytest.raises(InvalidRequest):
        await put_bytes(driver, made_folder, "keep.me", b"x")


async def test_the_root_folder_path_is_where_every_key_lives(
    s3: S3Server, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(s3, BUCKET, root_folder_path=f"/{folder}/inner/")
    root = await driver.root_obj()
    await put_bytes(driver, root, "x.txt", b"rooted")
    assert await s3.keys(BUCKET, f"{folder}/") == [f"{folder}/inner/x.txt"]
    assert [obj.name for obj in await driver.list(root)] == ["x.txt"]
    assert await read_obj(driver, await driver.get("/x.txt")) == b"rooted"


PAGED = "manifold-s3-paged"


@pytest.fixture(scope="module")
async def thousands(s3: S3Server) -> list[str]:
    """A folder of 2,000 files and 7 sub-folders, planted through the admin client in
    a bucket of its own (moto's listings cost the whole bucket's size)."""
    await s3.bucket(PAGED)
    files = [f"file-{i:05d}" for i in range(2000)]
    subs = [f"sub-{i}" for i in range(7)]
    keys = [f"paged/{name}" for name in files] + [f"paged/{name}/x" for name in subs]
    keys.append("paged/.alist")
    slots = asyncio.Semaphore(16)

    async def plant(key: str) -> None:
        async with slots:
            await s3.put(PAGED, key, b"")

    await asyncio.gather(*(plant(key) for key in keys))
    return files + subs


@pytest.mark.parametrize("version", ["v1", "v2"])
async def test_a_folder_of_thousands_lists_page_by_page_each_name_once(
    s3: S3Server, thousands: list[str], version: str, drivers: Drivers
) -> None:
    driver = await drivers(s3, PAGED, SmallPages, list_object_version=version)
    paged = await driver.get("/paged")
    pages = [page async for page in driver.list_pages(paged)]
    assert len(pages) >= 2000 // SmallPages.PAGE_SIZE
    listed = [obj.name for page in pages for obj in page]
    assert sorted(listed) == sorted(thousands)
    assert [obj.name for obj in await driver.list(paged)] == listed
    assert {obj.is_dir for page in pages for obj in page if obj.name.startswith("sub-")} == {True}


async def test_a_folder_of_many_keys_is_removed_in_batches(
    s3: S3Server, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(s3, BUCKET, SmallPages)
    doomed = await made(driver, folder)
    await asyncio.gather(*(s3.put(BUCKET, f"{folder}/d/{i:04d}", b"") for i in range(400)))
    await driver.remove(await driver.get(f"/{folder}"))
    assert await s3.keys(BUCKET, f"{folder}/") == []
    with pytest.raises(ObjectNotFound):
        await driver.list(doomed)


# --- links ------------------------------------------------------------------------------


@pytest.mark.parametrize("named", [False, True], ids=["filename*", "both filenames"])
async def test_a_link_is_a_presigned_url_that_expires_and_names_the_file(
    s3: S3Server, folder: str, named: bool, drivers: Drivers
) -> None:
    driver = await drivers(s3, BUCKET, sign_url_expire=2, add_filename_to_disposition=named)
    data = os.urandom(5000)
    file = await put_bytes(driver, await made(driver, folder), "report 1 ü.txt", data)
    link = await driver.link(file, LinkArgs())
    query = parse_qs(urlsplit(link.url).query)
    assert link.expires_in == 7200
    assert query["X-Amz-Expires"] == ["7200"]
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    whole = await check_link_reads(link.url, data)
    quoted = "report%201%20%C3%BC.txt"
    if named:
        expected = f"attachment; filename=\"report 1 ü.txt\"; filename*=UTF-8''{quoted}"
    else:
        expected = f"attachment; filename*=UTF-8''{quoted}"
    assert whole.headers["content-disposition"] == expected


async def test_a_custom_host_with_presign_signs_for_that_host(
    s3: S3Server, folder: str, drivers: Drivers
) -> None:
    host = f"localhost:{s3.port}"
    driver = await drivers(s3, BUCKET, custom_host=host, enable_custom_host_presign=True)
    file = await put_bytes(driver, await made(driver, folder), "a.bin", b"custom")
    link = await driver.link(file, LinkArgs())
    assert link.url.startswith(f"http://{host}/{BUCKET}/{folder}/a.bin?")
    assert "X-Amz-Signature=" in link.url
    assert "response-content-disposition" not in link.url  # as AList, not with a custom host
    async with httpx.AsyncClient() as http:
        assert (await http.get(link.url)).content == b"custom"


async def test_a_custom_host_without_presign_is_a_plain_url_that_can_drop_the_bucket(
    s3: S3Server, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(s3, BUCKET, custom_host="https://cdn.example.test", remove_bucket=True)
    file = await put_bytes(driver, await made(driver, folder), "a b.bin", b"plain")
    link = await driver.link(file, LinkArgs())
    assert link.url == f"https://cdn.example.test/{folder}/a%20b.bin"
    assert link.expires_in is None


# --- multipart uploads and copies --------------------------------------------------------


@pytest.mark.parametrize("sized", [True, False], ids=["size known", "size unknown"])
async def test_a_big_upload_goes_in_parts_and_reads_back_whole(
    s3: S3Server, folder: str, sized: bool, drivers: Drivers
) -> None:
    driver = await drivers(s3, BUCKET, SmallParts)
    data = os.urandom(BIG)
    target = await made(driver, folder)
    upload = Upload("big.bin", chunks(data, 256 * 1024), BIG if sized else None, None)
    stored = await driver.put(target, upload)
    head = await s3.client.head_object(Bucket=BUCKET, Key=f"{folder}/big.bin")
    assert head["ETag"].endswith('-3"')  # three parts
    assert stored.size == BIG
    assert await read_obj(driver, find(await driver.list(target), "big.bin")) == data
    assert await s3.uploads(BUCKET) == []


async def stalled_stream(first: bytes, started: asyncio.Event) -> AsyncIterator[bytes]:
    yield first
    started.set()
    await asyncio.Event().wait()  # a sender that never sends again
    yield b""


@pytest.mark.parametrize("failure", ["aborted", "short", "long", "cancelled"])
async def test_a_failed_big_upload_leaves_no_object_and_no_parts(
    s3: S3Server, folder: str, failure: str, drivers: Drivers
) -> None:
    driver = await drivers(s3, BUCKET, SmallParts)
    target = await made(driver, folder)
    data = os.urandom(BIG)
    if failure == "aborted":
        with pytest.raises(StreamAborted):
            await driver.put(target, Upload("x.bin", aborted_stream(data), BIG * 2, None))
    elif failure in ("short", "long"):
        announced = BIG + MIB if failure == "short" else BIG - MIB
        with pytest.raises(InvalidRequest):
            await driver.put(target, Upload("x.bin", chunks(data, MIB), announced, None))
    else:
        begun = asyncio.Event()
        putting = asyncio.ensure_future(
            driver.put(target, Upload("x.bin", stalled_stream(data, begun), None, None))
        )
        await begun.wait()
        putting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await putting
    assert await driver.list(target) == []
    assert await s3.keys(BUCKET, f"{folder}/") == [f"{folder}/.alist"]
    assert await s3.uploads(BUCKET) == []


async def test_a_copy_beyond_the_copy_limit_goes_in_parts(
    s3: S3Server, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(s3, BUCKET, SmallParts)
    data = os.urandom(BIG)
    source = await put_bytes(driver, await made(driver, folder), "big.bin", data)
    copied = await driver.copy(source, await made(driver, folder, "copies"))
    head = await s3.client.head_object(Bucket=BUCKET, Key=f"{folder}/copies/big.bin")
    assert head["ETag"].endswith('-3"')
    assert await read_obj(driver, copied) == data
    assert await s3.uploads(BUCKET) == []


# --- folder operations that fail midway ---------------------------------------------------


@pytest.mark.parametrize("operation", ["rename", "move", "copy"])
async def test_a_folder_operation_failing_midway_keeps_the_source_and_leaves_nothing(
    s3: S3Server, folder: str, operation: str, drivers: Drivers
) -> None:
    driver = await drivers.wrapped(s3, BUCKET)
    source = await made(driver, folder, "src")  # type: ignore[arg-type]
    sub = await driver.make_dir(source, "sub")
    for i in range(12):
        await put_bytes(driver, source if i % 2 else sub, f"f{i:02d}.txt", b"kept %d" % i)
    # An archived object: the store refuses to copy it, as S3 refuses Glacier copies.
    await s3.put(BUCKET, f"{folder}/src/sub/f05-frozen.bin", b"cold", StorageClass="GLACIER")
    before = sorted(await s3.keys(BUCKET, f"{folder}/src/"))
    target = await driver.make_dir(await driver.get(f"/{folder}"), "target")
    with pytest.raises(ManifoldError):
        if operation == "rename":
            await driver.rename(source, "renamed")
        elif operation == "move":
            await driver.move(source, target)
        else:
            await driver.copy(source, target)
    assert sorted(await s3.keys(BUCKET, f"{folder}/src/")) == before
    assert await s3.keys(BUCKET, f"{folder}/renamed/") == []
    assert await s3.keys(BUCKET, f"{folder}/target/src/") == []
    assert sorted(o.name for o in await driver.list(source)) == [
        f"f{i:02d}.txt" for i in range(1, 12, 2)
    ] + ["sub"]


# --- faults: the server killed -----------------------------------------------------------


class TinyPages(S3Driver):
    PAGE_SIZE = 50


async def works_again(server: S3Server, driver: Driver[Any]) -> None:
    """The same driver lists, stores and reads once the server is back."""
    await server.start()
    root = await driver.root_obj()
    assert await driver.list(root) == []
    back = await driver.make_dir(root, "back")
    file = await put_bytes(driver, back, "again.txt", b"again")
    assert await read_obj(driver, file) == b"again"


async def test_a_server_killed_during_a_listing_fails_it_as_temporary_and_it_comes_back(
    fragile: S3Server, drivers: Drivers
) -> None:
    driver = await drivers.wrapped(fragile, "fragile", TinyPages)
    await asyncio.gather(*(fragile.put("fragile", f"many/{i:03d}") for i in range(120)))
    many = await driver.get("/many")
    pages = driver.list_pages(many)
    assert len(await anext(pages)) == TinyPages.PAGE_SIZE
    fragile.daemon.kill()
    with pytest.raises(TemporaryFailure):
        await anext(pages)
    await pages.aclose()
    await works_again(fragile, driver)
    # Killed while a listing waits for its answer (the server hung, then died).
    await asyncio.gather(*(fragile.put("fragile", f"many/{i:03d}") for i in range(120)))
    with fragile.daemon.paused():
        listing = asyncio.ensure_future(driver.list(many))
        await asyncio.sleep(0.2)  # let the request reach the hung server
        fragile.daemon.kill()
    with pytest.raises(TemporaryFailure):
        await listing
    await works_again(fragile, driver)


async def test_a_server_killed_during_a_download_fails_it_as_temporary_and_it_comes_back(
    fragile: S3Server, drivers: Drivers
) -> None:
    driver = await drivers.wrapped(fragile, "fragile")
    data = os.urandom(32 * MIB)  # more than the sockets between the two can hold
    file = await put_bytes(driver, await driver.root_obj(), "film.bin", data)
    link = await driver.link(file, LinkArgs())
    stream = open_range(link, 0, None)
    assert len(await anext(stream)) > 0
    fragile.daemon.kill()
    with pytest.raises(TemporaryFailure):
        async for _ in stream:
            pass
    await works_again(fragile, driver)


async def test_a_server_killed_during_an_upload_fails_it_as_temporary_and_it_comes_back(
    fragile: S3Server, drivers: Drivers
) -> None:
    driver = await drivers.wrapped(fragile, "fragile", SmallParts)

    async def dying() -> AsyncIterator[bytes]:
        yield os.urandom(6 * MIB)
        fragile.daemon.kill()
        yield os.urandom(6 * MIB)

    root = await driver.root_obj()
    with pytest.raises(TemporaryFailure):
        await driver.put(root, Upload("half.bin", dying(), 12 * MIB, None))
    await fragile.start()
    assert await fragile.keys("fragile") == []
    assert await fragile.uploads("fragile") == []
    await works_again(fragile, driver)


async def test_an_upload_cut_off_midway_is_aborted_once_the_store_is_reachable(
    s3: S3Server, logs: Path, folder: str, drivers: Drivers
) -> None:
    cutter, endpoint = relay(logs, s3.port)
    try:
        driver = await drivers(s3, BUCKET, SmallParts, endpoint=endpoint)
        target = await made(driver, folder)

        async def cut_off() -> AsyncIterator[bytes]:
            yield os.urandom(6 * MIB)
            cutter.kill()
            yield os.urandom(6 * MIB)

        with pytest.raises(TemporaryFailure):
            await driver.put(target, Upload("half.bin", cut_off(), 12 * MIB, None))
        half = f"{folder}/half.bin"
        assert half in await s3.uploads(BUCKET)  # its abort could not reach the store
        cutter.start()
        await put_bytes(driver, target, "next.bin", b"next")
        for _ in range(100):  # the abort is tried again behind the next upload
            if half not in await s3.uploads(BUCKET):
                break
            await asyncio.sleep(0.1)
        assert half not in await s3.uploads(BUCKET)
        assert await s3.keys(BUCKET, f"{folder}/") == [f"{folder}/.alist", f"{folder}/next.bin"]
    finally:
        cutter.stop()


# --- through the API --------------------------------------------------------------------


async def test_an_s3_storage_mounted_through_the_api_lists_stores_serves_and_removes(
    api: Api, s3: S3Server, folder: str
) -> None:
    addition = s3.options(BUCKET, root_folder_path=f"/{folder}").model_dump_json()
    await check_served_through_the_api(api, "S3", addition, "/bucket")
    assert await s3.keys(BUCKET, f"{folder}/") == [f"{folder}/docs/.alist"]


# --- listing pages read without botocore's parser ----------------------------------

ODD_KEYS = ["plain.txt", "with space.txt", "per%46cent", "a+b=c&d<e>.txt", "ünï.txt"]
ODD_KEYS += ["dir/inner.txt", "dir 2/x", "z" * 200]


@pytest.mark.parametrize("operation", ["list_objects", "list_objects_v2"])
async def test_a_listing_page_is_read_as_botocore_reads_it(s3: S3Server, operation: str) -> None:
    bucket = await s3.bucket(f"pages-{operation.replace('_', '-')}")
    for key in ODD_KEYS:
        await s3.put(bucket, key, b"12345")
    params = {"Bucket": bucket, "Delimiter": "/", "MaxKeys": 3, "EncodingType": "url"}
    pages = 0
    while True:
        url = await s3.client.generate_presigned_url(operation, Params=params)
        async with httpx.AsyncClient() as http:
            raw = (await http.get(url)).content
        ours, theirs = read_page(raw), await getattr(s3.client, operation)(**params)
        assert ours is not None
        fields = ("IsTruncated", "NextMarker", "NextContinuationToken", "Prefix", "Delimiter")
        assert {f: ours.get(f) for f in fields} == {f: theirs.get(f) for f in fields}
        assert ours.get("CommonPrefixes") == theirs.get("CommonPrefixes")
        kept = [
            {k: item[k] for k in ("Key", "Size", "LastModified")}
            for item in theirs.get("Contents") or ()
        ]
        assert ours.get("Contents", []) == kept
        pages += 1
        if not theirs.get("IsTruncated"):
            break
        if operation == "list_objects_v2":
            params["ContinuationToken"] = theirs["NextContinuationToken"]
        else:
            params["Marker"] = theirs.get("NextMarker") or theirs["Contents"][-1]["Key"]
    assert pages >= 2  # eight keys and prefixes, three a page


def test_what_is_not_a_whole_listing_is_left_to_botocore() -> None:
    assert read_page(b"<Error><Code>NoSuchBucket</Code></Error>") is None
    assert read_page(b"not xml") is None
    time = b"<LastModified>2020-01-01T00:00:00.000Z</LastModified>"
    no_size = b"<ListBucketResult><Contents><Key>k</Key>" + time + b"</Contents></ListBucketResult>"
    assert read_page(no_size) is None
    declared = (
        b'<!DOCTYPE x [<!ENTITY a "b">]><ListBucketResult><Name>&a;</Name></ListBucketResult>'
    )
    assert read_page(declared) is None
    assert read_page(b"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>") == {
        "IsTruncated": False
    }
