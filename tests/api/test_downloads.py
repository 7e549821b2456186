"""Downloads through /d/ and /p/: sign checks, headers, ranges and error envelopes."""

from __future__ import annotations

import asyncio
import io
import json
import ssl
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from PIL import Image
from pydantic import BaseModel

from manifold.api.file_response import LocalFileResponse
from manifold.app import create_app
from manifold.container import Services
from manifold.drivers.base import DriverConfig, LinkArgs, option
from manifold.errors import ManifoldError, NotAFile, ObjectNotFound, Unauthorized
from manifold.models import Link, Obj
from manifold.services.auth.sign import sign_path, verify_sign
from tests.api.fs_helpers import add_meta, make_tree, mount_local, save_settings
from tests.conftest import Api
from tests.drivers.inert import InertDriver
from tests.fixtures.certs import self_signed

CONTENT = bytes(range(256)) * 4  # 1024 bytes, every byte value
UNICODE_NAME = "résumé 文件.bin"


@pytest.fixture
async def served(api: Api, tmp_path: Path) -> Path:
    root = make_tree(
        tmp_path / "root",
        {"data.bin": CONTENT, "a.txt": "alpha text", UNICODE_NAME: b"unicode!", "sub/": ""},
    )
    await mount_local(api, "/local", root)
    return root


def signed(api: Api, path: str) -> str:
    return f"{quote(path)}?sign={api.services.signer.sign(path)}"


