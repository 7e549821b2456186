"""PROPFIND answers as real servers send them, and as awkward ones do, read by the
WebDav driver's multistatus reader. The two captured files are depth-1 answers of
wsgidav 4.4 and rclone 1.60 for one folder holding awkward names."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from manifold.drivers.webdav.multistatus import (
    BadAnswer,
    MultistatusReader,
    http_date,
    listing,
    parse,
)

ANSWERS = Path(__file__).with_name("webdav_answers")
WHEN = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
CAPTURED_CHILDREN = {
    "sub dir": (True, 0),
    "%46": (False, 1),
    "文件 ü": (False, 2),
    ".hid": (True, 0),
    "#?%&+": (False, 5),
}


@pytest.mark.parametrize("server", ["wsgidav", "rclone"])
def test_a_captured_listing_gives_each_child_once_by_its_decoded_name(server: str) -> None:
    data = (ANSWERS / f"{server}-depth1.xml").read_bytes()
    own, children = listing("http://127.0.0.1:8080/dir/", parse(data))
    assert own is not None and own.is_dir
    shown = {name: (entry.is_dir, entry.size) for name, entry in children}
    assert shown == CAPTURED_CHILDREN
    assert {entry.modified for _, entry in children} == {WHEN}


@pytest.mark.parametrize("server", ["wsgidav", "rclone"])
def test_a_captured_listing_reads_the_same_fed_a_byte_at_a_time(server: str) -> None:
    data = (ANSWERS / f"{server}-depth1.xml").read_bytes()
    reader = MultistatusReader()
    for i in range(len(data)):
        reader.feed(data[i : i + 1])
    assert [e.href for e in reader.close()] == [e.href for e in parse(data)]


# Absolute hrefs behind a path prefix, a folder without its trailing slash, a file
# with no properties at all, a property only under a 404 propstat, a member the 207
# reports missing, a deeper member a server that ignores Depth sends, upper-case
# escapes, a raw (unescaped) unicode name and one with a plus sign.
HAND_WRITTEN = b"""<?xml version="1.0"?>
<d:multistatus xmlns:d="DAV:" xmlns:x="urn:other">
 <d:response>
  <d:href>https://dav.example/remote.php/files/My%20Folder</d:href>
  <d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop>
   <d:status>HTTP/1.1 200 OK</d:status></d:propstat>
 </d:response>
 <d:response>
  <d:href>https://dav.example/remote.php/files/My%20Folder/Sub%2Dfolder</d:href>
  <d:propstat><d:prop>
    <d:resourcetype><d:collection/></d:resourcetype>
    <d:getlastmodified>Wed, 01 May 2024 10:00:00 GMT</d:getlastmodified>
   </d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat>
 </d:response>
 <d:response>
  <d:href>/remote.php/files/My%20Folder/bare.bin</d:href>
  <d:propstat><d:prop/><d:status>HTTP/1.1 200 OK</d:status></d:propstat>
 </d:response>
 <d:response>
  <d:href>/remote.php/files/My%20Folder/half.txt</d:href>
  <d:propstat><d:prop><d:getcontentlength>12</d:getcontentlength>
   <d:resourcetype/><x:collection/></d:prop>
   <d:status>HTTP/1.1 200 OK</d:status></d:propstat>
  <d:propstat><d:prop><d:getlastmodified>Thu, 02 May 2024 10:00:00 GMT</d:getlastmodified></d:prop>
   <d:status>HTTP/1.1 404 Not Found</d:status></d:propstat>
 </d:response>
 <d:response>
  <d:href>/remote.php/files/My%20Folder/gone.txt</d:href>
  <d:status>HTTP/1.1 404 Not Found</d:status>
 </d:response>
 <d:response>
  <d:href>/remote.php/files/My%20Folder/Sub-folder/deeper.txt</d:href>
  <d:propstat><d:prop><d:resourcetype/></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat>
 </d:response>
 <d:response>
  <d:href>caf\xc3\xa9%2Bplus+sign.txt</d:href>
  <d:propstat><d:prop><d:resourcetype/><d:getcontentlength>7</d:getcontentlength>
   <d:creationdate>2024-05-01T10:00:00Z</d:creationdate></d:prop>
   <d:status>HTTP/1.1 200 OK</d:status></d:propstat>
 </d:response>
