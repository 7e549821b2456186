"""Archives: /api/fs/archive/meta, list and decompress, and members through /ae."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import libarchive
import pytest
from pydantic import BaseModel

from manifold.container import Services
from manifold.drivers.base import DriverConfig, LinkArgs
from manifold.models import Link, Obj, Perm, TaskState
from tests.api.fs_helpers import make_tree, mount_local
from tests.conftest import Api
from tests.drivers.inert import InertDriver

FILES = {"a.txt": b"alpha\n", "sub/b.txt": b"beta beta\n", "sub/deeper/c.md": b"# gamma\n"}
PASSWORD = "archive-pw"
USER_PW = "user-password-1"


def zip_bytes(files: dict[str, bytes], stored: bool = False) -> bytes:
    out = io.BytesIO()
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def tar_gz_bytes(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1_700_000_000
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def written(path: Path, format_name: str, files: dict[str, bytes], **options: Any) -> None:
    """An archive written by libarchive: 7z, iso, an encrypted zip."""
    with libarchive.file_writer(str(path), format_name, **options) as archive:
        for name, data in files.items():
            archive.add_file_from_memory(name, len(data), data)


@pytest.fixture
async def arch(api: Api, tmp_path: Path) -> tuple[Path, Path]:
    src = make_tree(tmp_path / "src", {"keep.txt": "k"})
    dst = make_tree(tmp_path / "dst", {"old.txt": "o"})
    (src / "plain.zip").write_bytes(zip_bytes(FILES))
    (src / "t.tar.gz").write_bytes(tar_gz_bytes(FILES))
    (src / "notes.txt.gz").write_bytes(_gzip(b"compressed notes\n"))
    (src / "broken.zip").write_bytes(b"this is no archive at all" * 10)
    written(src / "w.7z", "7zip", FILES)
    written(src / "disc.iso", "iso9660", FILES)
    written(
        src / "locked.zip",
        "zip",
        FILES,
        options="encryption=zipcrypt",
        passphrase=PASSWORD,
    )
    (src / "evil.zip").write_bytes(zip_bytes({"../../escape.txt": b"x", "/abs.txt": b"y"}))
    await api.as_admin()
    await mount_local(api, "/src", src)
    await mount_local(api, "/dst", dst)
    return src, dst


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data)


async def meta(api: Api, path: str, **fields: Any) -> dict[str, Any]:
    return await api.post("/api/fs/archive/meta", {"path": path, **fields})


async def listing(api: Api, path: str, inner: str = "/", **fields: Any) -> dict[str, Any]:
    return await api.post("/api/fs/archive/list", {"path": path, "inner_path": inner, **fields})


def tree(content: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The meta answer's tree as nested dicts: a file is its size."""
    return {e["name"]: tree(e["children"]) if e["is_dir"] else e["size"] for e in content or []}


EXPECTED_TREE = {"a.txt": 6, "sub": {"b.txt": 10, "deeper": {"c.md": 8}}}


@pytest.mark.parametrize("name", ["plain.zip", "t.tar.gz", "w.7z", "disc.iso"])
async def test_meta_gives_the_member_tree_of_each_format(
    api: Api, arch: tuple[Path, Path], name: str
) -> None:
    body = await meta(api, f"/src/{name}")
    assert body["code"] == 200, body
    data = body["data"]
    assert tree(data["content"]) == EXPECTED_TREE
    assert data["encrypted"] is False
    assert data["comment"] == ""
    assert "sort" not in data  # the page shows an empty table when sort is null
    assert data["raw_url"] == f"http://manifold.test/ae/src/{quote(name)}"
    assert data["sign"] == api.services.archive_signer.sign(f"/src/{name}")
    entry = next(e for e in data["content"] if e["name"] == "a.txt")
    assert entry["children"] is None
    assert entry["sign"] == "" and entry["thumb"] == "" and entry["type"] == 4


async def test_a_compressed_single_file_is_one_member_named_after_it(
    api: Api, arch: tuple[Path, Path]
) -> None:
    body = await meta(api, "/src/notes.txt.gz")
    assert body["code"] == 200, body
    assert [e["name"] for e in body["data"]["content"]] == ["notes.txt"]
    got = await fetch_member(api, "/src/notes.txt.gz", "/notes.txt")
    assert got.content == b"compressed notes\n"


