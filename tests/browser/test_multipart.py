"""Big uploads through the page: behind an nginx that caps request bodies at 100 MB, the
page's Multipart method gets a 300 MB file through where one whole-file request is
refused, a page closed mid-upload is continued by a fresh one (to a Local folder, and to
an S3 bucket without a byte of it staged on Manifold's disk), and an upload outlives
nginx stopped and started again under it; the HTTP Direct method sends a file from the
page straight to an S3 bucket."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ADMIN_PASSWORD, STEP, Site, log_in
from tests.drivers.nginx_server import nginx_daemon
from tests.drivers.s3_server import S3Server, started
from tests.fixtures.processes import Daemon

MB = 1_000_000
BIG = 300 * MB
MID = 120 * MB  # the S3 case: a third of its chunks is more than the page has in flight
CHUNK = 10 * 1024 * 1024
CHUNKS = -(-BIG // CHUNK)
IN_FLIGHT = 3  # chunks the page sends at once
BUCKET = "direct"
PARTS = "parts"  # the folder in the bucket that the S3 multipart test uploads to
# A 300 MB file is hashed in the page and sent through a proxy on a loaded machine.
UPLOAD_MS = 600_000

PROXY = """
        client_max_body_size 100m;
        access_log {log};
        location / {{
            proxy_pass {upstream};
            proxy_request_buffering off;
            proxy_read_timeout 900s;
            proxy_send_timeout 900s;
        }}
