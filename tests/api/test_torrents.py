"""OpenList's torrent helpers: ``torrent/parse`` and ``upload_parse`` read a .torrent
(name, files, sizes, piece length, info hash) under a size cap and answer a clear
error for anything malformed; ``rapid_upload`` answers as unsupported."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest

from manifold.services.fs.bencode import MAX_DEPTH, BencodeError, decode, encode
from manifold.services.fs.torrent_make import MAX_FILES, PIECE_LENGTH
from tests.api.fs_helpers import add_meta, make_tree, mount_local
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


def pieces_of(data: bytes, length: int) -> bytes:
    return b"".join(
        hashlib.sha1(data[at : at + length]).digest() for at in range(0, len(data), length)
    )


async def generated(api: Api, path: str) -> dict[str, object]:
    answer = await api.post("/api/fs/torrent/generate", {"path": path})
    assert answer["code"] == 200, answer
    data: dict[str, object] = answer["data"]
    return data


async def test_a_torrent_for_a_file_reads_back_with_its_pieces(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    content = os.urandom(PIECE_LENGTH * 2 + 1234)
    make_tree(tmp_path, {"film.bin": content})
    await mount_local(api, "/local", tmp_path)
    made = await generated(api, "/local/film.bin")
    assert (made["file_name"], made["with_cas"]) == ("film.bin.torrent", False)
    data = base64.b64decode(str(made["torrent_data"]))
    info = decode(data)[b"info"]  # type: ignore[index]
    assert info[b"pieces"] == pieces_of(content, PIECE_LENGTH)  # type: ignore[index]
    read = (await parsed(api, data))["data"]
    assert read["info_hash"] == made["info_hash"]  # type: ignore[index]
    assert read["files"] == [{"path": "film.bin", "size": len(content)}]  # type: ignore[index]


async def test_a_torrent_for_a_folder_spans_its_files_in_name_order(
    api: Api, tmp_path: Path
) -> None:
    await api.as_admin()
    files = {"b.bin": os.urandom(300_000), "a/x.txt": b"hello", "a/y.bin": os.urandom(5000)}
    make_tree(tmp_path / "pack", files)
    await mount_local(api, "/local", tmp_path)
    made = await generated(api, "/local/pack")
    data = base64.b64decode(str(made["torrent_data"]))
    read = (await parsed(api, data))["data"]
    assert read["name"] == "pack"  # type: ignore[index]
    listed = [("b.bin", 300_000), ("a/x.txt", 5), ("a/y.bin", 5000)]
    assert [(f["path"], f["size"]) for f in read["files"]] == listed  # type: ignore[index]
    joined = files["b.bin"] + files["a/x.txt"] + files["a/y.bin"]
    info = decode(data)[b"info"]  # type: ignore[index]
    assert info[b"pieces"] == pieces_of(joined, PIECE_LENGTH)  # type: ignore[index]


async def test_generating_checks_access_and_bounds(api: Api, tmp_path: Path) -> None:
    await api.as_admin()
    make_tree(tmp_path, {"secret/a.txt": b"a", "many/" + "f" * 1: b"x"})
    await mount_local(api, "/local", tmp_path)
    await add_meta(api, "/local/secret", password="pw-secret", p_sub=True)
    await api.make_user("guest1", "guest1-pass", base_path="/", permission=0)
    api.token = await api.login("guest1", "guest1-pass")
    for path in ("/local/secret/a.txt", "/local/secret", "/../../etc/passwd"):
        refused = await api.post("/api/fs/torrent/generate", {"path": path})
        assert refused["code"] in (403, 500), refused
        assert refused["data"] is None
    cas = await api.post("/api/fs/torrent/generate", {"path": "/local/many", "with_cas": True})
    assert cas["code"] == 400


async def test_a_folder_past_the_file_bound_is_refused_before_it_is_read(
    api: Api, tmp_path: Path
) -> None:
    await api.as_admin()
    make_tree(tmp_path / "many", {f"f{i:04}": b"x" for i in range(MAX_FILES + 1)})
    await mount_local(api, "/local", tmp_path)
    answer = await api.post("/api/fs/torrent/generate", {"path": "/local/many"})
    assert (answer["code"], answer["message"]) == (
        400,
        f"too many files for a torrent (at most {MAX_FILES})",
    )
