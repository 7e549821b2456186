"""An outside attack on every front end: a user held in ``/local/home`` tries each
spelling of a way out (``..`` plain and encoded, backslashes, a link out, absolute
Destination URLs, FTP CWD, SFTP realpath and extensions, S3 keys) to read the file
beside its root or to move its own files there. The secret's bytes never come back and
nothing outside the case folder changes."""

from __future__ import annotations

import base64
import contextlib
import ftplib
import io
from collections.abc import AsyncIterator

import asyncssh
import boto3
import httpx
import pytest
from botocore.config import Config as BotoConfig

from tests.protocols.behaviour_site import Site, live_site
from tests.protocols.perm_clients import S3_KEY_ID, S3_SECRET, blocking

SECRET = b"outside the root"
# Spellings of "the other/<case>/secret.txt beside my root", from the case folder.
ESCAPES = [
    "../../other/{case}/secret.txt",
    "%2e%2e/%2e%2e/other/{case}/secret.txt",
    "%252e%252e/%252e%252e/other/{case}/secret.txt",
    "..%2f..%2fother%2f{case}%2fsecret.txt",
    "..\\..\\other\\{case}\\secret.txt",
    "out/secret.txt",
    "out/../out/secret.txt",
    "./out//secret.txt",
]
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    async with live_site(tmp_path_factory.mktemp("attack")) as started:
        yield started


def outside(site: Site) -> dict[str, bytes | str | None]:
    return {k: v for k, v in site.snapshot().items() if not k.startswith("home/")}


def auth() -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(b"based:based-pw").decode()}


@pytest.mark.parametrize("spelling", ESCAPES)
async def test_webdav_and_the_api_never_read_outside(site: Site, spelling: str) -> None:
    case = f"web{ESCAPES.index(spelling)}"
    site.lay_out(case, "based")
    before = outside(site)
    path = f"/{case}/" + spelling.format(case=case)
    async with httpx.AsyncClient(base_url=site.ports.url, timeout=60) as http:
        token = (
            await http.post("/api/auth/login", json={"username": "based", "password": "based-pw"})
        ).json()["data"]["token"]
        got = await http.get("/dav" + path, headers=auth())
        assert SECRET not in got.content
        got = await http.get("/d" + path)
        assert SECRET not in got.content
        body = (
            await http.post("/api/fs/get", json={"path": path}, headers={"Authorization": token})
        ).text
        assert SECRET.decode() not in body
        moved = await http.request(
            "MOVE",
            f"/dav/{case}/f.txt",
            headers={
                **auth(),
                "Destination": f"{site.ports.url}/dav/{case}/" + spelling.format(case=case),
            },
        )
        assert moved.status_code >= 400
    assert outside(site) == before
    assert (site.disk / "home" / case / "f.txt").read_text() == "file f"


def ftp_tries(site: Site, case: str, spelling: str) -> list[bytes]:
    seen: list[bytes] = []
    with ftplib.FTP(timeout=60) as ftp:
        ftp.connect("127.0.0.1", site.ports.ftp)
        ftp.login("based", "based-pw")
        for command in (f"RETR /{case}/{spelling}", f"RETR {spelling}"):
            data = io.BytesIO()
            with contextlib.suppress(ftplib.error_perm):
                ftp.retrbinary(command, data.write)
            seen.append(data.getvalue())
        for step in ("..", "../..", "/../..", f"/{case}/out"):
            try:
                ftp.cwd(step)
                seen.append(ftp.pwd().encode())
                ftp.retrbinary("RETR secret.txt", (data := io.BytesIO()).write)
                seen.append(data.getvalue())
            except ftplib.error_perm:
                pass
        for command in (f"RNFR /{case}/f.txt", f"RNTO /{case}/{spelling}"):
            try:
                ftp.sendcmd(command)
            except ftplib.error_perm:
                break
    return seen


@pytest.mark.parametrize("spelling", ESCAPES)
async def test_ftp_never_reads_or_writes_outside(site: Site, spelling: str) -> None:
    case = f"ftp{ESCAPES.index(spelling)}"
    site.lay_out(case, "based")
    before = outside(site)
    seen = await blocking(ftp_tries, site, case, spelling.format(case=case))
    assert not any(SECRET in got for got in seen)
    assert outside(site) == before


@pytest.mark.parametrize("spelling", ESCAPES)
async def test_sftp_never_reads_or_writes_outside(site: Site, spelling: str) -> None:
    case = f"sftp{ESCAPES.index(spelling)}"
    site.lay_out(case, "based")
    before = outside(site)
    path = f"/{case}/" + spelling.format(case=case)
    async with (
        asyncssh.connect(
            "127.0.0.1",
            site.ports.sftp,
            username="based",
            password="based-pw",
            client_keys=None,
            known_hosts=None,
        ) as conn,
        conn.start_sftp_client() as sftp,
    ):
        with pytest.raises(asyncssh.SFTPError):
            async with sftp.open(path, "rb") as f:
                assert SECRET not in await f.read()
        real = await sftp.realpath(f"/{case}/../../..")
        assert real == "/"
        # A spelling that is a plain name here (SFTP decodes nothing) stays inside.
        for call in (sftp.copy, sftp.posix_rename, sftp.rename):
            with contextlib.suppress(asyncssh.SFTPError, OSError):
                await call(f"/{case}/f.txt", path)
        with pytest.raises(asyncssh.SFTPError):
            await sftp.statvfs("/etc")
    assert outside(site) == before


def s3_tries(site: Site, case: str, spelling: str) -> list[bytes]:
    s3 = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{site.ports.s3}",
        aws_access_key_id=S3_KEY_ID,
        aws_secret_access_key=S3_SECRET,
        region_name="us-east-1",
        config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    key = f"{case}/{spelling}"
    seen: list[bytes] = []
    for attempt in (
        lambda: s3.get_object(Bucket="home", Key=key)["Body"].read(),
        lambda: s3.put_object(Bucket="home", Key=key, Body=b"planted") and b"",
        lambda: (
            s3.copy_object(
                Bucket="home", Key=f"{case}/stolen.txt", CopySource={"Bucket": "home", "Key": key}
            )
            and s3.get_object(Bucket="home", Key=f"{case}/stolen.txt")["Body"].read()
        ),
        lambda: s3.delete_object(Bucket="home", Key=key) and b"",
    ):
        try:
            seen.append(attempt())
        except Exception:
            seen.append(b"")
    return seen


@pytest.mark.parametrize("spelling", ESCAPES)
async def test_s3_never_reads_or_writes_outside(site: Site, spelling: str) -> None:
    case = f"s3{ESCAPES.index(spelling)}"
    site.lay_out(case, "based")
    before = outside(site)
    seen = await blocking(s3_tries, site, case, spelling.format(case=case))
    assert not any(SECRET in got for got in seen)
    assert outside(site) == before
