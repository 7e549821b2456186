"""Extraction: each entry passes the checks an upload of its path passes, existing
files are replaced only when asked, names are made safe, and bombs are stopped."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import libarchive
import pytest

from manifold.models import Perm, Task, TaskState
from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.api.test_archives import settle_uploads, zip_bytes
from tests.conftest import Api

MiB = 1 << 20
USER_PW = "user-password-1"
BITS = int(Perm.READ_ARCHIVES | Perm.DECOMPRESS | Perm.WRITE)


@pytest.fixture
async def home(api: Api, tmp_path: Path) -> Path:
    """``/home`` with bob's and carol's folders; bob's holds a link to carol's."""
    root = make_tree(tmp_path / "home", {"bob/": "", "carol/private.txt": "carol's"})
    (root / "bob/link_carol").symlink_to(root / "carol")
    await api.as_admin()
    await mount_local(api, "/home", root)
    await api.make_user("bob", USER_PW, permission=BITS, base_path="/home/bob")
    return root


async def extract_as(api: Api, token: str, archive: str, **fields: Any) -> list[Task]:
    """Decompress ``archive`` of bob's folder into it; every task, once all have ended."""
    body = {"src_dir": "/", "dst_dir": "/", "name": archive, **fields}
    answer = await api.post("/api/fs/archive/decompress", body, token=token)
    assert answer["code"] == 200, answer
    for info in answer["data"]["task"]:
        await api.services.tasks.wait_done(info["id"])
    await settle_uploads(api)
    admin = await api.login()
    done = await api.get("/api/admin/task/decompress_upload/done", token=admin)
    return [api.services.tasks.get(t["id"]) for t in done["data"]]


def statuses(tasks: list[Task]) -> list[str]:
    return [t.status for t in tasks if t.status.startswith("skipped")]


async def test_a_member_through_a_link_out_of_the_base_path_is_skipped(
    api: Api, home: Path
) -> None:
    (home / "bob/a.zip").write_bytes(zip_bytes({"link_carol/x.txt": b"x", "ok.txt": b"ok"}))
    token = await api.login("bob", USER_PW)
    tasks = await extract_as(api, token, "a.zip")
    assert not (home / "carol/x.txt").exists()
    assert (home / "bob/ok.txt").read_bytes() == b"ok"
    assert all(t.state == TaskState.SUCCEEDED for t in tasks)
    assert statuses(tasks) == ["skipped /link_carol: permission denied"]
    assert str(home) not in " ".join(t.status + t.error for t in tasks)


async def test_a_folder_password_below_the_destination_needs_the_requests_password(
    api: Api, home: Path
) -> None:
    make_tree(home / "bob", {"locked/": ""})
    meta = {"path": "/home/bob/locked", "password": "folder-pw", "p_sub": True}
    assert (await api.post("/api/admin/meta/create", meta))["code"] == 200
    (home / "bob/a.zip").write_bytes(zip_bytes({"locked/y.txt": b"y"}))
    token = await api.login("bob", USER_PW)
    tasks = await extract_as(api, token, "a.zip")
    assert not (home / "bob/locked/y.txt").exists()
    assert statuses(tasks) == ["skipped /locked: password is incorrect or you have no permission"]
    await extract_as(api, token, "a.zip", password="folder-pw")
    assert (home / "bob/locked/y.txt").read_bytes() == b"y"


async def test_a_hidden_folder_is_not_written_into(api: Api, home: Path) -> None:
    make_tree(home / "bob", {"secret/": ""})
    meta = {"path": "/home/bob", "hide": "secret", "h_sub": True}
    assert (await api.post("/api/admin/meta/create", meta))["code"] == 200
    (home / "bob/a.zip").write_bytes(zip_bytes({"secret/z.txt": b"z", "open.txt": b"o"}))
    token = await api.login("bob", USER_PW)
    tasks = await extract_as(api, token, "a.zip")
    assert not (home / "bob/secret/z.txt").exists()
    assert (home / "bob/open.txt").exists()
    assert len(statuses(tasks)) == 1 and statuses(tasks)[0].startswith("skipped /secret: ")


