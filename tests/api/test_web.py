"""The web interface: the frontend's files served with its config written in, the page
for every unmatched address outside the API, and the site's small fixed addresses."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.container import Services
from tests.conftest import Api, open_api

# The parts of the frontend's index.html that Manifold fills in, as the package has them.
INDEX = """<!doctype html><html><head>
<!-- customize head -->
<link href="/manifest.json" rel="manifest" >
<link rel="apple-touch-icon" href="https://res.oplist.org/logo/logo.png" >
<link rel="shortcut icon" type="image/ico" href="https://res.oplist.org/logo/logo.svg">
<title>Loading...</title>
<script>
  window.OPENLIST_CONFIG = {
    cdn: undefined,
    base_path: undefined,
    api: undefined,
    main_color: undefined,
  }
</script></head><body><div id="root"></div>
<!-- customize body -->
</body></html>"""


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    folder = tmp_path / "dist"
    (folder / "assets").mkdir(parents=True)
    (folder / "index.html").write_text(INDEX)
    (folder / "assets" / "index-abc123.js").write_text("console.log(1)")
    (folder / "secret.txt").write_text("not an asset")
    return folder


@pytest.fixture
async def web(services: Services, dist: Path) -> AsyncIterator[Api]:
    services.config.dist_dir = str(dist)
    async with open_api(services) as api:
        yield api


@pytest.fixture
async def under_path(services: Services, dist: Path) -> AsyncIterator[Api]:
    services.config.dist_dir = str(dist)
    services.config.site_url = "https://files.example.com/drive/"
    async with open_api(services) as api:
        yield api


async def test_root_is_the_page_with_its_config(web: Api) -> None:
    response = await web.client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert 'cdn: ""' in page
    assert 'base_path: "/"' in page
    assert 'main_color: "#1890ff"' in page
    assert "<title>Manifold</title>" in page
    assert "res.oplist.org" not in page


@pytest.mark.parametrize("path", ["/local/folder/a.txt", "/@manage/storages", "/@login", "/x.md"])
async def test_every_page_address_answers_the_page(web: Api, path: str) -> None:
    response = await web.client.get(path)
    assert response.status_code == 200
    assert "window.OPENLIST_CONFIG" in response.text


@pytest.mark.parametrize("path", ["/api/nothing", "/api/fs/nothing"])
async def test_api_addresses_never_answer_the_page(web: Api, path: str) -> None:
    response = await web.client.get(path)
    assert response.json() == {"code": 404, "message": "not found", "data": None}


async def test_download_addresses_never_answer_the_page(web: Api) -> None:
    response = await web.client.get("/d/nothing/here.txt")
    assert "OPENLIST_CONFIG" not in response.text


async def test_other_methods_are_not_the_page(web: Api) -> None:
    response = await web.client.delete("/some/page")
    assert "OPENLIST_CONFIG" not in response.text


async def test_settings_are_written_in_and_follow_changes(web: Api) -> None:
    changes = [
        {"key": "site_title", "value": "Team <Files>"},
        {"key": "main_color", "value": '#123456"</script>'},
        {"key": "customize_head", "value": "<meta name=custom-head>"},
        {"key": "customize_body", "value": "<p id=custom-body></p>"},
        {"key": "favicon", "value": "https://img.example/fav.ico"},
    ]
    saved = await web.post("/api/admin/setting/save", changes, token=await web.login())
    assert saved["code"] == 200
    page = (await web.client.get("/")).text
    assert "<title>Team &lt;Files&gt;</title>" in page
    assert 'main_color: "#123456\\"\\u003c/script\\u003e"' in page
    assert "<meta name=custom-head>" in page
    assert "<p id=custom-body></p>" in page
    assert 'href="https://img.example/fav.ico"' in page
    # The manage pages never carry the custom head and body.
    manage = (await web.client.get("/@manage/settings/site")).text
    assert "<title>Team &lt;Files&gt;</title>" in manage
    assert "custom-head" not in manage
    assert "custom-body" not in manage


async def test_assets_are_cached_long(web: Api) -> None:
    response = await web.client.get("/assets/index-abc123.js")
    assert response.status_code == 200
    assert response.text == "console.log(1)"
    assert response.headers["cache-control"] == "public, max-age=15552000"
    assert (await web.client.get("/")).headers["cache-control"] == "no-cache"


async def test_language_packs_get_manifolds_form_texts_where_they_have_none(
    web: Api, dist: Path
) -> None:
    pack = 'var t={drivers:{SFTP:{address:`Address`,"address-tips":`AList text`}}};'
    (dist / "assets" / "entry-abc123.js").write_text(pack + "export{t as dict};")
    legacy = "System.register([],function(ee){return{execute:function(){var Ve={},Za={};"
    (dist / "assets" / "entry-legacy-abc123.js").write_text(
        legacy + "ee(`dict`,{drivers:Ve,storages:Za})}}});"
    )
    response = await web.client.get("/assets/entry-abc123.js")
    assert response.headers["cache-control"] == "no-cache"
    body = response.text
    assert body.startswith(pack) and body.endswith("export{t as dict};")
    assert '"host_key_fingerprint-tips": "The server\'s host key fingerprint' in body
    assert '"tls_insecure_skip_verify-tips": "Unsafe: ' in body
    old = (await web.client.get("/assets/entry-legacy-abc123.js")).text
    assert old.startswith(legacy) and "ee(`dict`,(function(d){" in old
    assert '"TLS insecure skip verify"' in old


@pytest.mark.parametrize(
    "path", ["/assets/../secret.txt", "/assets/%2e%2e/secret.txt", "/assets/..%2fsecret.txt"]
)
async def test_assets_never_leave_their_folder(web: Api, path: str) -> None:
    response = await web.client.get(path)
    assert "not an asset" not in response.text


async def test_no_ui_serves_only_the_api(services: Services, dist: Path) -> None:
    services.config.dist_dir = str(dist)
    services.config.ui = False
    async with open_api(services) as api:
        response = await api.client.get("/")
        assert response.status_code == 404
        assert "OPENLIST_CONFIG" not in response.text
        assert (await api.client.get("/assets/index-abc123.js")).status_code == 404
        assert (await api.get("/api/public/settings"))["code"] == 200


async def test_missing_frontend_says_how_to_install_it(services: Services, tmp_path: Path) -> None:
    services.config.dist_dir = str(tmp_path / "nowhere")
    async with open_api(services) as api:
        response = await api.client.get("/")
        assert response.status_code == 200
        assert "not installed" in response.text


async def test_site_under_a_path(under_path: Api) -> None:
    page = (await under_path.client.get("/drive/")).text
    assert 'cdn: "/drive"' in page
    assert 'base_path: "/drive"' in page
    assert 'href="/drive/manifest.json"' in page
    assert (await under_path.client.get("/drive/@manage")).status_code == 200
    settings = (await under_path.client.get("/drive/api/public/settings")).json()
    assert settings["code"] == 200
    asset = await under_path.client.get("/drive/assets/index-abc123.js")
    assert asset.text == "console.log(1)"
    moved = await under_path.client.get("/")
    assert (moved.status_code, moved.headers["location"]) == (302, "/drive")
    assert (await under_path.client.get("/api/public/settings")).status_code == 404
    manifest = (await under_path.client.get("/drive/manifest.json")).json()
    assert (manifest["scope"], manifest["start_url"]) == ("/drive", "/drive")


async def test_favicon_and_robots_come_from_settings(web: Api) -> None:
    token = await web.login()
    changes = [
        {"key": "favicon", "value": "https://img.example/f.ico"},
        {"key": "robots_txt", "value": "User-agent: *\nDisallow: /"},
    ]
    await web.post("/api/admin/setting/save", changes, token=token)
    favicon = await web.client.get("/favicon.ico")
    assert (favicon.status_code, favicon.headers["location"]) == (302, "https://img.example/f.ico")
    robots = await web.client.get("/robots.txt")
    assert robots.text == "User-agent: *\nDisallow: /"


def _link(url: str, name: str) -> str:
    from urllib.parse import quote

    raw = f"{quote(url, safe='')}/{quote(name, safe='')}".encode()
    return base64.b64encode(raw).decode().translate(str.maketrans("+/=", "-_."))


async def test_ios_install_list(web: Api) -> None:
    link = _link("https://files.example/d/app.ipa?sign=x&y=1", "My <App>@com.example.app")
    response = await web.client.get(f"/i/{link}.plist")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/xml")
    text = response.text
    assert "<string>https://files.example/d/app.ipa?sign=x&amp;y=1</string>" in text
    assert "<string>com.example.app</string>" in text
    assert "<string>My &lt;App&gt;</string>" in text


@pytest.mark.parametrize("link", ["not*base64", base64.b64encode(b"only-one-part").decode()])
async def test_ios_install_list_refuses_bad_links(web: Api, link: str) -> None:
    body = (await web.client.get(f"/i/{link}.plist")).json()
    assert body["code"] == 400


async def test_message_box_answers_as_alist(web: Api) -> None:
    token = await web.login()
    got = await web.post("/api/admin/message/get", token=token)
    assert (got["code"], got["message"]) == (404, "no message")
    sent = await web.post("/api/admin/message/send", {"message": "hi"}, token=token)
    assert (sent["code"], sent["message"]) == (500, "nowhere needed")
    user = await web.make_user("bob", "bob-pw")
    assert user
    bob = await web.login("bob", "bob-pw")
    refused = await web.post("/api/admin/message/get", token=bob)
    assert refused["code"] == 403


async def test_openlist_pages_get_stable_answers(web: Api) -> None:
    token = await web.login()
    shares = await web.post("/api/share/list", {"page": 1, "per_page": 20}, token=token)
    assert shares == {"code": 200, "message": "success", "data": {"content": [], "total": 0}}
    created = await web.post("/api/share/create", {"files": ["/a"]}, token=token)
    assert created["code"] == 500  # no such file: share links have tests of their own
    progress = await web.get("/api/admin/scan/progress", token=token)
    assert progress["data"] == {"obj_count": 0, "is_done": True}
    moves = await web.get("/api/task/move/undone", token=token)
    assert moves == {"code": 200, "message": "success", "data": []}
    guest = await web.post("/api/share/list", {})
    assert guest["code"] in (401, 403)