"""


@dataclasses.dataclass
class Proxy:
    site: Site  # the site as the page sees it: through nginx
    log: Path  # nginx's access log
    daemon: Daemon  # nginx, to stop and start again on its port


@pytest.fixture(scope="module")
def proxied(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    base = tmp_path_factory.mktemp("nginx-proxy")
    log = base / "access.log"
    extra = PROXY.format(log=log, upstream=site.base)
    daemon, url = nginx_daemon(base, base / "nginx", extra)
    try:
        yield Proxy(dataclasses.replace(site, base=url), log, daemon)
    finally:
        daemon.stop()


def random_file(path: Path, size: int) -> Path:
    """``size`` bytes, every mebibyte different, so a chunk out of place shows."""
    with path.open("wb") as out:
        for _ in range(size // (1 << 20)):
            out.write(os.urandom(1 << 20))
        out.write(os.urandom(size % (1 << 20)))
    return path


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return random_file(tmp_path_factory.mktemp("big") / "big.bin", BIG)


@pytest.fixture(scope="module")
def mid_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return random_file(tmp_path_factory.mktemp("mid") / "mid.bin", MID)


def entry(page: Any, name: str) -> Any:
    return page.locator(f'p.name[title="{name}"]')


def same_bytes(first: Path, second: Path) -> bool:
    """Whether two files hold the same bytes, compared a mebibyte at a time."""
    if first.stat().st_size != second.stat().st_size:
        return False
    with first.open("rb") as one, second.open("rb") as other:
        while block := one.read(1 << 20):
            if block != other.read(1 << 20):
                return False
    return True


async def open_upload(page: Any, site: Site, folder: str, method: str, rapid: bool) -> None:
    """The upload dialog of ``folder`` with ``method`` chosen (and "Try rapid", which
    makes the page hash the file and send the hashes, if ``rapid``; it starts ticked)."""
    # The methods on offer depend on the listing (its direct_upload_tools): wait for it.
    async with page.expect_response(lambda r: r.url.endswith("/api/fs/list")):
        await page.goto(site.base + folder)
    if not await page.locator("svg[tips=upload]").is_visible():
        await page.locator("svg.toolbar-toggle").click()
    await page.locator("svg[tips=upload]").click()
    if method != "Multipart":
        await page.get_by_text("Multipart", exact=True).click()
        await page.get_by_role("option", name=method, exact=True).click()
    if await page.get_by_role("checkbox", name="Try rapid").is_checked() != rapid:
        await page.get_by_text("Try rapid", exact=True).click()  # its label takes the click


async def pick(page: Any, path: Path) -> None:
    await page.locator("input[type=file]:not([webkitdirectory])").set_input_files(str(path))


def chunk_requests(page: Any) -> list[str]:
    """The chunk requests the page sends from now on (a list that grows)."""
    seen: list[str] = []

    def sent(request: Any) -> None:
        if request.url.split("?")[0].endswith("/api/fs/multipart/chunk"):
            seen.append(request.method)

    page.on("request", sent)
    return seen


async def test_behind_a_100m_proxy_stream_is_refused_and_multipart_arrives(
    page: Any, proxied: Proxy, big_file: Path
) -> None:
    site = proxied.site
    root = site.mount("capped")
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await open_upload(page, site, "/capped", "Stream", rapid=False)
    await pick(page, big_file)
    failed = page.get_by_text("413", exact=False).first
    await failed.wait_for(timeout=UPLOAD_MS)
    assert not (root / big_file.name).exists()

    sent = chunk_requests(page)
    await open_upload(page, site, "/capped", "Multipart", rapid=False)
    await pick(page, big_file)
    await page.get_by_text("Success", exact=True).first.wait_for(timeout=UPLOAD_MS)
    assert same_bytes(root / big_file.name, big_file)
    assert len(sent) >= CHUNKS
    assert " 413 " in proxied.log.read_text()


def chunks_of(size: int) -> int:
    return -(-size // CHUNK)


def on_chunk_response(page: Any, call: Callable[[], None]) -> None:
    """``call`` on every answer to a chunk the page sent."""
    page.on(
        "response",
        lambda r: call() if r.url.split("?")[0].endswith("/api/fs/multipart/chunk") else None,
    )


async def until_chunks(page: Any, done: list[int], count: int) -> None:
    """Waits until ``done`` has grown to ``count`` chunk answers."""
    waited = 0
    while len(done) < count and waited < UPLOAD_MS:
        await page.wait_for_timeout(250)
        waited += 250
    assert len(done) >= count


async def closed_after_a_third(
    browser: Any, site: Site, folder: str, file: Path, watch: Callable[[], None]
) -> int:
    """A page that uploads ``file`` to ``folder`` (hashes on, so it can be resumed) and is
    closed after about a third of the chunks; ``watch`` runs on every chunk answer.
    Returns how many chunks the server kept."""
    first = await browser.new_context(viewport={"width": 1280, "height": 800})
    first.set_default_timeout(STEP)
    cut = await first.new_page()
    done: list[int] = []
    on_chunk_response(cut, lambda: (done.append(1), watch()))
    await log_in(cut, site, "admin", ADMIN_PASSWORD)
    await open_upload(cut, site, folder, "Multipart", rapid=True)
    await pick(cut, file)
    count = chunks_of(file.stat().st_size)
    await until_chunks(cut, done, count // 3)
    await first.close()  # the connection cut: in-flight chunks are lost with it
    query = f"?path={folder}/{file.name}&size={file.stat().st_size}"
    held = site.api("/api/fs/multipart/status" + query)["data"]["received"]
    kept = sum(last - start + 1 for start, last in held)
    assert IN_FLIGHT < kept < count
    return kept


async def continued(page: Any, site: Site, folder: str, file: Path) -> list[str]:
    """A fresh page uploads ``file`` to ``folder`` again, hashes on, to success; returns
    the chunk requests it sent."""
    sent = chunk_requests(page)
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await open_upload(page, site, folder, "Multipart", rapid=True)
    await pick(page, file)
    await page.get_by_text("Success", exact=True).first.wait_for(timeout=UPLOAD_MS)
    return sent


async def test_a_page_closed_mid_upload_is_continued_by_a_fresh_one(
    browser: Any, page: Any, proxied: Proxy, big_file: Path
) -> None:
    site = proxied.site
    root = site.mount("resumed")
    kept = await closed_after_a_third(browser, site, "/resumed", big_file, lambda: None)
    assert not (root / big_file.name).exists()
    sent = await continued(page, site, "/resumed", big_file)
    assert same_bytes(root / big_file.name, big_file)
    # Only what the first page did not get through is sent again: at most the chunks
    # missing at the cut and one retry of each of the three the page had in flight (the
    # server may still have been finishing them when the fresh page asked).
    assert len(sent) <= CHUNKS - kept + IN_FLIGHT


async def test_an_upload_outlives_the_proxy_stopped_and_started_again(
    page: Any, proxied: Proxy, big_file: Path
) -> None:
    site = proxied.site
    root = site.mount("restarted")
    done: list[int] = []
    on_chunk_response(page, lambda: done.append(1))
    failed: list[str] = []
    page.on(
        "requestfailed",
        lambda r: failed.append(r.url) if "/api/fs/multipart/chunk" in r.url else None,
    )
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await open_upload(page, site, "/restarted", "Multipart", rapid=False)
    await pick(page, big_file)
    await until_chunks(page, done, CHUNKS // 3)
    proxied.daemon.stop()  # every connection through it is cut, chunks half sent
    await page.wait_for_timeout(3000)  # the page's retries meet a closed port meanwhile
    proxied.daemon.start()
    # The page retries the chunks that failed by network error, on the same upload.
    await page.get_by_text("Success", exact=True).first.wait_for(timeout=UPLOAD_MS)
    assert failed
    assert same_bytes(root / big_file.name, big_file)


@pytest.fixture(scope="module")
async def s3(tmp_path_factory: pytest.TempPathFactory, site: Site) -> AsyncIterator[S3Server]:
    async for server in started(tmp_path_factory.mktemp("s3-browser")):
        await server.bucket(BUCKET)
        rule = {
            "AllowedOrigins": [site.base],
            "AllowedMethods": ["PUT"],
            "AllowedHeaders": ["*"],
            "ExposeHeaders": ["ETag"],
            "MaxAgeSeconds": 3600,
        }
        await server.client.put_bucket_cors(Bucket=BUCKET, CORSConfiguration={"CORSRules": [rule]})
        yield server


async def test_http_direct_sends_the_file_from_the_page_to_the_bucket(
    page: Any, site: Site, s3: S3Server, tmp_path: Path
) -> None:
    addition = s3.options(BUCKET, root_folder_path="/root", enable_direct_upload=True)
    body = {"mount_path": "/direct", "driver": "S3", "addition": addition.model_dump_json()}
    site.api("/api/admin/storage/create", body)
    picked = tmp_path / "straight.bin"
    picked.write_bytes(os.urandom(12 * MB))
    await log_in(page, site, "admin", ADMIN_PASSWORD)
    await open_upload(page, site, "/direct", "HTTP Direct", rapid=False)
    await pick(page, picked)
    await page.get_by_text("Success", exact=True).first.wait_for(timeout=UPLOAD_MS)
    stored = await s3.client.get_object(Bucket=BUCKET, Key="root/straight.bin")
    assert await stored["Body"].read() == picked.read_bytes()


def staged_bytes(site: Site) -> int:
    """The bytes in the server's multipart staging folder (the default one)."""
    staging = site.data / "multipart"
    return sum(f.stat().st_size for f in staging.rglob("*") if f.is_file())


async def test_a_page_closed_mid_upload_to_s3_is_continued_with_nothing_staged_on_disk(
    browser: Any, page: Any, proxied: Proxy, s3: S3Server, mid_file: Path
) -> None:
    site = proxied.site
    addition = s3.options(BUCKET, root_folder_path=f"/{PARTS}")
    body = {"mount_path": "/bucket", "driver": "S3", "addition": addition.model_dump_json()}
    site.api("/api/admin/storage/create", body)
    staged: list[int] = []
    await closed_after_a_third(
        browser, site, "/bucket", mid_file, lambda: staged.append(staged_bytes(site))
    )
    on_chunk_response(page, lambda: staged.append(staged_bytes(site)))
    await continued(page, site, "/bucket", mid_file)
    staged.append(staged_bytes(site))
    # Every chunk was answered once, but for those in flight when the first page closed.
    assert len(staged) > chunks_of(MID) - IN_FLIGHT and max(staged) == 0
    stored = await s3.client.get_object(Bucket=BUCKET, Key=f"{PARTS}/{mid_file.name}")
    assert await stored["Body"].read() == mid_file.read_bytes()
    assert await s3.uploads(BUCKET) == []
