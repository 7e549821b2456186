"""Downloads through /d/ and /p/: sign checks, headers, ranges and error envelopes."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from manifold.errors import Unauthorized
from manifold.services.sign import sign_path, verify_sign
from tests.api.fs_helpers import add_meta, make_tree, mount_local, save_settings
from tests.conftest import Api

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
