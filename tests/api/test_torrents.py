"""OpenList's torrent helpers: ``torrent/parse`` and ``upload_parse`` read a .torrent
(name, files, sizes, piece length, info hash) under a size cap and answer a clear
error for anything malformed; ``rapid_upload`` answers as unsupported."""

from __future__ import annotations

import base64
import hashlib

import pytest

from manifold.services.fs.bencode import MAX_DEPTH, BencodeError, decode, encode
from tests.conftest import Api

# Written by hand, keys of ``info`` deliberately out of order: the info hash is the
# SHA-1 of those bytes as written, not of a re-encoding.
INFO = (
    b"d5:filesld6:lengthi3e4:pathl1:a5:b.txteed6:lengthi70000e4:pathl5:c.bineee"
    b"4:name4:pack12:piece lengthi65536e6:pieces40:" + bytes(range(40)) + b"e"
)
TORRENT = b"d8:announce14:http://tracker4:info" + INFO + b"e"


async def parsed(api: Api, data: bytes) -> dict[str, object]:
    await api.as_admin()
    body = {"torrent_data": base64.b64encode(data).decode()}
    return await api.post("/api/fs/torrent/parse", body)


async def test_a_multi_file_torrent_reads_as_written(api: Api) -> None:
    answer = await parsed(api, TORRENT)
    assert answer["code"] == 200, answer
    assert answer["data"] == {
        "name": "pack",
        "total_size": 70003,
        "piece_length": 65536,
        "piece_count": 2,
        "info_hash": hashlib.sha1(INFO).hexdigest(),
        "files": [{"path": "a/b.txt", "size": 3}, {"path": "c.bin", "size": 70000}],
        "has_cas": False,
    }


async def test_a_form_upload_reads_the_same_and_returns_the_file(api: Api) -> None:
    await api.as_admin()
    sent = await api.client.post(
        "/api/fs/torrent/upload_parse",
        files={"torrent": ("pack.torrent", TORRENT, "application/x-bittorrent")},
        headers={"Authorization": api.token},
    )
    body = sent.json()
    assert body["code"] == 200, body
    assert body["data"]["info"]["info_hash"] == hashlib.sha1(INFO).hexdigest()
    assert base64.b64decode(body["data"]["torrent_data"]) == TORRENT


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not bencode",
        TORRENT[:-5],
        b"d4:infoi1ee",
        TORRENT.replace(b"6:pieces40:", b"6:pieces39:")[:-2] + b"e",
        b"l" * (MAX_DEPTH + 10) + b"e" * (MAX_DEPTH + 10),
        b"d4:infod4:name1:x12:piece lengthi1e6:pieces0:6:lengthi-1eee",
    ],
)
async def test_malformed_input_is_a_clear_error_never_a_crash(api: Api, data: bytes) -> None:
    answer = await parsed(api, data)
    assert answer["code"] == 400, answer
    assert str(answer["message"]).startswith("not a torrent")


async def test_a_torrent_past_the_cap_is_refused_before_it_is_read(api: Api) -> None:
    await api.as_admin()
    sent = await api.client.post(
        "/api/fs/torrent/upload_parse",
        files={"torrent": ("big.torrent", b"x" * (11 << 20), "application/x-bittorrent")},
        headers={"Authorization": api.token},
    )
    body = sent.json()
    assert (body["code"], body["message"]) == (400, "torrent is too big (at most 10 MiB)")
    as_json = await parsed(api, b"x" * (11 << 20))  # the JSON body limit comes first
    assert as_json["code"] in (400, 413)


async def test_rapid_upload_answers_as_unsupported(api: Api) -> None:
    await api.as_admin()
    body = {"torrent_data": base64.b64encode(TORRENT).decode(), "path": "/"}
    answer = await api.post("/api/fs/torrent/rapid_upload", body)
    assert answer["code"] == 500
    assert "not supported" in str(answer["message"])


def test_the_codec_round_trips_and_writes_keys_sorted() -> None:
    value = {b"z": [1, -2, b"", {b"b": 0, b"a": b"\x00\xff"}], b"a": 12345678901234567890}
    data = encode(value)
    assert data.startswith(b"d1:ai12345678901234567890e1:zl")
    assert decode(data) == value
    assert decode(TORRENT)[b"announce"] == b"http://tracker"  # type: ignore[index]


@pytest.mark.parametrize("data", [b"i01e", b"i-0e", b"ie", b"3:ab", b"i1ei2e", b"di1ei2ee"])
def test_the_codec_refuses_what_is_not_bencode(data: bytes) -> None:
    with pytest.raises(BencodeError):
        decode(data)
