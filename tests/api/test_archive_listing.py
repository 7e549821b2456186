"""Listing archives has a work limit, and odd archives and requests answer clearly."""

from __future__ import annotations

import asyncio
import gzip
import io
import zipfile
from pathlib import Path
from typing import Any

import pytest

from manifold.errors import ObjectNotFound
from manifold.models import Link, Perm
from manifold.services.archive.reader import Source, member_stream
from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.api.test_archive_extract import MiB, zeros_tar_zst
from tests.api.test_archives import zip_bytes
from tests.conftest import Api


@pytest.fixture
async def root(api: Api, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "arch", {"keep.txt": "k"})
    await api.as_admin()
    await mount_local(api, "/a", root)
    return root


async def meta(api: Api, path: Any) -> dict[str, Any]:
    return await api.post("/api/fs/archive/meta", {"path": path})


async def test_listing_a_compressed_tar_stops_at_the_size_limit(api: Api, root: Path) -> None:
    zeros_tar_zst(root / "bomb.tar.zst", 40 * MiB)
    await save_settings(api, archive_list_max_size=str(8 * MiB), archive_max_ratio="0")
    body = await meta(api, "/a/bomb.tar.zst")
    assert body["code"] == 500
    assert "more than 8 MiB" in body["message"] and "archive_list_max_size" in body["message"]
    listed = await api.post("/api/fs/archive/list", {"path": "/a/bomb.tar.zst"})
    assert listed["message"] == body["message"]


async def test_measuring_a_compressed_file_stops_at_the_ratio(api: Api, root: Path) -> None:
    # Not zeros: a stream of zeros reads as an empty tar.
    (root / "ones.bin.gz").write_bytes(gzip.compress(b"\x01" * (40 * MiB)))
    body = await meta(api, "/a/ones.bin.gz")
    assert body["code"] == 500
    assert "more than 250 times its size" in body["message"]


async def test_listing_stops_at_the_entry_limit(api: Api, root: Path) -> None:
    (root / "many.zip").write_bytes(zip_bytes({f"f{i}.txt": b"" for i in range(50)}))
    await save_settings(api, archive_max_entries="20")
    body = await meta(api, "/a/many.zip")
    assert body["code"] == 500
    assert "more than 20 entries" in body["message"]
    await save_settings(api, archive_max_entries="50")
    assert (await meta(api, "/a/many.zip"))["code"] == 200


def deep_zip(levels: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("/".join(["d"] * levels) + "/leaf.txt", b"leaf")
    return out.getvalue()


async def test_a_member_thousands_of_folders_deep_answers(api: Api, root: Path) -> None:
    (root / "deep.zip").write_bytes(deep_zip(3000))
    body = await meta(api, "/a/deep.zip")
    assert body["code"] == 200, body
    # Too deep for one tree answer: none, and the page lists folder by folder.
    assert body["data"]["content"] is None
    inner = "/" + "/".join(["d"] * 3000)
    listed = await api.post("/api/fs/archive/list", {"path": "/a/deep.zip", "inner_path": inner})
    assert listed["code"] == 200, listed
    assert [e["name"] for e in listed["data"]["content"]] == ["leaf.txt"]
    shallow = await api.post("/api/fs/archive/list", {"path": "/a/deep.zip"})
    assert [e["name"] for e in shallow["data"]["content"]] == ["d"]


async def test_a_null_path_answers_as_alist(api: Api, root: Path) -> None:
    body = await meta(api, None)
    assert body == await meta(api, "")
    message = "failed get storage: storage not found; please add a storage first"
    assert (body["code"], body["message"]) == (500, message)


async def test_a_folder_is_no_archive_a_bad_request(api: Api, root: Path) -> None:
    await api.make_user(
        "based", "user-password-1", permission=int(Perm.READ_ARCHIVES), base_path="/a"
    )
    token = await api.login("based", "user-password-1")
    (root / "folder").mkdir()
    for path in (None, "/", "/folder"):
        body = await api.post("/api/fs/archive/meta", {"path": path}, token=token)
        assert (body["code"], body["message"]) == (400, "not a file: a folder is not an archive")
    listed = await api.post("/api/fs/archive/list", {"path": None}, token=token)
    assert listed["code"] == 400, listed


async def test_a_member_missing_from_the_archive_is_not_found(root: Path) -> None:
    path = root / "small.zip"
    path.write_bytes(zip_bytes({"here.txt": b"here"}))
    loop = asyncio.get_running_loop()
    source = Source(Link(file_path=str(path)), path.stat().st_size, path.name, loop)
    with pytest.raises(ObjectNotFound):
        async for _ in member_stream(source, "", "/not-here.txt", 0, None):
            pass