async def test_existing_files_are_replaced_only_when_asked(api: Api, home: Path) -> None:
    make_tree(home / "bob", {"ok.txt": "old"})
    (home / "bob/a.zip").write_bytes(zip_bytes({"ok.txt": b"new"}))
    token = await api.login("bob", USER_PW)
    tasks = await extract_as(api, token, "a.zip")
    assert (home / "bob/ok.txt").read_bytes() == b"old"
    assert statuses(tasks) == ["skipped /ok.txt: file exists"]
    # Replacing a file needs the remove bit, which bob lacks.
    tasks = await extract_as(api, token, "a.zip", overwrite=True)
    assert (home / "bob/ok.txt").read_bytes() == b"old"
    assert "skipped /ok.txt: permission denied" in statuses(tasks)
    remover = int(BITS | Perm.REMOVE)
    await api.make_user("rob", USER_PW, permission=remover, base_path="/home/bob")
    await extract_as(api, await api.login("rob", USER_PW), "a.zip", overwrite=True)
    assert (home / "bob/ok.txt").read_bytes() == b"new"


async def test_member_names_lose_control_and_bidi_characters(api: Api, home: Path) -> None:
    names = {"evil\u202egpj.exe": b"1", "bell\x07.txt": b"2"}
    (home / "bob/a.zip").write_bytes(zip_bytes(names))
    token = await api.login("bob", USER_PW)
    listed = await api.post("/api/fs/archive/meta", {"path": "/a.zip"}, token=token)
    assert sorted(e["name"] for e in listed["data"]["content"]) == ["bell_.txt", "evil_gpj.exe"]
    await extract_as(api, token, "a.zip")
    assert (home / "bob/evil_gpj.exe").read_bytes() == b"1"
    assert (home / "bob/bell_.txt").read_bytes() == b"2"


# -- bombs -------------------------------------------------------------------------


def zeros_zip(size: int) -> bytes:
    out = io.BytesIO()
    with (
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("zeros.bin", "w", force_zip64=True) as file,
    ):
        for _ in range(size // MiB):
            file.write(bytes(MiB))
    return out.getvalue()


def zeros_tar_zst(path: Path, size: int) -> None:
    with libarchive.file_writer(str(path), "ustar", "zstd") as archive:
        archive.add_file_from_memory("zeros.bin", size, (bytes(MiB) for _ in range(size // MiB)))
        archive.add_file_from_memory("after.txt", 5, b"after")


def temp_leftovers(api: Api) -> list[Path]:
    return list((api.services.config.data_dir / "temp").glob("decompress-*"))


async def failed_extraction(api: Api, home: Path, name: str) -> str:
    """The error that stopped extracting ``name``: at once (listing it went past the
    limits) or in its task; either way nothing is left behind."""
    body = {"src_dir": "/home/bob", "dst_dir": "/home/bob", "name": name}
    answer = await api.post("/api/fs/archive/decompress", body)
    error = str(answer["message"])
    if answer["code"] == 200:
        (info,) = answer["data"]["task"]
        task = await api.services.tasks.wait_done(info["id"])
        assert task.state == TaskState.FAILED
        error = task.error
    assert not temp_leftovers(api)
    assert not (home / "bob/zeros.bin").exists()
    return error


async def test_an_extraction_past_the_size_limit_stops_and_leaves_nothing(
    api: Api, home: Path
) -> None:
    (home / "bob/bomb.zip").write_bytes(zeros_zip(40 * MiB))
    await save_settings(api, archive_extract_max_size=str(8 * MiB))
    error = await failed_extraction(api, home, "bomb.zip")
    assert "more than 8 MiB" in error and "archive_extract_max_size" in error


async def test_a_compressed_tar_past_the_ratio_stops_and_leaves_nothing(
    api: Api, home: Path
) -> None:
    zeros_tar_zst(home / "bob/bomb.tar.zst", 40 * MiB)
    assert os.path.getsize(home / "bob/bomb.tar.zst") < 64 << 10
    await save_settings(api, archive_max_ratio="100")
    error = await failed_extraction(api, home, "bomb.tar.zst")
    assert "more than 100 times its size" in error


async def test_the_default_limits_stop_a_bomb(api: Api, home: Path) -> None:
    zeros_tar_zst(home / "bob/bomb.tar.zst", 40 * MiB)
    error = await failed_extraction(api, home, "bomb.tar.zst")
    assert "decompression bomb" in error


async def test_a_member_colliding_with_a_file_member_is_skipped_not_fatal(
    api: Api, home: Path
) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, data in [("d", b"file"), ("d/inner.txt", b"in"), ("ok.txt", b"ok")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    (home / "bob/both.tar").write_bytes(out.getvalue())
    token = await api.login("bob", USER_PW)
    tasks = await extract_as(api, token, "both.tar")
    assert (home / "bob/ok.txt").read_bytes() == b"ok"
    assert [t.error for t in tasks if t.state == TaskState.FAILED] == []
