"""A server killed (SIGKILL) in the middle of an upload, by each protocol, and started
again on the same data folder: no partial file under a real name, no temporary left
behind or served, and the database sound."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ftplib
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncssh
import boto3
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config as BotoConfig
from botocore.credentials import Credentials

from manifold.paths import RESERVED_PREFIX
from tests.crashes.harness import (
    BUCKET,
    S3_KEY_ID,
    S3_SECRET,
    USER,
    USER_PASSWORD,
    Node,
    after_restart,
    arriving,
    running,
    served_by_name,
    wait_for,
)

SIZE = 8 << 20
SENT = 3 << 20  # what lands before the kill: more than a driver reads ahead
NAME = "big.bin"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with running(tmp_path) as server:
        yield server


def in_flight(node: Node) -> Path:
    """The temporary an upload is being written to, once a MiB of it has landed."""
    return arriving(node.root, f"{RESERVED_PREFIX}*", at_least=1 << 20)


def crash_mid_upload(node: Node, begin: Callable[[], object]) -> None:
    """Start an upload, kill the server once bytes landed, start it again; then every
    check of ``after_restart``."""
    held = begin()
    try:
        temp = in_flight(node)
        # Never served by its name, even while it is being written.
        assert not served_by_name(node, temp)
        node.kill()
    finally:
        with contextlib.suppress(Exception):
            held.close()  # type: ignore[attr-defined]
    node.start()
    after_restart(node, NAME, SIZE)
    assert not (node.root / NAME).exists()
    assert node.temp_areas() == []


def http_head(path: str, extra: str) -> str:
    """The head of a PUT to the main port of ``SIZE`` bytes, with ``extra`` headers."""
    return f"PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {SIZE}\r\n{extra}\r\n"


def api_put(node: Node) -> socket.socket:
    """A PUT /api/fs/put of ``SIZE`` bytes, ``SENT`` of them sent."""
    extra = f"Authorization: {node.token}\r\nFile-Path: /local/{NAME}\r\n"
    conn = node.raw(http_head("/api/fs/put", extra))
    conn.sendall(b"a" * SENT)
    return conn


def test_api_put(node: Node) -> None:
    crash_mid_upload(node, lambda: api_put(node))


def test_form_upload(node: Node) -> None:
    boundary = "crashboundary"
    part = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{NAME}\"\r\nContent-Type: application/octet-stream\r\n\r\n")  # fmt: skip

    def begin() -> socket.socket:
        extra = (f"Authorization: {node.token}\r\nFile-Path: /local/{NAME}\r\n"
                 f"Content-Type: multipart/form-data; boundary={boundary}\r\n")  # fmt: skip
        conn = node.raw(http_head("/api/fs/form", extra))
        conn.sendall(part.encode() + b"a" * SENT)
        return conn

    crash_mid_upload(node, begin)


def test_webdav_put(node: Node) -> None:
    def begin() -> socket.socket:
        auth = base64.b64encode(f"{USER}:{USER_PASSWORD}".encode()).decode()
        conn = node.raw(http_head(f"/dav/local/{NAME}", f"Authorization: Basic {auth}\r\n"))
        conn.sendall(b"a" * SENT)
        return conn

    crash_mid_upload(node, begin)


@contextlib.asynccontextmanager
async def sftp_client(node: Node) -> AsyncIterator[asyncssh.SFTPClient]:
    login = {"username": USER, "password": USER_PASSWORD, "known_hosts": None, "client_keys": None}
    connecting = asyncssh.connect("127.0.0.1", node.sftp_port, **login)
    async with connecting as ssh, ssh.start_sftp_client() as sftp:
        yield sftp


class Both:
    """An FTP session and its data connection, closed together."""

    def __init__(self, ftp: ftplib.FTP, data: socket.socket) -> None:
        self.ftp, self.data = ftp, data

    def close(self) -> None:
        self.data.close()
        self.ftp.close()


class Background:
    """A coroutine run on a loop of its own in a thread, for clients that are async."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._quietly(work)))
        self._thread.daemon = True
        self._thread.start()

    @staticmethod
    async def _quietly(work: Callable[[], Any]) -> None:
        with contextlib.suppress(Exception):
            await work()

    def close(self) -> None:
        self._thread.join(30)


def test_sftp_write(node: Node) -> None:
    async def write() -> None:
        async with sftp_client(node) as sftp, sftp.open(f"/local/{NAME}", "wb") as file:
            for _ in range(SENT >> 16):
                await file.write(b"a" * (1 << 16))
            await asyncio.sleep(3600)  # the server dies meanwhile

    crash_mid_upload(node, lambda: Background(write))