</d:multistatus>
"""


def test_awkward_answers_are_read_as_their_server_meant() -> None:
    url = "https://dav.example/remote.php/files/My%20Folder/"
    own, children = listing(url, parse(HAND_WRITTEN))
    assert own is not None and own.is_dir and own.modified is None
    found = {name: entry for name, entry in children}
    assert list(found) == ["Sub-folder", "bare.bin", "half.txt", "café+plus+sign.txt"]
    assert (found["Sub-folder"].is_dir, found["Sub-folder"].modified) == (True, WHEN)
    bare = found["bare.bin"]
    assert (bare.is_dir, bare.size, bare.modified, bare.created) == (False, 0, None, None)
    # A collection element of another namespace is not DAV's, and a property the
    # server reported missing is not taken.
    half = found["half.txt"]
    assert (half.is_dir, half.size, half.modified) == (False, 12, None)
    cafe = found["café+plus+sign.txt"]
    assert (cafe.size, cafe.created) == (7, WHEN)


def test_a_proxy_that_drops_the_path_prefix_still_finds_the_folder_itself() -> None:
    answer = b"""<D:multistatus xmlns:D="DAV:">
      <D:response><D:href>/photos/</D:href><D:propstat><D:prop><D:resourcetype>
       <D:collection/></D:resourcetype></D:prop></D:propstat></D:response>
      <D:response><D:href>/photos/photos</D:href><D:propstat><D:prop><D:resourcetype>
       <D:collection/></D:resourcetype></D:prop></D:propstat></D:response>
    </D:multistatus>"""
    own, children = listing("https://host/webdav/photos/", parse(answer))
    assert own is not None and own.href == "/photos/"
    assert [(name, entry.is_dir) for name, entry in children] == [("photos", True)]


def test_a_folder_without_a_resourcetype_is_known_by_its_slash() -> None:
    answer = b"""<D:multistatus xmlns:D="DAV:">
      <D:response><D:href>/a/</D:href></D:response>
      <D:response><D:href>/a/b/</D:href></D:response>
      <D:response><D:href>/a/c</D:href></D:response>
    </D:multistatus>"""
    _, children = listing("http://h/a", parse(answer))
    assert [(name, entry.is_dir) for name, entry in children] == [("b", True), ("c", False)]


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE m [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>
<D:multistatus xmlns:D="DAV:"><D:response><D:href>&d;</D:href></D:response></D:multistatus>"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE m [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<D:multistatus xmlns:D="DAV:"><D:response><D:href>&secret;</D:href></D:response></D:multistatus>"""


@pytest.mark.parametrize("answer", [BILLION_LAUGHS, EXTERNAL], ids=["entities", "external"])
def test_an_answer_declaring_a_document_type_is_refused(answer: bytes) -> None:
    with pytest.raises(BadAnswer, match="document type"):
        parse(answer)


def test_an_answer_over_its_cap_is_refused() -> None:
    reader = MultistatusReader(limit=100)
    reader.feed(b"<D:multistatus xmlns:D='DAV:'>")
    with pytest.raises(BadAnswer, match="too large"):
        reader.feed(b" " * 100)


def test_one_huge_text_is_refused() -> None:
    huge = b"<D:multistatus xmlns:D='DAV:'><D:response><D:href>" + b"a" * 100_000
    with pytest.raises(BadAnswer, match="too long"):
        parse(huge + b"</D:href></D:response></D:multistatus>")


@pytest.mark.parametrize("broken", [b"", b"<D:multistatus xmlns:D='DAV:'>", b"not xml"])
def test_a_broken_answer_is_a_bad_answer(broken: bytes) -> None:
    with pytest.raises(BadAnswer):
        parse(broken)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Wed, 01 May 2024 10:00:00 GMT", WHEN),
        ("Wed, 01 May 2024 12:00:00 +0200", WHEN),
        ("", None),
        ("yesterday", None),
    ],
)
def test_http_dates(text: str, expected: datetime | None) -> None:
    assert http_date(text) == expected