async def test_list_pages_through_one_folder_of_the_archive(
    api: Api, arch: tuple[Path, Path]
) -> None:
    body = await listing(api, "/src/plain.zip", "/sub")
    assert body["code"] == 200, body
    assert body["data"]["total"] == 2
    assert sorted(e["name"] for e in body["data"]["content"]) == ["b.txt", "deeper"]
    assert all("children" not in e for e in body["data"]["content"])
    paged = await listing(api, "/src/plain.zip", "/sub", page=2, per_page=1)
    assert paged["data"]["total"] == 2 and len(paged["data"]["content"]) == 1
    missing = await listing(api, "/src/plain.zip", "/nope")
    assert (missing["code"], missing["message"]) == (500, "object not found")


async def test_a_file_that_is_no_archive_answers_unknown_format(
    api: Api, arch: tuple[Path, Path]
) -> None:
    body = await meta(api, "/src/broken.zip")
    assert (body["code"], body["message"]) == (500, "unknown archive format")


async def fetch_member(api: Api, path: str, inner: str, **query: str) -> Any:
    sign = api.services.archive_signer.sign(path)
    params = {"inner": inner, "sign": sign, **query}
    return await api.client.get(f"/ae{quote(path)}", params=params)


async def test_ae_streams_one_member_with_ranges(api: Api, arch: tuple[Path, Path]) -> None:
    got = await fetch_member(api, "/src/plain.zip", "/sub/b.txt")
    assert got.status_code == 200
    assert got.content == b"beta beta\n"
    assert "attachment" in got.headers["content-disposition"]
    assert got.headers["cache-control"].startswith("max-age=0")
    sign = api.services.archive_signer.sign("/src/w.7z")
    ranged = await api.client.get(
        "/ae/src/w.7z",
        params={"inner": "/sub/b.txt", "sign": sign},
        headers={"Range": "bytes=5-8"},
    )
    assert ranged.status_code == 206
    assert ranged.content == b"beta"
    for prefix in ("/ad", "/ap"):
        same = await api.client.get(
            f"{prefix}/src/plain.zip", params={"inner": "/a.txt", "sign": sign_of(api)}
        )
        assert same.content == b"alpha\n"


def sign_of(api: Api) -> str:
    return api.services.archive_signer.sign("/src/plain.zip")


async def test_ae_refuses_a_missing_or_download_sign(api: Api, arch: tuple[Path, Path]) -> None:
    bare = await api.client.get("/ae/src/plain.zip", params={"inner": "/a.txt"})
    assert bare.status_code == 401
    assert bare.json()["code"] == 401
    download_sign = api.services.signer.sign("/src/plain.zip")
    other = await api.client.get(
        "/ae/src/plain.zip", params={"inner": "/a.txt", "sign": download_sign}
    )
    assert other.status_code == 401
    missing = await fetch_member(api, "/src/plain.zip", "/nope.txt")
    assert missing.status_code == 404
    assert missing.json()["message"] == "object not found"


async def test_an_encrypted_zip_lists_but_needs_its_password_to_read(
    api: Api, arch: tuple[Path, Path]
) -> None:
    body = await meta(api, "/src/locked.zip")
    assert body["code"] == 200, body
    assert body["data"]["encrypted"] is True
    assert tree(body["data"]["content"]) == EXPECTED_TREE
    for password in ("", "wrong-one"):
        refused = await fetch_member(api, "/src/locked.zip", "/a.txt", **{"pass": password})
        assert refused.status_code == 403
        assert refused.json()["code"] == 202
        assert refused.json()["message"] == "wrong archive password"
    got = await fetch_member(api, "/src/locked.zip", "/sub/b.txt", **{"pass": PASSWORD})
    assert got.content == b"beta beta\n"
    wrong = await api.post(
        "/api/fs/archive/decompress",
        {"src_dir": "/src", "dst_dir": "/dst", "name": "locked.zip", "archive_pass": "nope"},
    )
    assert wrong["code"] == 200
    task = await api.services.tasks.wait_done(wrong["data"]["task"][0]["id"])
    assert task.state == TaskState.FAILED
    assert "wrong archive password" in task.error


def lucky_wrong_password(archive: Path, member: str) -> str:
    """A wrong password that passes ZipCrypto's one-byte check for ``member`` (one in
    256 does), so it fails only once the member's bytes are decompressed."""
    with zipfile.ZipFile(archive) as opened:
        for n in range(20_000):
            candidate = f"wrong-{n}"
            try:
                with opened.open(member, pwd=candidate.encode()):
                    return candidate
            except RuntimeError:  # the check byte refused it
                continue
    raise AssertionError("no password passed the check byte")


