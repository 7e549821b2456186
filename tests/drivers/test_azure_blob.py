"""The Azure Blob Storage driver against Azurite: the conformance suite through the
driver's layers, the options, links that expire, block uploads cut midway, paged
listings, times, errors, and the driver mounted through the API."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from manifold.drivers.azure_blob.account import account_of
from manifold.drivers.azure_blob.driver import AzureBlobDriver
from manifold.drivers.azure_blob.meta import CONFIG
from manifold.drivers.base import Driver, LinkArgs, Upload
from manifold.drivers.resources import Resources
from manifold.errors import (
    InvalidRequest,
    NotSupported,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.testing.conformance import (
    DriverConformance,
    DriverFactory,
    StreamAborted,
    chunks,
    find,
    put_bytes,
    read_obj,
)
from manifold.vfs.layers import wrap
from tests.conftest import Api
from tests.drivers.azurite_server import KEY, Azurite, azure_driver, azurite
from tests.drivers.driver_helpers import (
    Built,
    check_link_reads,
    check_served_through_the_api,
    driver_form,
    form_items,
    made,
)
from tests.fixtures.processes import free_port

CONTAINER = "manifold-azure-tests"
KIB = 1 << 10
# Another account key: valid base64, the wrong one.
WRONG_KEY = "V3Jvbmcta2V5LW9mLTY0LWJ5dGVzLXRoYXQtaXMtbm90LXRoZS1yaWdodC1vbmUhISEhISEhISEhISEhIQ=="


class SmallBlocks(AzureBlobDriver):
    """Blocks of 64 KiB, so a test of a few hundred KiB goes through staged blocks."""

    BLOCK_SIZE = 64 * KIB


class SmallPages(AzureBlobDriver):
    PAGE_SIZE = 40


class ShortHours(AzureBlobDriver):
    """An hour of ``sign_url_expire`` is one second here, so a link expires in a test."""

    SIGN_HOUR = 1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    yield from azurite(tmp_path_factory.mktemp("azurite"))


@pytest.fixture
def folder() -> str:
    """A fresh folder name for a test (its blobs are the test's own)."""
    return f"t-{secrets.token_hex(5)}"


Drivers = Built[AzureBlobDriver]


@pytest.fixture
async def drivers() -> AsyncIterator[Drivers]:
    built = Built(azure_driver, CONFIG)
    yield built
    await built.drop()


class TestAzureBlobConformance(DriverConformance):
    @pytest.fixture
    def driver_factory(self, server: Azurite) -> DriverFactory:
        async def build() -> Driver[Any]:
            return wrap(await azure_driver(server, CONTAINER), CONFIG)

        return build


# --- options and init ----------------------------------------------------------------

OPENLIST_OPTIONS = [
    ("root_folder_path", "string", "/", True),
    ("endpoint", "string", "https://<accountname>.blob.core.windows.net/", True),
    ("access_key", "string", "", True),
    ("container_name", "string", "", True),
    ("sign_url_expire", "number", "4", False),
    ("enable_direct_upload", "bool", "", False),  # Manifold's, after OpenList's
]


async def test_the_form_shows_openlists_options_in_its_order(api: Api) -> None:
    info = await driver_form(api, "Azure Blob Storage")
    assert form_items(info["additional"]) == OPENLIST_OPTIONS
    assert info["config"]["local_sort"] is True


@pytest.mark.parametrize(
    ("endpoint", "name", "url"),
    [
        ("myaccount", "myaccount", "https://myaccount.blob.core.windows.net"),
        (
            "https://MyAccount.blob.core.windows.net/",
            "myaccount",
            "https://MyAccount.blob.core.windows.net",
        ),
        (
            "myaccount.blob.core.chinacloudapi.cn",
            "myaccount",
            "https://myaccount.blob.core.chinacloudapi.cn",
        ),
        (
            "http://127.0.0.1:10000/devstoreaccount1/",
            "devstoreaccount1",
            "http://127.0.0.1:10000/devstoreaccount1",
        ),
    ],
)
def test_the_endpoint_names_the_account_in_its_host_or_its_path(
    endpoint: str, name: str, url: str
) -> None:
    account = account_of(endpoint)
    assert (account.name, account.url) == (name, url)


@pytest.mark.parametrize(
    "endpoint",
    ["", "https://<accountname>.blob.core.windows.net/", "ftp://x.example", "https://a.b/c/d"],
)
def test_an_endpoint_without_an_account_is_refused(endpoint: str) -> None:
    with pytest.raises(InvalidRequest):
        account_of(endpoint)


async def test_a_wrong_key_fails_init_as_denied_naming_the_key_not_showing_it(
    server: Azurite,
) -> None:
    with pytest.raises(PermissionDenied) as caught:
        await azure_driver(server, CONTAINER, access_key=WRONG_KEY)
    assert "access key" in caught.value.message
    assert server.endpoint in caught.value.message
    assert WRONG_KEY not in str(caught.value)


async def test_a_key_that_is_no_account_key_is_refused_before_any_request(
    server: Azurite,
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await azure_driver(server, CONTAINER, access_key="not base64 at all!")
    assert caught.value.message == "access_key is not an account key (base64 text)"


async def test_an_unreachable_endpoint_fails_init_as_temporary_naming_the_url(
    server: Azurite,
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/devstoreaccount1"
    with pytest.raises(TemporaryFailure) as caught:
        await azure_driver(server, CONTAINER, endpoint=closed)
    assert f"azure blob endpoint {closed} unreachable" in caught.value.message
    assert KEY not in caught.value.message


async def test_a_missing_container_is_made_at_init_and_named_when_gone_later(
    server: Azurite, drivers: Drivers
) -> None:
    container = f"made-{secrets.token_hex(4)}"
    driver = await drivers(server, container)
    await put_bytes(driver, await driver.root_obj(), "a.txt", b"a")
    assert await server.names(container) == ["a.txt"]
    await server.drop_container(container)
    with pytest.raises(ObjectNotFound) as caught:
        await driver.list(await driver.root_obj())
    assert caught.value.message == (
        f"azure blob: container {container} not found at {server.endpoint}"
    )


# --- folders and listings ----------------------------------------------------------------


async def test_a_new_folder_is_a_marker_blob_as_openlist_makes_it(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(server, CONTAINER)
    await made(driver, folder, "empty")
    assert await server.names(CONTAINER, f"{folder}/") == [f"{folder}/", f"{folder}/empty/"]
    async with server.client() as service:
        blob = service.get_container_client(CONTAINER).get_blob_client(f"{folder}/empty/")
        properties = await blob.get_blob_properties()
    assert (properties.size, properties.metadata) == (0, {"hdi_isfolder": "true"})
    listed = await driver.list(await driver.get(f"/{folder}"))
    assert [(o.name, o.is_dir) for o in listed] == [("empty", True)]


async def test_folders_other_tools_left_without_markers_are_listed(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    await server.put(CONTAINER, f"{folder}/deep/down/file.txt", b"bytes")
    driver = await drivers(server, CONTAINER)
    deep = await driver.get(f"/{folder}/deep")
    assert deep.is_dir
    assert [(o.name, o.is_dir) for o in await driver.list(deep)] == [("down", True)]
    await driver.remove(deep)
    assert await server.names(CONTAINER, f"{folder}/") == []


async def test_a_big_folder_lists_page_by_page_each_name_once_and_within_the_bound(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    names = [f"f-{i:03d}.txt" for i in range(100)]
    await asyncio.gather(*(server.put(CONTAINER, f"{folder}/big/{n}") for n in names))
    await asyncio.gather(*(server.put(CONTAINER, f"{folder}/big/d-{i}/x") for i in range(30)))
    driver = await drivers(server, CONTAINER, cls=SmallPages)
    big = await driver.get(f"/{folder}/big")
    pages = [page async for page in driver.list_pages(big)]
    assert len(pages) >= 3
    listed = sorted(o.name for page in pages for o in page)
    assert listed == sorted(names + [f"d-{i}" for i in range(30)])
    assert sorted(o.name for o in await driver.list(big)) == listed
    driver.resources = Resources(max_listing_entries=100)
    with pytest.raises(ServerError) as caught:
        await driver.list(big)
    assert "holds more than 100 entries" in caught.value.message


async def test_an_uploads_own_time_is_kept_and_rclones_is_read(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(server, CONTAINER)
    root = await made(driver, folder)
    when = datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)
    await driver.put(root, Upload("timed.txt", chunks(b"timed"), 5, when))
    copies = await made(driver, folder, "copies")
    await driver.copy(find(await driver.list(root), "timed.txt"), copies)
    rclone_time = {"mtime": "2019-12-31T23:59:58.123456789Z"}
    await server.put(CONTAINER, f"{folder}/rclone.txt", b"r", metadata=rclone_time)
    listed = await driver.list(root)
    assert find(listed, "timed.txt").modified == when
    assert find(await driver.list(copies), "timed.txt").modified == when
    assert find(listed, "rclone.txt").modified == datetime(
        2019, 12, 31, 23, 59, 58, 123456, tzinfo=UTC
    )


# --- links ------------------------------------------------------------------------------


async def test_a_link_is_a_sas_url_valid_for_the_storages_hours(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(server, CONTAINER, sign_url_expire=2)
    data = os.urandom(5000)
    file = await put_bytes(driver, await made(driver, folder), "report 1 ü.txt", data)
    link = await driver.link(file, LinkArgs())
    query = parse_qs(urlsplit(link.url).query)
    assert link.expires_in == 7200
    assert query["sp"] == ["r"]
    expiry = datetime.fromisoformat(query["se"][0])
    assert abs(expiry - (datetime.now(UTC) + timedelta(hours=2))) < timedelta(minutes=10)
    await check_link_reads(link.url, data)


async def test_a_link_after_its_expiry_is_refused_by_the_service(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(server, CONTAINER, cls=ShortHours, sign_url_expire=1)
    file = await put_bytes(driver, await made(driver, folder), "brief.txt", b"brief")
    link = await driver.link(file, LinkArgs())
    assert link.expires_in == 1
    await asyncio.sleep(3)  # past the link's second, with the service's clock granularity
    async with httpx.AsyncClient() as http:
        late = await http.get(link.url)
    assert late.status_code == 403
    # A new link reads it: one of a minute, since a second's link made now can lapse
    # before a loaded machine fetches it (the service keeps whole seconds of its expiry).
    lasting = await drivers(server, CONTAINER, cls=ShortHours, sign_url_expire=60)
    assert await read_obj(lasting, file) == b"brief"


# --- uploads ------------------------------------------------------------------------------


async def test_a_direct_upload_sas_writes_that_blob_only_and_expires(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(
        server, CONTAINER, cls=ShortHours, sign_url_expire=2, enable_direct_upload=True
    )
    assert driver.direct_upload_tools() == ["HttpDirect"]
    info = await driver.direct_upload_info(await made(driver, folder), "up ü.bin", 5)
    assert (info["method"], info["chunk_size"]) == ("PUT", 0)
    url, headers = info["upload_url"], info["headers"]
    async with httpx.AsyncClient() as http:
        assert (await http.put(url, content=b"first", headers=headers)).status_code == 201
        other = url.replace("up%20%C3%BC.bin", "other.bin")
        assert other != url
        assert (await http.put(other, content=b"x", headers=headers)).status_code == 403
        assert (await http.get(url)).status_code == 403  # no read in the SAS
        await asyncio.sleep(4)  # past its two seconds, with the service's clock granularity
        late = await http.put(url, content=b"late", headers=headers)
    assert late.status_code == 403
    assert await server.names(CONTAINER, f"{folder}/") == [f"{folder}/", f"{folder}/up ü.bin"]


async def test_direct_uploads_are_off_unless_the_option_says(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(server, CONTAINER)
    assert driver.direct_upload_tools() == []
    with pytest.raises(NotSupported):
        await driver.direct_upload_info(await made(driver, folder), "a.bin", 1)


async def cut_after(data: bytes, size: int) -> AsyncIterator[bytes]:
    """``size`` bytes of ``data`` in chunks, then the sender is gone."""
    async for chunk in chunks(data[:size], 16 * KIB):
        yield chunk
    raise StreamAborted()


async def test_a_big_upload_goes_in_blocks_and_reads_back_whole(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(server, CONTAINER, cls=SmallBlocks)
    data = os.urandom(300 * KIB + 7)
    sent: list[int] = []
    upload = Upload("big.bin", chunks(data), len(data), None, progress=sent.append)
    stored = await driver.put(await made(driver, folder), upload)
    assert stored.size == len(data)
    assert sum(sent) >= len(data)
    async with server.client() as service:
        blob = service.get_container_client(CONTAINER).get_blob_client(f"{folder}/big.bin")
        committed, _ = await blob.get_block_list("committed")
    assert len(committed) == 5
    assert await read_obj(driver, stored) == data


async def test_an_upload_cut_halfway_leaves_nothing_and_its_blocks_are_no_file(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(server, CONTAINER, cls=SmallBlocks)
    root = await made(driver, folder)
    data = os.urandom(400 * KIB)
    with pytest.raises(StreamAborted):
        await driver.put(root, Upload("cut.bin", cut_after(data, 200 * KIB), len(data), None))
    assert await driver.list(root) == []
    with pytest.raises(ObjectNotFound):
        await driver.get(f"/{folder}/cut.bin")
    # The staged blocks are there, uncommitted: no listing, lookup or read sees them.
    assert f"{folder}/cut.bin" in await server.names(CONTAINER, folder, uncommitted=True)
    assert await server.names(CONTAINER, f"{folder}/cut") == []


async def test_an_upload_cut_halfway_over_a_file_keeps_the_old_bytes(
    server: Azurite, folder: str, drivers: Drivers
) -> None:
    driver = await drivers(server, CONTAINER, cls=SmallBlocks)
    root = await made(driver, folder)
    await put_bytes(driver, root, "kept.bin", b"the old bytes")
    data = os.urandom(400 * KIB)
    with pytest.raises(StreamAborted):
        await driver.put(root, Upload("kept.bin", cut_after(data, 300 * KIB), len(data), None))
    kept = find(await driver.list(root), "kept.bin")
    assert (kept.size, await read_obj(driver, kept)) == (13, b"the old bytes")


# --- through the API ----------------------------------------------------------------------


async def test_an_azure_storage_mounted_through_the_api_lists_stores_serves_and_removes(
    api: Api, server: Azurite, folder: str
) -> None:
    addition = server.options(CONTAINER, root_folder_path=f"/{folder}").model_dump_json()
    await check_served_through_the_api(api, "Azure Blob Storage", addition, "/az")
    assert await server.names(CONTAINER, f"{folder}/") == [f"{folder}/docs/"]


def test_the_fixture_gives_what_an_rclone_remote_needs(server: Azurite) -> None:
    account = server.account()
    assert (account.account, account.key) == ("devstoreaccount1", KEY)
    assert account.endpoint == f"http://127.0.0.1:{server.port}/devstoreaccount1"
