"""A remote storage's server dies under the API: the answer is an error envelope, nothing
half-written stays, the rest of the tree works, and the storage comes back by itself."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from manifold.vfs import health
from tests.api.fs_helpers import CREATE, mount_local
from tests.api.test_fs_write import put
from tests.conftest import Api
from tests.drivers import ftp_server
from tests.drivers.sftp_server import SshServer

PAYLOAD = secrets.token_bytes(2_000_000)


@pytest.fixture(autouse=True)
def quick_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "FIRST_WAIT", 0.0)


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[SshServer]:
    folder = tmp_path / "sshd"
    folder.mkdir()
    (folder / "served").mkdir()
    server = SshServer(folder).start()
    yield server
    server.stop()


@pytest.fixture
def ftp(tmp_path: Path) -> Iterator[ftp_server.FtpServer]:
    folder = tmp_path / "ftp"
    folder.mkdir()
    server = ftp_server.pyftpdlib_server(folder)
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def admin(api: Api, tmp_path: Path) -> AsyncIterator[Api]:
    admin = await api.as_admin()
    (tmp_path / "local").mkdir()
    await mount_local(admin, "/local", tmp_path / "local")
    yield admin


async def mount(admin: Api, mount_path: str, driver: str, addition: dict[str, str]) -> None:
    body = {"mount_path": mount_path, "driver": driver, "addition": json.dumps(addition)}
    created = await admin.post(CREATE, body)
    assert created["code"] == 200, created


async def status_of(admin: Api, mount_path: str) -> str:
    body = await admin.get("/api/admin/storage/list")
    (found,) = [s for s in body["data"]["content"] if s["mount_path"] == mount_path]
    return str(found["status"])


async def listing(admin: Api, path: str) -> dict[str, object]:
    return await admin.post("/api/fs/list", {"path": path, "refresh": True})


async def test_an_sftp_server_that_dies_is_refused_then_back_by_itself(
    admin: Api, sshd: SshServer
) -> None:
    served = sshd.folder / "served"
    await mount(admin, "/sftp", "SFTP", {
        "address": sshd.address, "username": "root", "private_key": sshd.private_key,
        "root_folder_path": str(served), "host_key_fingerprint": sshd.host_fingerprint,
    })  # fmt: skip
    assert (await put(admin, "/sftp/kept.bin", PAYLOAD))["code"] == 200

    sshd.kill()
    failed = await listing(admin, "/sftp")
    assert failed["code"] == 500
    assert (await status_of(admin, "/sftp")).startswith("unreachable: ")
    upload = await put(admin, "/sftp/new.bin", PAYLOAD)
    assert upload["code"] == 500
    assert (await listing(admin, "/local"))["code"] == 200  # the rest of the tree works

    sshd.start()
    body = await listing(admin, "/sftp")  # the back-off is over: this call probes
    assert body["code"] == 200, body
    assert [o["name"] for o in body["data"]["content"]] == ["kept.bin"]
    assert await status_of(admin, "/sftp") == "work"
    assert sorted(p.name for p in served.iterdir()) == ["kept.bin"]  # nothing half-written


async def test_an_ftp_server_that_dies_answers_downloads_with_an_error_and_recovers(
    admin: Api, ftp: ftp_server.FtpServer
) -> None:
    await mount(admin, "/ftp", "FTP", {
        "address": ftp.address, "username": ftp.user, "password": ftp.password,
        "root_folder_path": "/", "encoding": "",
    })  # fmt: skip
    assert (await put(admin, "/ftp/big.bin", PAYLOAD))["code"] == 200
    path = "/ftp/big.bin"
    signed = f"{path}?sign={admin.services.signer.sign(path)}"
    ftp.crash()
    response = await admin.client.get("/d" + signed)
    assert response.status_code == 500
    assert response.json()["code"] == 500  # an envelope, never a short file
    failed = await listing(admin, "/ftp")
    assert failed["code"] == 500
    ftp.start()
    body = await listing(admin, "/ftp")
    assert body["code"] == 200, body
    assert [o["name"] for o in body["data"]["content"]] == ["big.bin"]
    assert ftp.files() == ["big.bin"]