async def test_a_wrong_password_passing_zipcrypto_check_is_still_the_wrong_password(
    api: Api, arch: tuple[Path, Path]
) -> None:
    src, _ = arch
    password = lucky_wrong_password(src / "locked.zip", "a.txt")
    refused = await fetch_member(api, "/src/locked.zip", "/a.txt", **{"pass": password})
    assert (refused.status_code, refused.json()["code"]) == (403, 202)
    assert refused.json()["message"] == "wrong archive password"
    [task] = await decompress(api, dst_dir="/dst", name="locked.zip", archive_pass=password)
    assert task.state == TaskState.FAILED
    assert "wrong archive password" in task.error


async def decompress(api: Api, **fields: Any) -> list[Any]:
    body = await api.post("/api/fs/archive/decompress", {"src_dir": "/src", **fields})
    assert body["code"] == 200, body
    finished = []
    for info in body["data"]["task"]:
        finished.append(await api.services.tasks.wait_done(info["id"]))
    await settle_uploads(api)
    return finished


async def settle_uploads(api: Api) -> None:
    while True:
        undone = await api.get("/api/admin/task/decompress_upload/undone")
        if not undone["data"]:
            return
        for task in undone["data"]:
            await api.services.tasks.wait_done(task["id"])


async def test_decompress_into_a_new_folder_of_another_storage(
    api: Api, arch: tuple[Path, Path]
) -> None:
    _, dst = arch
    body = await api.post(
        "/api/fs/archive/decompress",
        {"src_dir": "/src", "dst_dir": "/dst", "name": ["plain.zip"], "put_into_new_dir": True},
    )
    assert body["code"] == 200, body
    (info,) = body["data"]["task"]
    assert info["name"] == "decompress [/src](/plain.zip)[/] to [/dst](/) with password <>"
    task = await api.services.tasks.wait_done(info["id"])
    assert task.state == TaskState.SUCCEEDED, task.error
    await settle_uploads(api)
    assert (dst / "plain/a.txt").read_bytes() == b"alpha\n"
    assert (dst / "plain/sub/deeper/c.md").read_bytes() == b"# gamma\n"
    done = await api.get("/api/admin/task/decompress_upload/done")
    assert "upload plain to [/dst](/)" in [t["name"] for t in done["data"]]
    # The extracted copy is gone once uploaded (offline downloads keep a folder there).
    assert not list((api.services.config.data_dir / "temp").glob("decompress-*"))


async def test_decompress_one_folder_in_place_with_a_password(
    api: Api, arch: tuple[Path, Path]
) -> None:
    _, dst = arch
    finished = await decompress(
        api, dst_dir="/dst", name="locked.zip", archive_pass=PASSWORD, inner_path="/sub"
    )
    assert [t.state for t in finished] == [TaskState.SUCCEEDED]
    assert PASSWORD not in finished[0].name
    assert (dst / "sub/b.txt").read_bytes() == b"beta beta\n"
    assert (dst / "sub/deeper/c.md").exists()
    assert not (dst / "a.txt").exists()


async def test_members_never_land_outside_the_destination(
    api: Api, arch: tuple[Path, Path], tmp_path: Path
) -> None:
    _, dst = arch
    body = await meta(api, "/src/evil.zip")
    assert sorted(tree(body["data"]["content"])) == ["abs.txt", "escape.txt"]
    finished = await decompress(api, dst_dir="/dst", name="evil.zip")
    assert [t.state for t in finished] == [TaskState.SUCCEEDED]
    assert (dst / "escape.txt").read_bytes() == b"x"
    assert (dst / "abs.txt").read_bytes() == b"y"
    assert not (tmp_path / "escape.txt").exists()
    assert not Path("/abs.txt").exists()


async def test_archive_permissions_follow_bits_12_and_13(api: Api, arch: tuple[Path, Path]) -> None:
    reader = int(Perm.READ_ARCHIVES | Perm.WRITE)
    await api.make_user("reader", USER_PW, permission=reader, base_path="/")
    await api.make_user("plain", USER_PW, permission=int(Perm.WRITE), base_path="/")
    plain = await api.login("plain", USER_PW)
    refused = await api.post("/api/fs/archive/meta", {"path": "/src/plain.zip"}, token=plain)
    assert (refused["code"], refused["message"]) == (403, "permission denied")
    refused = await api.post("/api/fs/archive/list", {"path": "/src/plain.zip"}, token=plain)
    assert refused["code"] == 403
    token = await api.login("reader", USER_PW)
    allowed = await api.post("/api/fs/archive/meta", {"path": "/src/plain.zip"}, token=token)
    assert allowed["code"] == 200
    body = {"src_dir": "/src", "dst_dir": "/dst", "name": "plain.zip"}
    refused = await api.post("/api/fs/archive/decompress", body, token=token)
    assert (refused["code"], refused["message"]) == (403, "permission denied")


