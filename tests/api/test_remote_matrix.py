"""Copies between every two kinds of storage, each on its real server: the
bytes arrive whole, through tasks that stream, and an archive on each remote storage
opens and lists, read by ranges."""

from __future__ import annotations

import io
import json
import secrets
import zipfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from manifold.models import TaskState
from tests.api.fs_helpers import CREATE
from tests.api.test_copy_tasks import settle
from tests.api.test_fs_write import put
from tests.conftest import Api
from tests.drivers import alist_v3_server, ftp_server, s3_server, smb_server, webdav_server
from tests.drivers.sftp_server import SshServer

PAYLOAD = secrets.token_bytes(300_000)
NOTE = "a small note, ü".encode()


@dataclass
class Kind:
    """A kind of storage: its driver and the addition serving one of its folders."""

    name: str
    driver: str
    addition: Callable[[], dict[str, Any]]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("matrix")
    for name in ("sshd", "smb", "dav", "ftp"):
        (base / name).mkdir()
    sshd = SshServer(base / "sshd")
    samba = smb_server.start(base / "smb")
    dav = webdav_server.wsgidav(base / "dav")
    dav.daemon.start()
    ftp = ftp_server.pyftpdlib_server(base / "ftp")
    ftp.start()
    yield {"sftp": sshd.start(), "smb": samba, "dav": dav, "ftp": ftp, "base": base}
    for stop in (sshd.stop, samba.daemon.stop, dav.daemon.stop, ftp.stop):
        stop()


@pytest.fixture(scope="module")
async def s3(servers: dict[str, Any]) -> AsyncIterator[s3_server.S3Server]:
    async for server in s3_server.started(servers["base"]):
        await server.bucket(BUCKET)
        yield server


@pytest.fixture(scope="module")
async def remote_manifold(servers: dict[str, Any]) -> AsyncIterator[alist_v3_server.Remote]:
    async with alist_v3_server.in_process(servers["base"] / "alist") as remote:
        yield remote


def kinds(
    servers: dict[str, Any], remote: alist_v3_server.Remote, s3: s3_server.S3Server, local: Path
) -> list[Kind]:
    sshd: SshServer = servers["sftp"]
    samba: smb_server.Samba = servers["smb"]
    dav: webdav_server.DavServer = servers["dav"]
    ftp: ftp_server.FtpServer = servers["ftp"]
    (sshd.folder / "served").mkdir(exist_ok=True)
    return [
        Kind("local", "Local", lambda: {"root_folder_path": str(local)}),
        Kind(
            "sftp",
            "SFTP",
            lambda: {
                "address": sshd.address,
                "username": "root",
                "private_key": sshd.private_key,
                "root_folder_path": str(sshd.folder / "served"),
                "host_key_fingerprint": sshd.host_fingerprint,
            },
        ),
        Kind(
            "smb",
            "SMB",
            lambda: {
                "address": samba.address,
                "username": smb_server.USER,
                "password": smb_server.PASSWORD,
                "share_name": smb_server.SHARE,
                "root_folder_path": ".",
            },
        ),
        Kind(
            "webdav",
            "WebDav",
            lambda: {
                "address": dav.url,
                "username": dav.username,
                "password": dav.password,
                "root_folder_path": "/",
            },
        ),
        Kind(
            "ftp",
            "FTP",
            lambda: {
                "address": ftp.address,
                "username": ftp.user,
                "password": ftp.password,
                "root_folder_path": "/",
                "encoding": "",
            },
        ),
        Kind("bucket", "S3", lambda: s3.options(BUCKET).model_dump()),
        Kind(
            "alist",
            "AList V3",
            lambda: {
                "url": remote.url,
                "username": alist_v3_server.USER,
                "password": alist_v3_server.USER_PASSWORD,
                "root_folder_path": alist_v3_server.MOUNT,
            },
        ),
    ]


NAMES = ["local", "sftp", "smb", "webdav", "ftp", "bucket", "alist"]
BUCKET = "matrix"


@pytest.fixture
async def mounted(
    api: Api,
    servers: dict[str, Any],
    remote_manifold: alist_v3_server.Remote,
    s3: s3_server.S3Server,
    tmp_path: Path,
) -> dict[str, str]:
    """Every kind mounted at ``/<name>``; the folder each test works in, by kind."""
    admin = await api.as_admin()
    local = tmp_path / "local"
    local.mkdir()
    run = f"run-{secrets.token_hex(4)}"
    for kind in kinds(servers, remote_manifold, s3, local):
        body = {"mount_path": f"/{kind.name}", "driver": kind.driver, "web_proxy": True,
                "addition": json.dumps(kind.addition())}  # fmt: skip
        created = await admin.post(CREATE, body)
        assert created["code"] == 200, (kind.name, created)
    return {name: f"/{name}/{run}" for name in NAMES}


async def download(api: Api, path: str) -> bytes:
    signed = f"{quote(path)}?sign={api.services.signer.sign(path)}"
    response = await api.client.get("/p" + signed)
    assert response.status_code == 200, (path, response.text[:200])
    return response.content


async def fill(api: Api, folder: str) -> None:
    assert (await put(api, f"{folder}/src/a.bin", PAYLOAD))["code"] == 200
    assert (await put(api, f"{folder}/src/sub/b.txt", NOTE))["code"] == 200


@pytest.mark.parametrize("source", NAMES)
async def test_a_folder_copies_from_each_kind_to_every_other(
    api: Api, mounted: dict[str, str], source: str
) -> None:
    await fill(api, mounted[source])
    targets = [name for name in NAMES if name != source]
    for target in targets:
        body = {"src_dir": mounted[source], "dst_dir": mounted[target], "names": ["src"]}
        answer = await api.post("/api/fs/copy", body)
        assert answer["code"] == 200, (target, answer)
    finished = await settle(api)
    assert finished and all(t.state == TaskState.SUCCEEDED for t in finished), [
        (t.name, t.error) for t in finished if t.state != TaskState.SUCCEEDED
    ]
    for target in targets:
        assert await download(api, f"{mounted[target]}/src/a.bin") == PAYLOAD, target
        assert await download(api, f"{mounted[target]}/src/sub/b.txt") == NOTE, target


@pytest.mark.parametrize("kind", [n for n in NAMES if n != "local"])
async def test_an_archive_on_a_remote_storage_lists_and_reads(
    api: Api, mounted: dict[str, str], kind: str
) -> None:
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("inner/note.txt", NOTE)
        archive.writestr("big.bin", PAYLOAD)
    path = f"{mounted[kind]}/pack.zip"
    assert (await put(api, path, packed.getvalue()))["code"] == 200
    listed = await api.post("/api/fs/archive/list", {"path": path, "inner_path": "/inner"})
    assert listed["code"] == 200, listed
    assert [o["name"] for o in listed["data"]["content"]] == ["note.txt"]
    sign = api.services.archive_signer.sign(path)
    params = {"inner": "/big.bin", "sign": sign}
    response = await api.client.get(
        f"/ae{quote(path)}", params=params, headers={"Range": "bytes=1000-1999"}
    )
    assert (response.status_code, response.content) == (206, PAYLOAD[1000:2000])