def test_ftp_stor(node: Node) -> None:
    def begin() -> Both:
        ftp = ftplib.FTP(timeout=60)
        ftp.connect("127.0.0.1", node.ftp_port)
        ftp.login(USER, USER_PASSWORD)
        ftp.cwd("/local")
        data = ftp.transfercmd(f"STOR {NAME}")
        data.sendall(b"a" * SENT)
        return Both(ftp, data)

    crash_mid_upload(node, begin)


def s3_client(node: Node) -> Any:
    config = BotoConfig(s3={"addressing_style": "path"}, signature_version="s3v4",
                        retries={"max_attempts": 1, "mode": "standard"})  # fmt: skip
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{node.s3_port}",
                        aws_access_key_id=S3_KEY_ID, aws_secret_access_key=S3_SECRET,
                        region_name="us-east-1", config=config)  # fmt: skip


def half_a_part(node: Node, upload_id: str, number: int) -> socket.socket:
    """A part whose head and first bytes are sent, the rest never."""
    url = (
        f"http://127.0.0.1:{node.s3_port}/{BUCKET}/{NAME}?partNumber={number}&uploadId={upload_id}"
    )
    request = AWSRequest("PUT", url, headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD",
                                              "Content-Length": str(SIZE)})  # fmt: skip
    SigV4Auth(Credentials(S3_KEY_ID, S3_SECRET), "s3", "us-east-1").add_auth(request)
    path = url.split(str(node.s3_port), 1)[1]
    headers = {"Host": f"127.0.0.1:{node.s3_port}", **request.headers}
    head = f"PUT {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    conn = socket.create_connection(("127.0.0.1", node.s3_port))
    conn.sendall(head.encode() + b"\r\n" + b"a" * SENT)
    return conn


def test_s3_multipart_upload(node: Node) -> None:
    buckets = json.dumps([{"name": BUCKET, "path": "/local"}])
    node.settings(s3_buckets=buckets, s3_access_key_id=S3_KEY_ID, s3_secret_access_key=S3_SECRET)
    s3 = s3_client(node)
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key=NAME)["UploadId"]
    part = b"p" * (5 << 20)
    etags = [s3.upload_part(Bucket=BUCKET, Key=NAME, UploadId=upload_id, PartNumber=n,
                            Body=part)["ETag"] for n in (1, 2)]  # fmt: skip
    conn = half_a_part(node, upload_id, 3)
    parts = node.data / "temp" / "s3-multipart" / upload_id
    with contextlib.closing(conn):
        wait_for(lambda: any(p.stat().st_size >= 1 << 20 for p in parts.glob(".*.partial")),
                 "the third part's first bytes on disk")  # fmt: skip
        node.kill()
    node.start()
    # Nothing became an object; the half-sent part is gone; the whole parts stay, so
    # the upload completes after the restart, as S3 keeps an upload until it ends.
    assert node.listed("/local") == []
    assert list(parts.glob(".*.partial")) == []
    s3 = s3_client(node)
    listed = s3.list_parts(Bucket=BUCKET, Key=NAME, UploadId=upload_id)["Parts"]
    assert [p["PartNumber"] for p in listed] == [1, 2]
    done = [{"PartNumber": n, "ETag": e} for n, e in zip((1, 2), etags, strict=True)]
    s3.complete_multipart_upload(Bucket=BUCKET, Key=NAME, UploadId=upload_id,
                                 MultipartUpload={"Parts": done})  # fmt: skip
    after_restart(node, NAME, 2 * len(part))
    assert (node.root / NAME).read_bytes() == part * 2


def test_a_temporary_is_served_by_no_protocol(node: Node) -> None:
    """While an upload is under way its temporary is found by no name, by any front end."""
    with contextlib.closing(api_put(node)):
        temp = in_flight(node)
        assert not served_by_name(node, temp)
        never_served(node, f"/local/{temp.name}")


def never_served(node: Node, path: str) -> None:
    """``path`` answers as a missing name through the API, /d, WebDAV, FTP and SFTP."""
    assert node.call("/api/fs/list", {"path": path})["code"] != 200
    token = {"Authorization": node.token}
    for url, options in ((f"{node.base}/d", {"headers": token}),
                         (f"{node.base}/dav", {"auth": (USER, USER_PASSWORD)})):  # fmt: skip
        missing = httpx.get(f"{url}/local/no-such-name", **options).status_code
        assert missing in (401, 403, 404)
        assert httpx.get(url + path, **options).status_code == missing
    with ftplib.FTP(timeout=60) as ftp:
        ftp.connect("127.0.0.1", node.ftp_port)
        ftp.login(USER, USER_PASSWORD)
        with pytest.raises(ftplib.error_perm, match=r"^550"):
            ftp.size(path)

    async def sftp_stat() -> None:
        async with sftp_client(node) as sftp:
            with pytest.raises(asyncssh.SFTPNoSuchFile):
                await sftp.stat(path)

    asyncio.run(sftp_stat())