async def test_decompress_needs_write_permission_in_the_destination(
    api: Api, arch: tuple[Path, Path]
) -> None:
    bits = int(Perm.READ_ARCHIVES | Perm.DECOMPRESS)
    await api.make_user("nowrite", USER_PW, permission=bits, base_path="/")
    token = await api.login("nowrite", USER_PW)
    body = {"src_dir": "/src", "dst_dir": "/dst", "name": "plain.zip"}
    refused = await api.post("/api/fs/archive/decompress", body, token=token)
    assert (refused["code"], refused["message"]) == (403, "permission denied")


async def test_a_folder_password_guards_the_archive(api: Api, arch: tuple[Path, Path]) -> None:
    await api.post(
        "/api/admin/meta/create", {"path": "/src", "password": "folder-pw", "p_sub": True}
    )
    bits = int(Perm.READ_ARCHIVES)
    await api.make_user("guarded", USER_PW, permission=bits, base_path="/")
    token = await api.login("guarded", USER_PW)
    refused = await api.post("/api/fs/archive/meta", {"path": "/src/plain.zip"}, token=token)
    assert refused["code"] == 403
    allowed = await api.post(
        "/api/fs/archive/meta", {"path": "/src/plain.zip", "password": "folder-pw"}, token=token
    )
    assert allowed["code"] == 200


async def test_a_base_path_confines_archive_paths(api: Api, arch: tuple[Path, Path]) -> None:
    bits = int(Perm.READ_ARCHIVES)
    await api.make_user("based", USER_PW, permission=bits, base_path="/dst")
    token = await api.login("based", USER_PW)
    body = await api.post("/api/fs/archive/meta", {"path": "/../src/plain.zip"}, token=token)
    assert body["code"] == 403


async def test_extensions_name_the_formats_that_open(api: Api) -> None:
    body = await api.get("/api/public/archive_extensions")
    assert body["code"] == 200
    assert {".zip", ".tar", ".gz", ".7z", ".rar", ".iso"} <= set(body["data"])


# -- an archive behind a range reader: no local file, read by ranges -----------------


BIG = os.urandom(3 << 20)
REMOTE_ZIP = zip_bytes({"big.bin": BIG, "small.txt": b"small\n"}, stored=True)


class RangeOptions(BaseModel):
    pass


class RangeDriver(InertDriver[RangeOptions]):
    """Test-only: one zip held in memory, readable only by ranges through its link."""

    served: ClassVar[int] = 0

    async def list(self, dir: Obj) -> list[Obj]:
        when = datetime(2024, 5, 1, tzinfo=UTC)
        return [Obj("remote.zip", len(REMOTE_ZIP), False, when, path="/remote.zip")]

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link(reader=self._read)

    async def _read(self, offset: int, length: int | None) -> AsyncIterator[bytes]:
        end = len(REMOTE_ZIP) if length is None else min(len(REMOTE_ZIP), offset + length)
        for start in range(offset, end, 65536):
            chunk = REMOTE_ZIP[start : min(start + 65536, end)]
            type(self).served += len(chunk)
            yield chunk


@pytest.fixture
async def remote(api: Api, services: Services) -> Api:
    RangeDriver.served = 0
    config = DriverConfig(name="RangeTest", only_proxy=True)
    services.registry.register("RangeTest", RangeDriver, RangeOptions, config)
    await api.as_admin()
    body = {"mount_path": "/r", "driver": "RangeTest", "addition": "{}"}
    assert (await api.post("/api/admin/storage/create", body))["code"] == 200
    return api


async def test_an_archive_behind_a_range_reader_is_read_by_its_index(remote: Api) -> None:
    body = await meta(remote, "/r/remote.zip")
    assert body["code"] == 200, body
    assert tree(body["data"]["content"]) == {"big.bin": len(BIG), "small.txt": 6}
    # The central directory at the end is read, not the 3 MiB member before it.
    assert RangeDriver.served < len(REMOTE_ZIP) // 2
    got = await fetch_member(remote, "/r/remote.zip", "/big.bin")
    assert got.content == BIG
