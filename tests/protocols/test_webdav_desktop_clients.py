"""What Windows Explorer (Mini-Redirector) and macOS Finder send, in the order they send it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from tests.protocols.dav_helpers import Dav

D = "{DAV:}"
LOCK_BODY = (
    '<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope>'
    "<D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype>"
    "<D:owner><D:href>WORKGROUP\\dora</D:href></D:owner></D:lockinfo>"
)


def props_of(body: bytes) -> dict[str, set[str]]:
    """Each href and the names of the properties found for it."""
    found: dict[str, set[str]] = {}
    for response in ET.fromstring(body).iter(D + "response"):
        href = response.findtext(D + "href") or ""
        names: set[str] = set()
        for propstat in response.iter(D + "propstat"):
            if "200" in (propstat.findtext(D + "status") or ""):
                for prop in propstat.iter(D + "prop"):
                    names.update(child.tag for child in prop)
        found[href] = names
    return found


async def test_propfind_without_a_body_and_with_allprop_answer_the_same_live_props(
    dav: Dav,
) -> None:
    bare = await dav("PROPFIND", "/local/docs/", Depth="1")
    allprop = await dav(
        "PROPFIND",
        "/local/docs/",
        '<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>',
        Depth="1",
    )
    assert bare.status_code == allprop.status_code == 207
    assert props_of(bare.content) == props_of(allprop.content)
    entry = props_of(bare.content)["/dav/local/docs/readme.txt"]
    assert {D + "getcontentlength", D + "getlastmodified", D + "resourcetype"} <= entry


async def test_the_base_url_answers_with_and_without_a_trailing_slash(dav: Dav) -> None:
    for path in ("", "/"):
        answer = await dav("PROPFIND", path, Depth="0")
        assert answer.status_code == 207, path
        assert "/dav/" in props_of(answer.content)
    assert (await dav("PROPFIND", "/local", Depth="0")).status_code == 207
    assert (await dav("PROPFIND", "/local/", Depth="0")).status_code == 207


async def test_explorer_locks_puts_nothing_then_puts_the_file(dav: Dav, disk: Path) -> None:
    # Explorer: LOCK the new name, PUT 0 bytes, PROPPATCH its times, PUT the content, UNLOCK.
    locked = await dav("LOCK", "/local/report.docx", LOCK_BODY, Timeout="Second-3600")
    assert locked.status_code == 201
    token = locked.headers["lock-token"]
    guarded = f"(<{token.strip('<>')}>)"
    assert (await dav("PUT", "/local/report.docx", b"", If=guarded)).status_code in (201, 204)
    assert (disk / "report.docx").read_bytes() == b""
    patch = (
        '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" '
        'xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop>'
        "<Z:Win32CreationTime>Wed, 01 Jan 2025 00:00:00 GMT</Z:Win32CreationTime>"
        "<Z:Win32FileAttributes>00000020</Z:Win32FileAttributes>"
        "</D:prop></D:set></D:propertyupdate>"
    )
    assert (await dav("PROPPATCH", "/local/report.docx", patch, If=guarded)).status_code == 207
    content = b"PK\x03\x04 the document"
    assert (await dav("PUT", "/local/report.docx", content, If=guarded)).status_code == 204
    assert (await dav("UNLOCK", "/local/report.docx", Lock_Token=token)).status_code == 204
    assert (disk / "report.docx").read_bytes() == content


async def test_finder_writes_appledouble_beside_the_file_and_cleans_up(
    dav: Dav, disk: Path
) -> None:
    # Finder: a 0-byte PUT, the real PUT, the ._ companion, then deletes both.
    assert (await dav("PUT", "/local/photo.jpg", b"")).status_code == 201
    assert (await dav("PUT", "/local/photo.jpg", b"\xff\xd8 jpeg")).status_code == 204
    assert (await dav("PUT", "/local/._photo.jpg", b"\x00\x05\x16\x07")).status_code == 201
    listing = await dav("PROPFIND", "/local/", Depth="1")
    assert {"/dav/local/photo.jpg", "/dav/local/._photo.jpg"} <= set(props_of(listing.content))
    assert (disk / "photo.jpg").read_bytes() == b"\xff\xd8 jpeg"
    assert (await dav("DELETE", "/local/._photo.jpg")).status_code == 204
    assert not (disk / "._photo.jpg").exists()
    assert (disk / "photo.jpg").exists()


async def test_a_destination_with_or_without_percent_encoding_lands_on_one_name(
    dav: Dav, disk: Path
) -> None:
    host = "http://manifold.test"
    encoded = f"{host}/dav/local/docs/a%20b%C3%A9.txt"
    assert (await dav("COPY", "/local/docs/readme.txt", Destination=encoded)).status_code == 201
    assert (disk / "docs" / "a bé.txt").read_text() == "hello world"
    plain = f"{host}/dav/local/docs/c d.txt"
    assert (await dav("MOVE", "/local/docs/a%20b%C3%A9.txt", Destination=plain)).status_code == 201
    assert (disk / "docs" / "c d.txt").read_text() == "hello world"
    assert not (disk / "docs" / "a bé.txt").exists()