def assert_envelope(response: httpx.Response, status: int, message: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message", "data"}
    assert body["code"] == status
    assert body["message"] == message


# --- the sign itself -----------------------------------------------------------


def test_sign_vector() -> None:
    assert sign_path("alist-test-token", "/local/a.txt", 0) == (
        "kqx65Wp34VrwlZp950yRx6FKqwfajIjd7QNafmE5hcs=:0"
    )


@pytest.mark.parametrize(
    ("sign", "message"),
    [
        ("", "expire missing"),
        ("abc", "expire invalid"),
        ("abc:", "expire missing"),
        ("abc:soon", "expire invalid"),
        ("abc:0", "sign invalid"),
        ("kqx65Wp34VrwlZp950yRx6FKqwfajIjd7QNafmE5hcs=:1", "sign expired"),
    ],
)
def test_verify_rejections(sign: str, message: str) -> None:
    with pytest.raises(Unauthorized) as caught:
        verify_sign("alist-test-token", "/local/a.txt", sign, now=1_000_000)
    assert caught.value.message == message


def test_verify_accepts_the_vector_and_rejects_other_paths() -> None:
    good = "kqx65Wp34VrwlZp950yRx6FKqwfajIjd7QNafmE5hcs=:0"
    verify_sign("alist-test-token", "/local/a.txt", good, now=int(time.time()))
    with pytest.raises(Unauthorized):
        verify_sign("alist-test-token", "/local/b.txt", good, now=int(time.time()))
    with pytest.raises(Unauthorized):
        verify_sign("other-token", "/local/a.txt", good, now=int(time.time()))


def test_future_expiry_verifies() -> None:
    later = int(time.time()) + 3600
    sign = sign_path("k", "/x", later)
    assert sign.endswith(f":{later}")
    verify_sign("k", "/x", sign, now=int(time.time()))


# --- the sign check on /d and /p -----------------------------------------------


@pytest.mark.parametrize("prefix", ["/d", "/p"])
async def test_missing_sign(api: Api, served: Path, prefix: str) -> None:
    response = await api.client.get(f"{prefix}/local/a.txt")
    assert_envelope(response, 401, "expire missing")


@pytest.mark.parametrize("prefix", ["/d", "/p"])
async def test_bad_sign(api: Api, served: Path, prefix: str) -> None:
    other = api.services.signer.sign("/local/data.bin")
    response = await api.client.get(f"{prefix}/local/a.txt", params={"sign": other})
    assert_envelope(response, 401, "sign invalid")
    response = await api.client.get(f"{prefix}/local/a.txt", params={"sign": "junk:0"})
    assert_envelope(response, 401, "sign invalid")


async def test_expired_sign(api: Api, served: Path) -> None:
    token = api.services.settings.get("token")
    old = sign_path(token, "/local/a.txt", int(time.time()) - 10)
    response = await api.client.get("/d/local/a.txt", params={"sign": old})
    assert_envelope(response, 401, "sign expired")


async def test_reset_token_invalidates_signs(api: Api, served: Path) -> None:
    url = "/d/" + signed(api, "/local/a.txt").lstrip("/")
    assert (await api.client.get(url)).status_code == 200
    admin = await api.login()
    assert (await api.post("/api/admin/setting/reset_token", token=admin))["code"] == 200
    assert_envelope(await api.client.get(url), 401, "sign invalid")


async def test_trailing_slash_on_sign_is_tolerated(api: Api, served: Path) -> None:
    sign = api.services.signer.sign("/local/a.txt")
    response = await api.client.get("/d/local/a.txt", params={"sign": sign + "/"})
    assert response.status_code == 200
    assert response.content == b"alpha text"


# --- serving -------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["/d", "/p"])
async def test_correct_sign_serves_exact_bytes(api: Api, served: Path, prefix: str) -> None:
    response = await api.client.get(prefix + signed(api, "/local/data.bin"))
    assert response.status_code == 200
    assert response.content == CONTENT
    assert response.headers["content-length"] == str(len(CONTENT))
    assert response.headers["content-disposition"].startswith("attachment;")
    assert 'filename="data.bin"' in response.headers["content-disposition"]
    assert response.headers["accept-ranges"] == "bytes"


async def test_content_type_from_extension(api: Api, served: Path) -> None:
    response = await api.client.get("/d" + signed(api, "/local/a.txt"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.content == b"alpha text"


async def test_unicode_name_disposition(api: Api, served: Path) -> None:
    path = f"/local/{UNICODE_NAME}"
    response = await api.client.get("/d" + signed(api, path))
    assert response.status_code == 200
    assert response.content == b"unicode!"
    disposition = response.headers["content-disposition"]
    assert f"filename*=UTF-8''{quote(UNICODE_NAME, safe='')}" in disposition
    disposition.encode("ascii")  # the header itself stays ASCII


async def test_head(api: Api, served: Path) -> None:
    response = await api.client.head("/d" + signed(api, "/local/data.bin"))
    assert response.status_code == 200
    assert response.content == b""
    assert response.headers["content-length"] == str(len(CONTENT))
    no_sign = await api.client.head("/d/local/data.bin")
    assert no_sign.status_code == 401


async def test_single_range(api: Api, served: Path) -> None:
    url = "/d" + signed(api, "/local/data.bin")
    response = await api.client.get(url, headers={"Range": "bytes=10-19"})
    assert response.status_code == 206
    assert response.content == CONTENT[10:20]
    assert response.headers["content-range"] == f"bytes 10-19/{len(CONTENT)}"
    open_ended = await api.client.get(url, headers={"Range": "bytes=1000-"})
    assert open_ended.status_code == 206
    assert open_ended.content == CONTENT[1000:]


async def test_suffix_range(api: Api, served: Path) -> None:
    url = "/d" + signed(api, "/local/data.bin")
    response = await api.client.get(url, headers={"Range": "bytes=-5"})
    assert response.status_code == 206
    assert response.content == CONTENT[-5:]
    assert response.headers["content-range"] == f"bytes 1019-1023/{len(CONTENT)}"


async def test_multiple_ranges(api: Api, served: Path) -> None:
    url = "/d" + signed(api, "/local/data.bin")
    response = await api.client.get(url, headers={"Range": "bytes=0-3,100-103"})
    assert response.status_code == 206
    assert response.headers["content-type"].startswith("multipart/byteranges")
    assert CONTENT[0:4] in response.content
    assert CONTENT[100:104] in response.content
    assert f"bytes 0-3/{len(CONTENT)}".encode() in response.content
    assert f"bytes 100-103/{len(CONTENT)}".encode() in response.content


async def test_unsatisfiable_range(api: Api, served: Path) -> None:
    url = "/d" + signed(api, "/local/data.bin")
    response = await api.client.get(url, headers={"Range": "bytes=5000-6000"})
    assert response.status_code == 416
    assert response.headers["content-range"] == f"bytes */{len(CONTENT)}"


async def test_missing_file_with_valid_sign(api: Api, served: Path) -> None:
    for path in ("/local/nope.txt", "/local/sub/nope.txt", "/elsewhere/x.txt"):
        response = await api.client.get("/d" + signed(api, path))
        assert response.status_code == 404, (path, response.text)
        body = response.json()
        assert set(body) == {"code", "message", "data"}
        assert body["code"] in (404, 500)


async def test_folder_is_not_downloadable(api: Api, served: Path) -> None:
    response = await api.client.get("/d" + signed(api, "/local/sub"))
    assert response.status_code >= 400
    assert set(response.json()) == {"code", "message", "data"}


async def test_sign_all_off_allows_unsigned_downloads(api: Api, served: Path) -> None:
    await save_settings(api, sign_all="false")
    response = await api.client.get("/d/local/a.txt")
    assert response.status_code == 200
    assert response.content == b"alpha text"
    # Listings then carry no signs...
    admin = await api.login()
    listing = await api.post("/api/fs/list", {"path": "/local"}, token=admin)
    assert all(o["sign"] == "" for o in listing["data"]["content"])
    got = await api.post("/api/fs/get", {"path": "/local/a.txt"}, token=admin)
    assert "sign=" not in got["data"]["raw_url"]
    assert (await api.client.get(got["data"]["raw_url"])).content == b"alpha text"


async def test_password_meta_still_needs_a_sign(api: Api, served: Path) -> None:
    await save_settings(api, sign_all="false")
    await add_meta(api, "/local", password="pw", p_sub=True)
    assert_envelope(await api.client.get("/d/local/a.txt"), 401, "expire missing")
    response = await api.client.get("/d" + signed(api, "/local/a.txt"))
    assert response.status_code == 200
    admin = await api.login()
    listing = await api.post("/api/fs/list", {"path": "/local"}, token=admin)
    files = [o for o in listing["data"]["content"] if not o["is_dir"]]
    assert files and all(o["sign"] for o in files)


async def test_storage_enable_sign_needs_a_sign(api: Api, tmp_path: Path) -> None:
    await save_settings(api, sign_all="false")
    root = make_tree(tmp_path / "signed", {"s.txt": "signed only"})
    await mount_local(api, "/signed", root, enable_sign=True)
    assert_envelope(await api.client.get("/d/signed/s.txt"), 401, "expire missing")
    response = await api.client.get("/d" + signed(api, "/signed/s.txt"))
    assert response.content == b"signed only"


async def test_link_expiration_setting(api: Api, served: Path) -> None:
    await save_settings(api, link_expiration="2")
    sign = api.services.signer.sign("/local/a.txt")
    expire = int(sign.rsplit(":", 1)[1])
    assert abs(expire - (int(time.time()) + 7200)) < 60
    response = await api.client.get("/d/local/a.txt", params={"sign": sign})
    assert response.status_code == 200


# --- conditional requests and ranges on local files -----------------------------

BIG = bytes(range(256)) * (4096 * 9) + b"tail"  # 9 MiB + 4 bytes: several send windows


@pytest.fixture
async def big(api: Api, served: Path) -> str:
    (served / "big.bin").write_bytes(BIG)
    return "/d" + signed(api, "/local/big.bin")


async def test_etag_and_last_modified_as_alist(api: Api, served: Path) -> None:
    response = await api.client.get("/d" + signed(api, "/local/data.bin"))
    st = (served / "data.bin").stat()
    assert response.headers["etag"] == f'"{int(st.st_mtime):x}-{st.st_size:x}"'
    assert response.headers["last-modified"].endswith(" GMT")


async def test_if_none_match_and_if_modified_since_answer_304(api: Api, served: Path) -> None:
    url = "/d" + signed(api, "/local/data.bin")
    first = await api.client.get(url)
    tag, modified = first.headers["etag"], first.headers["last-modified"]
    for headers in ({"If-None-Match": tag}, {"If-None-Match": f"W/{tag}"}, {"If-None-Match": "*"},
                    {"If-Modified-Since": modified}):  # fmt: skip
        response = await api.client.get(url, headers=headers)
        assert (response.status_code, response.content) == (304, b""), headers
        assert response.headers["etag"] == tag
    changed = await api.client.get(url, headers={"If-None-Match": '"other"'})
    assert (changed.status_code, changed.content) == (200, CONTENT)


async def test_if_match_and_if_unmodified_since_answer_412(api: Api, served: Path) -> None:
    url = "/d" + signed(api, "/local/data.bin")
    tag = (await api.client.head(url)).headers["etag"]
    assert (await api.client.get(url, headers={"If-Match": '"other"'})).status_code == 412
    assert (await api.client.get(url, headers={"If-Match": tag})).status_code == 200
    old = "Mon, 01 Jan 2001 00:00:00 GMT"
    assert (await api.client.get(url, headers={"If-Unmodified-Since": old})).status_code == 412


async def test_if_range_keeps_the_range_only_for_the_same_file(api: Api, served: Path) -> None:
    url = "/d" + signed(api, "/local/data.bin")
    first = await api.client.head(url)
    same = {"Range": "bytes=0-9", "If-Range": first.headers["etag"]}
    response = await api.client.get(url, headers=same)
    assert (response.status_code, response.content) == (206, CONTENT[:10])
    by_date = {"Range": "bytes=0-9", "If-Range": first.headers["last-modified"]}
    assert (await api.client.get(url, headers=by_date)).status_code == 206
    for stale in ('"0-0"', "Mon, 01 Jan 2001 00:00:00 GMT"):
        response = await api.client.get(url, headers={"Range": "bytes=0-9", "If-Range": stale})
        assert (response.status_code, response.content) == (200, CONTENT)


@pytest.mark.parametrize("header", ["bytes=9-3", "bytes=a-b", "items=0-1", "bytes=0"])
async def test_malformed_range_is_416_without_content_range(
    api: Api, served: Path, header: str
) -> None:
    response = await api.client.get(
        "/d" + signed(api, "/local/data.bin"), headers={"Range": header}
    )
    assert response.status_code == 416
    assert "content-range" not in response.headers


@pytest.mark.parametrize(
    "header",
    [
        b"bytes=0-\xb2",
        b"bytes=\xb9-",
        b"bytes=-\xb3",
        b"bytes=0-" + b"9" * 5000,
        b"bytes=0-" + b"9" * 20,
    ],
)
async def test_range_numbers_go_cannot_read_are_416_not_a_crash(
    api: Api, served: Path, header: bytes
) -> None:
    # A Latin-1 superscript digit passes str.isdigit() but not int(); thousands of digits
    # pass both but int() refuses them; Go's ParseInt refuses anything past int64.
    response = await api.client.get(
        "/d" + signed(api, "/local/data.bin"), headers={"Range": header}
    )
    assert response.status_code == 416, response.text


async def test_range_numbers_with_many_leading_zeros_are_read_as_go_reads_them(
    api: Api, served: Path
) -> None:
    header = "bytes=" + "0" * 5000 + "10-" + "0" * 5000 + "19"
    response = await api.client.get(
        "/d" + signed(api, "/local/data.bin"), headers={"Range": header}
    )
    assert (response.status_code, response.content) == (206, CONTENT[10:20])


async def test_ranges_larger_than_the_file_are_ignored(api: Api, served: Path) -> None:
    headers = {"Range": "bytes=0-1023,0-1023"}
    response = await api.client.get("/d" + signed(api, "/local/data.bin"), headers=headers)
    assert (response.status_code, response.content) == (200, CONTENT)


@pytest.mark.parametrize(
    ("header", "start", "stop"),
    [
        (None, 0, len(BIG)),
        ("bytes=1-", 1, len(BIG)),
        ("bytes=4194300-8388620", 4194300, 8388621),
        ("bytes=-5000000", len(BIG) - 5000000, len(BIG)),
        ("bytes=65537-1048577", 65537, 1048578),
    ],
)
async def test_large_file_bytes_are_exact(
    api: Api, big: str, header: str | None, start: int, stop: int
) -> None:
    response = await api.client.get(big, headers={"Range": header} if header else {})
    assert response.status_code == (200 if header is None else 206)
    assert response.headers["content-length"] == str(stop - start)
    assert response.content == BIG[start:stop]


async def test_head_with_range_sends_headers_only(api: Api, big: str) -> None:
    response = await api.client.head(big, headers={"Range": "bytes=100-199"})
    assert (response.status_code, response.content) == (206, b"")
    assert response.headers["content-range"] == f"bytes 100-199/{len(BIG)}"
    assert response.headers["content-length"] == "100"


async def test_multipart_ranges_are_well_formed(api: Api, big: str) -> None:
    response = await api.client.get(big, headers={"Range": "bytes=0-3, 5000000-5000009"})
    assert response.status_code == 206
    boundary = response.headers["content-type"].split("boundary=")[1]
    assert response.headers["content-length"] == str(len(response.content))
    expected = (
        (
            f"--{boundary}\r\nContent-Range: bytes 0-3/{len(BIG)}\r\n"
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + BIG[0:4]
        + (
            f"\r\n--{boundary}\r\nContent-Range: bytes 5000000-5000009/{len(BIG)}\r\n"
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + BIG[5000000:5000010]
        + f"\r\n--{boundary}--\r\n".encode()
    )
    assert response.content == expected


async def test_thumbnail_through_d(api: Api, tmp_path: Path) -> None:
    root = tmp_path / "pics"
    root.mkdir()
    Image.new("RGB", (288, 144), (0, 90, 200)).save(root / "pic.jpg", format="JPEG")
    addition = json.dumps({"root_folder_path": str(root), "thumbnail": True})
    await mount_local(api, "/pics", root, addition=addition)
    response = await api.client.get(f"/d{signed(api, '/pics/pic.jpg')}&type=thumb")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    with Image.open(io.BytesIO(response.content)) as thumb:
        assert (thumb.format, thumb.size) == ("PNG", (144, 72))
    plain = await api.client.get("/d" + signed(api, "/pics/pic.jpg"))
    assert plain.content == (root / "pic.jpg").read_bytes()


async def test_a_thumbnail_that_fails_does_not_show_the_host_path(api: Api, tmp_path: Path) -> None:
    # Anyone holding a sign (every guest, under sign_all) may ask for a thumbnail.
    root = tmp_path / "pics"
    root.mkdir()
    (root / "fake.png").write_text("not a picture")
    (root / "notes.txt").write_text("not a picture either")
    (root / "clip.mp4").write_text("not a video")
    addition = json.dumps({"root_folder_path": str(root), "thumbnail": True})
    await mount_local(api, "/pics", root, addition=addition)
    for name in ("fake.png", "notes.txt"):
        response = await api.client.get(f"/d{signed(api, '/pics/' + name)}&type=thumb")
        assert response.status_code == 500
        assert str(tmp_path) not in response.text
        assert response.json()["message"].startswith("failed get thumb: ")
    video = await api.client.get(f"/d{signed(api, '/pics/clip.mp4')}&type=thumb")
    assert video.status_code >= 400
    assert str(tmp_path) not in video.text


# --- drivers that link to URLs: /d redirects, /p relays ----------------------------

UPSTREAM_FILES = {"movie.bin": bytes(range(256)) * 512, "notes.txt": b"remote text",
                  "list.m3u8": b"#EXTM3U\n", "gated.bin": b"G" * 200_000,
                  "moved-notes.txt": b"(the server redirects this one)"}  # fmt: skip


class HttpFileServer:
    """A small real HTTP/1.1 server on loopback: files with single ranges, ``moved-<name>``
    redirecting to ``<name>``, and ``gated.bin`` whose second half waits for ``release``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.failing: dict[str, int] = {}  # name -> the error status it answers
        self.release = asyncio.Event()
        self.port = 0
        self.scheme = "http"
        self._server: asyncio.Server | None = None

    async def start(self, tls: ssl.SSLContext | None = None) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        self.port = self._server.sockets[0].getsockname()[1]
        self.scheme = "https" if tls is not None else "http"

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, target, _ = (await reader.readline()).decode().split(" ", 2)
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            self.requests.append((method, target, headers))
            await self._answer(writer, method, target, headers)
        finally:
            writer.close()

    async def _answer(
        self, writer: asyncio.StreamWriter, method: str, target: str, headers: dict[str, str]
    ) -> None:
        name = target.split("?")[0].removeprefix("/files/")
        if name.startswith("moved-"):
            writer.write(f"HTTP/1.1 302 Found\r\nLocation: /files/{name[6:]}\r\n"
                         "Content-Length: 0\r\nConnection: close\r\n\r\n".encode())  # fmt: skip
            return
        status = self.failing.get(name, 200 if name in UPSTREAM_FILES else 404)
        if status != 200:
            writer.write(
                f"HTTP/1.1 {status} Failed\r\nContent-Length: 4\r\nConnection: close\r\n\r\n"
                "nope".encode()
            )
            return
        data, status, extra = UPSTREAM_FILES[name], "200 OK", ""
        if "range" in headers:
            first, _, last = headers["range"].removeprefix("bytes=").partition("-")
            stop = int(last) + 1 if last else len(data)
            extra = f"Content-Range: bytes {first}-{stop - 1}/{len(data)}\r\n"
            data, status = data[int(first) : stop], "206 Partial Content"
        head = (f"HTTP/1.1 {status}\r\nContent-Type: application/x-test\r\nContent-Length: "
                f"{len(data)}\r\n{extra}Accept-Ranges: bytes\r\nX-Upstream: yes\r\n"
                "Set-Cookie: upstream=secret\r\nConnection: close\r\n\r\n")  # fmt: skip
        writer.write(head.encode())
        if method == "HEAD":
            return
        if name == "gated.bin":
            writer.write(data[: len(data) // 2])
            await writer.drain()
            await self.release.wait()
            data = data[len(data) // 2 :]
        writer.write(data)
        await writer.drain()


class UrlOptions(BaseModel):
    base_url: str = option("")


class UrlDriver(InertDriver[UrlOptions]):
    """Test-only: files of the upstream server, each linked by URL with a header."""

    async def list(self, dir: Obj) -> list[Obj]:
        when = datetime(2024, 5, 1, tzinfo=UTC)
        return [Obj(name, len(data), False, when, path=f"/{name}")
                for name, data in UPSTREAM_FILES.items()]  # fmt: skip

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        headers = {"X-From-Link": "yes", "Referer": "https://link.test/"}
        return Link(url=f"{self.options.base_url}/files/{quote(file.name)}", headers=headers)


@pytest.fixture
async def upstream() -> AsyncIterator[HttpFileServer]:
    server = HttpFileServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
def url_driver(services: Services) -> None:
    # Each server has its own registry: this driver exists for this test's only.
    services.registry.register("UrlTest", UrlDriver, UrlOptions, DriverConfig(name="UrlTest"))


async def mount_url(api: Api, upstream: HttpFileServer, **fields: object) -> None:
    admin = await api.login()
    body = {"mount_path": "/url", "driver": "UrlTest",
            "addition": json.dumps({"base_url": upstream.base}), **fields}  # fmt: skip
    created = await api.post("/api/admin/storage/create", body, token=admin)
    assert created["code"] == 200, created


@pytest.fixture
async def remote(api: Api, upstream: HttpFileServer, url_driver: None) -> HttpFileServer:
    await mount_url(api, upstream)
    return upstream


async def test_d_redirects_to_the_url(api: Api, remote: HttpFileServer) -> None:
    response = await api.client.get("/d" + signed(api, "/url/movie.bin"))
    assert response.status_code == 302
    assert response.headers["location"] == f"{remote.base}/files/movie.bin"
    assert response.headers["cache-control"].startswith("max-age=0, no-cache")
    assert response.headers["referrer-policy"] == "no-referrer"
    assert remote.requests == []


async def test_forward_direct_link_params(api: Api, remote: HttpFileServer) -> None:
    await save_settings(api, forward_direct_link_params="true")
    response = await api.client.get("/d" + signed(api, "/url/movie.bin") + "&x=1&alist_ts=5")
    assert response.headers["location"] == f"{remote.base}/files/movie.bin?x=1"


async def test_p_is_refused_unless_proxying_is_allowed(api: Api, remote: HttpFileServer) -> None:
    assert_envelope(await api.client.get("/p" + signed(api, "/url/movie.bin")), 403,
                    "proxy not allowed")  # fmt: skip
    text = await api.client.get("/p" + signed(api, "/url/notes.txt"))
    assert (text.status_code, text.content) == (200, b"remote text")


async def test_p_relays_ranges_status_and_headers(api: Api, upstream: HttpFileServer,
                                                  url_driver: None) -> None:  # fmt: skip
    await mount_url(api, upstream, web_proxy=True)
    data = UPSTREAM_FILES["movie.bin"]
    headers = {"Range": "bytes=100-299", "Authorization": "secret-token", "X-Client": "c1"}
    response = await api.client.get("/p" + signed(api, "/url/movie.bin"), headers=headers)
    assert (response.status_code, response.content) == (206, data[100:300])
    assert response.headers["content-range"] == f"bytes 100-299/{len(data)}"
    assert response.headers["content-type"] == "application/x-test"
    assert response.headers["content-length"] == "200"
    assert "x-upstream" not in response.headers  # the back end's own, not passed on
    assert response.headers["content-disposition"].startswith('attachment; filename="movie.bin"')
    assert "set-cookie" not in response.headers
    method, target, sent = upstream.requests[-1]
    assert (method, target, sent["range"], sent["x-client"]) == (
        "GET", "/files/movie.bin", "bytes=100-299", "c1")  # fmt: skip
    assert "authorization" not in sent  # proxy_ignore_headers
    assert (sent["x-from-link"], sent["referer"]) == ("yes", "https://link.test/")
    assert sent["host"] == f"127.0.0.1:{upstream.port}"


async def test_web_proxy_makes_d_stream(api: Api, upstream: HttpFileServer,
                                        url_driver: None) -> None:  # fmt: skip
    await mount_url(api, upstream, web_proxy=True)
    response = await api.client.get("/d" + signed(api, "/url/movie.bin"))
    assert (response.status_code, response.content) == (200, UPSTREAM_FILES["movie.bin"])
    head = await api.client.head("/d" + signed(api, "/url/movie.bin"))
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len(UPSTREAM_FILES["movie.bin"]))
    assert upstream.requests[-1][0] == "HEAD"


async def test_proxy_types_make_d_stream(api: Api, remote: HttpFileServer) -> None:
    response = await api.client.get("/d" + signed(api, "/url/list.m3u8"))
    assert (response.status_code, response.content) == (200, b"#EXTM3U\n")


async def test_use_proxy_url_policy_allows_p(api: Api, upstream: HttpFileServer,
                                             url_driver: None) -> None:  # fmt: skip
    await mount_url(api, upstream, webdav_policy="use_proxy_url")
    response = await api.client.get("/p" + signed(api, "/url/movie.bin"))
    assert response.content == UPSTREAM_FILES["movie.bin"]
    assert (await api.client.get("/d" + signed(api, "/url/movie.bin"))).status_code == 302


async def test_down_proxy_url_redirects_p_unless_d_is_given(
    api: Api, upstream: HttpFileServer, url_driver: None
) -> None:
    await mount_url(api, upstream, web_proxy=True,
                    down_proxy_url="https://edge.test/dl\nhttps://second.test")  # fmt: skip
    url = "/p" + signed(api, "/url/movie.bin")
    response = await api.client.get(url)
    assert response.status_code == 302
    sign = api.services.signer.sign("/url/movie.bin")
    assert response.headers["location"] == f"https://edge.test/dl/url/movie.bin?sign={sign}"
    relayed = await api.client.get(url + "&d")
    assert relayed.content == UPSTREAM_FILES["movie.bin"]


async def test_upstream_redirect_is_followed(api: Api, remote: HttpFileServer) -> None:
    response = await api.client.get("/p" + signed(api, "/url/moved-notes.txt"))
    assert (response.status_code, response.content) == (200, b"remote text")
    assert [target for _, target, _ in remote.requests] == [
        "/files/moved-notes.txt", "/files/notes.txt"]  # fmt: skip


async def test_upstream_failures_answer_errors(api: Api, upstream: HttpFileServer,
                                               url_driver: None) -> None:  # fmt: skip
    await mount_url(api, upstream, web_proxy=True)
    storage = api.services.storages.resolve("/url")
    assert storage is not None and storage.target.ops is not None
    driver = storage.target.ops.driver
    assert isinstance(driver, UrlDriver)
    driver.options = UrlOptions(base_url=f"{upstream.base}/nowhere")
    missing = await api.client.get("/p" + signed(api, "/url/movie.bin"))
    assert missing.status_code == 404  # the upstream's status; AList's code 500 inside
    assert missing.json() == {"code": 500, "message": "http request failure, status: 404",
                              "data": None}  # fmt: skip
    await upstream.stop()
    await upstream.start()  # a fresh port: nothing listens on the old one any more
    down = await api.client.get("/p" + signed(api, "/url/movie.bin"))
    assert down.status_code == 500
    assert down.json()["message"].startswith("failed to proxy: ConnectError")


async def test_relay_streams_before_the_upstream_finishes(
    api: Api, upstream: HttpFileServer, url_driver: None
) -> None:
    await mount_url(api, upstream, web_proxy=True)
    app = create_app(api.services.config, api.services)
    path = "/p/url/gated.bin"
    received: list[bytes] = []
    finished = asyncio.Event()

    async def receive() -> dict[str, object]:
        if not received:
            return {"type": "http.request", "body": b"", "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.body":
            received.append(bytes(message.get("body", b"")))  # type: ignore[arg-type]
            # The upstream holds back its second half until a first part came through:
            # a relay that waited for the whole body would never get it.
            upstream.release.set()
            finished.set() if not message.get("more_body") else None

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
             "http_version": "1.1", "method": "GET", "scheme": "http", "path": path,
             "raw_path": path.encode(), "root_path": "", "headers": [(b"host", b"m.test")],
             "query_string": f"sign={api.services.signer.sign('/url/gated.bin')}".encode(),
             "client": ("127.0.0.1", 5000), "server": ("m.test", 80)}  # fmt: skip
    await asyncio.wait_for(app(scope, receive, send), 30)  # type: ignore[arg-type]
    assert b"".join(received) == UPSTREAM_FILES["gated.bin"]


@pytest.mark.parametrize(("name", "error"), [("absent.bin", ObjectNotFound), ("sub", NotAFile)])
async def test_unreadable_file_fails_before_the_response(
    served: Path, name: str, error: type[ManifoldError]
) -> None:
    with pytest.raises(error):
        await LocalFileResponse.open(str(served / name), name, {})


async def test_proxy_range_serves_ranges_by_ranged_reads(
    api: Api, upstream: HttpFileServer, services: Services
) -> None:
    config = DriverConfig(name="UrlRanged", proxy_range_option=True)
    services.registry.register("UrlRanged", UrlDriver, UrlOptions, config)
    admin = await api.login()
    body = {"mount_path": "/ranged", "driver": "UrlRanged", "web_proxy": True,
            "proxy_range": True, "addition": json.dumps({"base_url": upstream.base})}  # fmt: skip
    assert (await api.post("/api/admin/storage/create", body, token=admin))["code"] == 200
    data = UPSTREAM_FILES["movie.bin"]
    headers = {"Range": "bytes=100-299", "X-Client": "c1"}
    response = await api.client.get("/p" + signed(api, "/ranged/movie.bin"), headers=headers)
    assert (response.status_code, response.content) == (206, data[100:300])
    assert response.headers["content-range"] == f"bytes 100-299/{len(data)}"
    assert "x-upstream" not in response.headers  # this server's answer, not the upstream's
    method, target, sent = upstream.requests[-1]
    assert (method, target, sent["range"]) == ("GET", "/files/movie.bin", "bytes=100-299")
    assert "x-client" not in sent
    assert (sent["x-from-link"], sent["referer"]) == ("yes", "https://link.test/")


@pytest.mark.parametrize(
    ("status", "answer", "message"),
    [(404, 404, "object not found"), (410, 404, "object not found"),
     (500, 500, "fetching the source failed: HTTP 500"),
     (503, 500, "fetching the source failed: HTTP 503")],
)  # fmt: skip
async def test_proxy_range_answers_a_gone_url_as_a_missing_file(
    api: Api, upstream: HttpFileServer, services: Services, status: int, answer: int, message: str
) -> None:
    config = DriverConfig(name="UrlRanged", proxy_range_option=True)
    services.registry.register("UrlRanged", UrlDriver, UrlOptions, config)
    admin = await api.login()
    body = {"mount_path": "/ranged", "driver": "UrlRanged", "web_proxy": True,
            "proxy_range": True, "addition": json.dumps({"base_url": upstream.base})}  # fmt: skip
    assert (await api.post("/api/admin/storage/create", body, token=admin))["code"] == 200
    upstream.failing["movie.bin"] = status
    for headers in ({}, {"Range": "bytes=10-19"}):
        response = await api.client.get("/p" + signed(api, "/ranged/movie.bin"), headers=headers)
        assert response.status_code == answer, response.text
        assert response.json() == {"code": 500, "message": message, "data": None}
    upstream.failing.clear()
    whole = await api.client.get("/p" + signed(api, "/ranged/movie.bin"))
    assert (whole.status_code, whole.content) == (200, UPSTREAM_FILES["movie.bin"])


class TlsUrlOptions(BaseModel):
    base_url: str = option("")
    skip_verify: bool = option(False)


class TlsUrlDriver(InertDriver[TlsUrlOptions]):
    """Test-only: the upstream's files, linked by URL; unchecked when its option says."""

    async def list(self, dir: Obj) -> list[Obj]:
        when = datetime(2024, 5, 1, tzinfo=UTC)
        return [Obj(name, len(data), False, when, path=f"/{name}")
                for name, data in UPSTREAM_FILES.items()]  # fmt: skip

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        url = f"{self.options.base_url}/files/{quote(file.name)}"
        return Link(url=url, verify=not self.options.skip_verify)


@pytest.fixture
async def tls_upstream(tmp_path: Path) -> AsyncIterator[HttpFileServer]:
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = HttpFileServer()
    await server.start(tls=context)
    yield server
    await server.stop()


@pytest.mark.parametrize("proxy_range", [False, True], ids=["relayed", "ranged"])
async def test_p_skips_certificate_checks_only_for_a_storage_that_turned_them_off(
    api: Api, tls_upstream: HttpFileServer, services: Services, proxy_range: bool
) -> None:
    config = DriverConfig(name="TlsUrl", proxy_range_option=True)
    services.registry.register("TlsUrl", TlsUrlDriver, TlsUrlOptions, config)
    admin = await api.login()
    for skip in (False, True):
        addition = {"base_url": tls_upstream.base, "skip_verify": skip}
        body = {"mount_path": f"/tls-{skip}", "driver": "TlsUrl", "web_proxy": True,
                "proxy_range": proxy_range, "addition": json.dumps(addition)}  # fmt: skip
        assert (await api.post("/api/admin/storage/create", body, token=admin))["code"] == 200
    data = UPSTREAM_FILES["movie.bin"]
    checked = await api.client.get("/p" + signed(api, "/tls-False/movie.bin"))
    assert checked.status_code == 500
    assert "CERTIFICATE_VERIFY_FAILED" in checked.json()["message"]
    assert not any(target == "/files/movie.bin" for _, target, _ in tls_upstream.requests)
    unchecked = await api.client.get("/p" + signed(api, "/tls-True/movie.bin"))
    assert (unchecked.status_code, unchecked.content) == (200, data)
    ranged = await api.client.get(
        "/p" + signed(api, "/tls-True/movie.bin"), headers={"Range": "bytes=5-9"}
    )
    assert (ranged.status_code, ranged.content) == (206, data[5:10])


async def test_an_alias_fetches_a_proxied_url_in_parts(api: Api, remote: HttpFileServer) -> None:
    admin = await api.login()
    addition = {"paths": "/url", "download_concurrency": 3, "download_part_size": 1}
    body = {"mount_path": "/parts", "driver": "Alias", "web_proxy": True,
            "addition": json.dumps(addition)}  # fmt: skip
    assert (await api.post("/api/admin/storage/create", body, token=admin))["code"] == 200
    data = UPSTREAM_FILES["movie.bin"]
    response = await api.client.get("/p" + signed(api, "/parts/movie.bin"))
    assert (response.status_code, response.content) == (200, data)
    ranges = [sent["range"] for _, target, sent in remote.requests if "range" in sent]
    assert len(ranges) == -(-len(data) // 1024)  # one request a 1 KiB part
    assert ranges[0] == "bytes=0-1023"
    ranged = await api.client.get(
        "/p" + signed(api, "/parts/movie.bin"), headers={"Range": "bytes=1500-2600"}
    )
    assert (ranged.status_code, ranged.content) == (206, data[1500:2601])
