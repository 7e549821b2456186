"""How a staged multipart upload reaches its storage: a Local storage on the staging
folder's file system takes the staged file itself (its bytes are not written a second
time); any other storage reads it as a put's stream; chunks sent again over a partial
or refused one leave the file right."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from manifold.container import Services
from tests.api.fs_helpers import mount_local
from tests.api.test_multipart import MB, complete, init, payload, pieces, send, staged
from tests.conftest import Api
from tests.drivers import webdav_server

TREE = {"keep.txt": "keep"}
SHM = Path("/dev/shm")


async def send_all(api: Api, path: str, data: bytes) -> str:
    """Open a session for ``data`` at ``path`` and send every chunk; its id."""
    started = await init(api, path, data)
    assert started["code"] == 200, started
    upload_id: str = started["data"]["upload_id"]
    for index, part in enumerate(pieces(data, MB)):
        assert (await send(api, upload_id, index, part))["code"] == 200
    return upload_id


async def test_a_staged_upload_to_local_is_put_in_place_without_a_copy(
    admin: Api, root: Path, services: Services
) -> None:
    data = payload(3 * MB + 77)
    upload_id = await send_all(admin, "/local/linked.bin", data)
    files = staged(services)
    assert len(files) == 1  # one file for the session, every chunk at its offset
    staged_inode = os.stat(files[0]).st_ino
    done = await complete(admin, upload_id)
    assert done["code"] == 200, done
    assert os.stat(root / "linked.bin").st_ino == staged_inode
    assert (root / "linked.bin").read_bytes() == data
    assert staged(services) == []


@pytest.mark.skipif(not SHM.is_dir(), reason="no tmpfs at /dev/shm")
async def test_a_staged_upload_to_another_file_system_arrives_byte_exact(
    admin: Api, services: Services, tmp_path: Path
) -> None:
    elsewhere = SHM / f"manifold-{tmp_path.name}-{os.getpid()}"
    elsewhere.mkdir()
    try:
        await mount_local(admin, "/shm", elsewhere)
        data = payload(2 * MB + 5, seed=2)
        upload_id = await send_all(admin, "/shm/copied.bin", data)
        staged_inode = os.stat(staged(services)[0]).st_ino
        assert (await complete(admin, upload_id))["code"] == 200
        assert (elsewhere / "copied.bin").read_bytes() == data
        assert os.stat(elsewhere / "copied.bin").st_ino != staged_inode
        assert staged(services) == []
    finally:
        for child in elsewhere.iterdir():
            child.unlink()
        elsewhere.rmdir()


@pytest.fixture
def dav(tmp_path: Path) -> Iterator[webdav_server.DavServer]:
    server = webdav_server.wsgidav(tmp_path / "dav")
    server.daemon.start()
    yield server
    server.daemon.stop()


async def test_a_staged_upload_to_webdav_arrives_byte_exact(
    admin: Api, services: Services, dav: webdav_server.DavServer
) -> None:
    login = {"username": dav.username or "anonymous", "password": dav.password or "-"}
    await admin.mount("WebDav", "/remote", {"address": dav.url, "root_folder_path": "/", **login})
    data = payload(2 * MB + 999, seed=3)
    upload_id = await send_all(admin, "/remote/remote.bin", data)
    assert (await complete(admin, upload_id))["code"] == 200
    assert (dav.root / "remote.bin").read_bytes() == data
    assert staged(services) == []


async def test_chunks_sent_again_over_refused_ones_leave_the_file_right(
    admin: Api, root: Path
) -> None:
    data = payload(3 * MB + 300, seed=4)
    parts = pieces(data, MB)
    upload_id = (await init(admin, "/local/resent.bin", data))["data"]["upload_id"]
    assert (await send(admin, upload_id, 1, parts[1]))["code"] == 200
    # Too long: what would spill into chunk 1's range is refused, never written.
    assert (await send(admin, upload_id, 0, parts[0] + b"\xff" * MB))["code"] == 400
    # Too short, and wrong: the bytes it left are written over when it is sent again.
    assert (await send(admin, upload_id, 2, b"\x00" * 4096))["code"] == 400
    assert (await send(admin, upload_id, 3, b"\xee" * 10))["code"] == 400
    for index in (0, 2, 3):
        assert (await send(admin, upload_id, index, parts[index]))["code"] == 200
    assert (await complete(admin, upload_id))["code"] == 200
    assert (root / "resent.bin").read_bytes() == data
