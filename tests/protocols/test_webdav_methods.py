"""WebDAV verbs through the in-process app, on a Local mount at ``/local``."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.db.props_repo import DavPropRepo
from manifold.services.auth.service import Caller
from manifold.services.fs.props import DeadProps
from tests.protocols.dav_helpers import Dav, mount

D = "{DAV:}"


def hrefs(body: bytes) -> list[str]:
    return [h.text or "" for h in ET.fromstring(body).iter(D + "href")]


async def test_options_names_the_dav_classes_and_what_the_path_allows(dav: Dav) -> None:
    found = await dav("OPTIONS", "/local/docs/readme.txt")
    assert found.headers["dav"] == "1, 2"
    assert "GET" in found.headers["allow"]
    missing = await dav("OPTIONS", "/local/nothing")
    assert missing.headers["allow"] == "OPTIONS, LOCK, PUT, MKCOL"


async def test_propfind_depth_1_lists_entries_with_encoded_hrefs(dav: Dav, disk: Path) -> None:
    (disk / "docs" / "a #?%&+ b.txt").write_bytes(b"x")
    answer = await dav("PROPFIND", "/local/docs", Depth="1")
    assert answer.status_code == 207
    assert set(hrefs(answer.content)) == {
        "/dav/local/docs/",
        "/dav/local/docs/readme.txt",
        "/dav/local/docs/a%20%23%3F%25%26%2B%20b.txt",
    }
    again = await dav("PROPFIND", "/local/docs", Depth="1")
    assert again.content == answer.content


async def test_propfind_depth_infinity_is_refused(dav: Dav) -> None:
    answer = await dav("PROPFIND", "/local", Depth="infinity")
    assert answer.status_code == 403
    assert b"propfind-finite-depth" in answer.content


async def test_propfind_named_props_and_missing_ones(dav: Dav) -> None:
    body = (
        '<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop>'
        '<D:getcontentlength/><x:nope xmlns:x="urn:x"/></D:prop></D:propfind>'
    )
    answer = await dav("PROPFIND", "/local/docs/readme.txt", body, Depth="0")
    tree = ET.fromstring(answer.content)
    assert [e.text for e in tree.iter(D + "getcontentlength")] == ["11"]
    assert "404" in "".join(s.text or "" for s in tree.iter(D + "status"))


async def test_get_ranges_etags_and_conditionals(dav: Dav) -> None:
    whole = await dav("GET", "/local/docs/readme.txt")
    assert whole.content == b"hello world"
    part = await dav("GET", "/local/docs/readme.txt", Range="bytes=6-")
    assert (part.status_code, part.content) == (206, b"world")
    assert part.headers["content-range"] == "bytes 6-10/11"
    assert (await dav("GET", "/local/docs/readme.txt", Range="bytes=-3")).content == b"rld"
    beyond = await dav("GET", "/local/docs/readme.txt", Range="bytes=20-")
    assert beyond.status_code == 416
    same = await dav("GET", "/local/docs/readme.txt", If_None_Match=whole.headers["etag"])
    assert same.status_code == 304
    since = whole.headers["last-modified"]
    assert (await dav("GET", "/local/docs/readme.txt", If_Modified_Since=since)).status_code == 304
    head = await dav("HEAD", "/local/docs/readme.txt")
    assert (head.headers["content-length"], head.content) == ("11", b"")


async def test_put_creates_then_replaces_and_honours_the_mtime(dav: Dav, disk: Path) -> None:
    assert (await dav("PUT", "/local/new.bin", b"", X_OC_Mtime="1000000000")).status_code == 201
    replaced = await dav("PUT", "/local/new.bin", b"real bytes", X_OC_Mtime="1000000000")
    assert replaced.status_code == 204
    assert (disk / "new.bin").read_bytes() == b"real bytes"
    assert int((disk / "new.bin").stat().st_mtime) == 1000000000
    assert (await dav("PUT", "/local/no/parent.txt", b"x")).status_code == 409


async def test_appledouble_and_ds_store_are_plain_files(dav: Dav, disk: Path) -> None:
    for name in ("._readme.txt", ".DS_Store"):
        assert (await dav("PUT", f"/local/docs/{name}", b"mac")).status_code == 201
        assert (disk / "docs" / name).read_bytes() == b"mac"


async def test_mkcol_rules(dav: Dav, disk: Path) -> None:
    assert (await dav("MKCOL", "/local/made")).status_code == 201
    assert (disk / "made").is_dir()
    assert (await dav("MKCOL", "/local/made")).status_code == 405
    assert (await dav("MKCOL", "/local/a/b")).status_code == 409
    assert (await dav("MKCOL", "/local/body", b"<x/>")).status_code == 415


async def test_delete_and_a_missing_one(dav: Dav, disk: Path) -> None:
    assert (await dav("DELETE", "/local/docs")).status_code == 204
    assert not (disk / "docs").exists()
    assert (await dav("DELETE", "/local/docs")).status_code == 404


@pytest.mark.parametrize(
    "destination",
    [
        "http://manifold.test/dav/local/copy%20of.txt",
        "/dav/local/copy of.txt",
        "/dav/local/copy%20of.txt/",
    ],
)
async def test_copy_destination_spellings(dav: Dav, disk: Path, destination: str) -> None:
    answer = await dav("COPY", "/local/docs/readme.txt", Destination=destination)
    assert answer.status_code == 201
    assert (disk / "copy of.txt").read_bytes() == b"hello world"


async def test_copy_and_move_overwrite_rules(dav: Dav, disk: Path) -> None:
    (disk / "other.txt").write_bytes(b"other")
    taken = await dav(
        "COPY", "/local/docs/readme.txt", Destination="/dav/local/other.txt", Overwrite="F"
    )
    assert taken.status_code == 412
    assert (disk / "other.txt").read_bytes() == b"other"
    replaced = await dav("MOVE", "/local/docs/readme.txt", Destination="/dav/local/other.txt")
    assert replaced.status_code == 204
    assert (disk / "other.txt").read_bytes() == b"hello world"
    outside = await dav("MOVE", "/local/other.txt", Destination="/elsewhere/x")
    assert outside.status_code == 502
    assert (await dav("COPY", "/local/other.txt", Destination="/dav/local/no/x")).status_code == 409


async def test_shallow_copy_of_a_folder_copies_no_members(dav: Dav, disk: Path) -> None:
    answer = await dav("COPY", "/local/docs", Destination="/dav/local/shallow", Depth="0")
    assert answer.status_code == 201
    assert (disk / "shallow").is_dir() and not any((disk / "shallow").iterdir())


async def test_a_move_across_storages_arrives_whole(
    dav: Dav, disk: Path, services: Services, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    await mount(services, "/other", other)
    answer = await dav("MOVE", "/local/docs", Destination="/dav/other/docs")
    assert answer.status_code == 201
    assert (other / "docs" / "readme.txt").read_bytes() == b"hello world"
    assert not (disk / "docs").exists()


async def test_dead_properties_follow_moves(dav: Dav) -> None:
    body = (
        '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"'
        ' xmlns:Z="urn:schemas-microsoft-com:">'
        "<D:set><D:prop><Z:Win32LastModifiedTime>Wed, 01 Jan 2020 00:00:00 GMT"
        "</Z:Win32LastModifiedTime></D:prop></D:set></D:propertyupdate>"
    )
    patched = await dav("PROPPATCH", "/local/docs/readme.txt", body)
    assert patched.status_code == 207 and b"200 OK" in patched.content
    await dav("MOVE", "/local/docs/readme.txt", Destination="/dav/local/moved.txt")
    asked = (
        '<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop>'
        '<Z:Win32LastModifiedTime xmlns:Z="urn:schemas-microsoft-com:"/></D:prop></D:propfind>'
    )
    answer = await dav("PROPFIND", "/local/moved.txt", asked, Depth="0")
    assert b"Wed, 01 Jan 2020 00:00:00 GMT" in answer.content


async def test_dead_properties_set_by_another_instance_show_at_once(
    dav: Dav, services: Services
) -> None:
    asked = (
        '<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop>'
        '<x:color xmlns:x="urn:x"/></D:prop></D:propfind>'
    )
    before = await dav("PROPFIND", "/local/docs", asked, Depth="1")
    assert b"blue" not in before.content
    # Another server on the same database: its own DeadProps over the same table.
    dora = await services.users.by_name("dora")
    assert dora is not None
    other = DeadProps(DavPropRepo(services.engine))
    caller = Caller(dora, "127.0.0.1", protocol="webdav")
    await other.change(caller, "/local/docs/readme.txt", [("{urn:x}color", "blue")])
    after = await dav("PROPFIND", "/local/docs", asked, Depth="1")
    assert after.content.count(b"blue") == 1


async def test_a_lock_on_a_name_in_a_missing_folder_is_409(dav: Dav, disk: Path) -> None:
    body = (
        '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
        "</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>me</D:owner></D:lockinfo>"
    )
    assert (await dav("LOCK", "/local/nowhere/new.docx", body)).status_code == 409
    assert not (disk / "nowhere").exists()
    # The lock asked for is not kept either: the name can be locked once its folder is there.
    assert (await dav("MKCOL", "/local/nowhere")).status_code == 201
    assert (await dav("LOCK", "/local/nowhere/new.docx", body)).status_code == 201


async def test_a_lock_on_a_missing_name_makes_an_empty_file_and_guards_it(
    dav: Dav, disk: Path
) -> None:
    body = (
        '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
        "</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>me</D:owner></D:lockinfo>"
    )
    locked = await dav("LOCK", "/local/new.docx", body, Timeout="Second-60")
    assert locked.status_code == 201
    assert (disk / "new.docx").read_bytes() == b""
    token = locked.headers["lock-token"]
    assert (await dav("PUT", "/local/new.docx", b"x")).status_code == 423
    assert (await dav("PUT", "/local/new.docx", b"x", If=f"({token})")).status_code == 204
    assert (await dav("UNLOCK", "/local/new.docx", Lock_Token=token)).status_code == 204
    assert (await dav("DELETE", "/local/new.docx")).status_code == 204
