"""A new name over 255 bytes (UTF-8) is refused before any back end sees it, with each
protocol's answer for a bad name, never a failure clients retry: WebDAV 400, FTP 553,
SFTP invalid filename (permission denied before version 6), S3 KeyTooLongError.
255 bytes still work, on a Local storage whose file system holds 255 at most."""

from __future__ import annotations

import ftplib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncssh
import pytest
from botocore.exceptions import ClientError

from manifold.container import Services
from manifold.errors import NameTooLong
from manifold.protocols.sftp.statuses import sftp_error
from tests.protocols.dav_helpers import Dav
from tests.protocols.ftp_helpers import blocking, live_ftp, plain, user
from tests.protocols.s3_helpers import BUCKET, s3_site
from tests.protocols.s3_helpers import blocking as s3_blocking
from tests.protocols.sftp_helpers import Live, add_user, live_manifold

LONG = "é" * 128  # 256 bytes in 128 characters
LONGEST = "é" * 127 + "x"  # 255 bytes
TOO_LONG = "file name too long: 256 bytes, at most 255"


def entries(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# --- WebDAV -------------------------------------------------------------------------


async def test_webdav_answers_400_to_a_long_new_name(dav: Dav, disk: Path) -> None:
    before = entries(disk)
    long = quote(LONG)
    assert (await dav("MKCOL", f"/local/{long}")).status_code == 400
    assert (await dav("MKCOL", f"/local/docs/{long}")).status_code == 400
    assert (await dav("PUT", f"/local/{long}", b"data")).status_code == 400
    for method in ("MOVE", "COPY"):
        moved = await dav(method, "/local/docs/readme.txt", Destination=f"/dav/local/docs/{long}")
        assert moved.status_code == 400, method
        assert TOO_LONG in moved.text
    assert entries(disk) == before


async def test_webdav_takes_a_name_of_255_bytes(dav: Dav, disk: Path) -> None:
    assert (await dav("MKCOL", f"/local/{quote(LONGEST)}")).status_code == 201
    assert (await dav("PUT", f"/local/{quote(LONGEST)}/{quote(LONGEST)}", b"d")).status_code == 201
    assert (disk / LONGEST / LONGEST).read_bytes() == b"d"


# --- FTP ----------------------------------------------------------------------------


@pytest.fixture
async def ftp_port(services: Services, disk: Path) -> AsyncIterator[int]:
    await user(services, "fred")
    async with live_ftp(services) as port:
        yield port


def ftp_answers(port: int) -> list[str]:
    """The replies to MKD, STOR and RNFR/RNTO of a long name, and a 255-byte MKD."""
    ftp = plain(port, "fred")
    ftp.encoding = "utf-8"
    ftp.cwd("/local/docs")
    answers = []
    for command in (
        lambda: ftp.mkd(LONG),
        lambda: ftp.storbinary(f"STOR {LONG}", _Bytes(b"data")),
        lambda: ftp.rename("readme.txt", LONG),
    ):
        try:
            command()
            answers.append("accepted")
        except ftplib.error_perm as exc:
            answers.append(str(exc))
    answers.append(ftp.mkd(LONGEST))
    ftp.quit()
    return answers


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self, size: int = -1) -> bytes:
        data, self._data = self._data, b""
        return data


async def test_ftp_answers_553_to_a_long_new_name(ftp_port: int, disk: Path) -> None:
    *refused, made = await blocking(ftp_answers, ftp_port)
    assert refused == [f"553 {TOO_LONG}"] * 3
    assert made == f"/local/docs/{LONGEST}"
    assert entries(disk / "docs") == {"readme.txt", LONGEST}


# --- SFTP ---------------------------------------------------------------------------


@pytest.fixture
async def live(services: Services, tmp_path: Path) -> AsyncIterator[Live]:
    await add_user(services, "sam")
    async with live_manifold(services, tmp_path / "disk") as started:
        yield started


async def sftp_refusals(sftp: asyncssh.SFTPClient) -> list[type[asyncssh.SFTPError]]:
    """What mkdir, an open for writing and a rename to a long name raise."""
    raised: list[type[asyncssh.SFTPError]] = []
    calls: list[Any] = [
        lambda: sftp.mkdir(f"/local/{LONG}"),
        lambda: sftp.open(f"/local/{LONG}", "wb"),
        lambda: sftp.open(f"/local/{LONG}", "ab"),
        lambda: sftp.rename("/local/docs/readme.txt", f"/local/docs/{LONG}"),
    ]
    for call in calls:
        with pytest.raises(asyncssh.SFTPError) as caught:
            await call()
        raised.append(type(caught.value))
        assert caught.value.reason == TOO_LONG
    return raised


async def test_sftp_refuses_a_long_new_name_as_permission_denied(live: Live) -> None:
    before = entries(live.disk)
    async with live.sftp("sam") as sftp:
        assert await sftp_refusals(sftp) == [asyncssh.SFTPPermissionDenied] * 4
        await sftp.mkdir(f"/local/{LONGEST}")
    assert entries(live.disk) == before | {LONGEST}


@pytest.mark.parametrize(
    ("version", "code"),
    [(3, asyncssh.FX_PERMISSION_DENIED), (5, asyncssh.FX_PERMISSION_DENIED), (6, 20)],
)
def test_sftp_names_the_bad_name_where_the_version_has_a_code(version: int, code: int) -> None:
    """The server speaks version 3, as every common client; a later version would hear
    SSH_FX_INVALID_FILENAME (20), which came with version 6."""
    answer = sftp_error(NameTooLong(LONG)).encode(version)
    assert int.from_bytes(answer[:4], "big") == code
    assert TOO_LONG.encode() in answer


# --- S3 -----------------------------------------------------------------------------


def s3_answers(client: Any) -> list[tuple[str, int]]:
    """The error code and status of each put or copy to a key with a long segment."""
    calls: list[Any] = [
        lambda: client.put_object(Bucket=BUCKET, Key=LONG, Body=b"data"),
        lambda: client.put_object(Bucket=BUCKET, Key=f"a/{LONG}/b.txt", Body=b"data"),
        lambda: client.put_object(Bucket=BUCKET, Key=f"{LONG}/", Body=b""),
        lambda: client.copy_object(Bucket=BUCKET, Key=LONG, CopySource=f"{BUCKET}/kept.txt"),
    ]
    answers = []
    for call in calls:
        with pytest.raises(ClientError) as caught:
            call()
        error = caught.value.response
        answers.append((error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]))
    return answers


async def test_s3_answers_key_too_long_for_a_long_segment(
    services: Services, tmp_path: Path
) -> None:
    async with s3_site(services, tmp_path / "root") as site:
        client = site.client()
        await s3_blocking(client.put_object, Bucket=BUCKET, Key="kept.txt", Body=b"kept")
        assert await s3_blocking(s3_answers, client) == [("KeyTooLongError", 400)] * 4
        await s3_blocking(client.put_object, Bucket=BUCKET, Key=f"a/{LONGEST}", Body=b"fits")
        assert (site.data / "a" / LONGEST).read_bytes() == b"fits"
        assert entries(site.data) == {"kept.txt", "a", f"a/{LONGEST}"}
