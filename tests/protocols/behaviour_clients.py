"""One client per front end (JSON API, WebDAV, SFTP, FTP, FTPS, S3) with the same verbs,
for the behaviour table: each answers with what its protocol said (``Answer.native``) and
what that can mean in the table's words (``Answer.means``).

The words: ``ok``, ``exists`` (a taken name), ``overlap`` (a destination that is its
source, lies inside it or holds it), ``denied``, ``bad-name``, ``missing``,
``missing-parent``, ``not-empty``, ``locked``, ``unsupported`` and ``server-error`` (a 5xx
or an internal error, which no expectation ever names). A protocol whose answer is
coarse means several: SFTP's failure is ``exists`` or ``overlap``, S3's 4xx any refusal
of the name or place, WebDAV's 409 ``overlap`` or ``missing-parent``.
"""

from __future__ import annotations

import base64
import ftplib
import io
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import asyncssh
import boto3
import httpx
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

from tests.protocols.perm_clients import S3_KEY_ID, S3_SECRET, TIMEOUT, Ports, blocking

REFUSALS = frozenset({"exists", "overlap", "bad-name"})
OVERLAP = re.compile(r"subfolder of the source|holds the source|source itself|inside itself")


@dataclass(frozen=True, slots=True)
class Answer:
    native: str  # what the protocol said, for the report
    means: frozenset[str]


def answer(native: str, *means: str) -> Answer:
    return Answer(native, frozenset(means))


OK = answer("ok", "ok")


class Verbs(Protocol):
    async def mkdir(self, path: str) -> Answer: ...
    async def upload(self, path: str, data: bytes, overwrite: bool) -> Answer: ...
    async def rename(self, src: str, dst: str, overwrite: bool) -> Answer: ...
    async def move(self, src: str, dst: str, overwrite: bool) -> Answer: ...
    async def copy(self, src: str, dst: str, overwrite: bool) -> Answer: ...
    async def remove(self, path: str, folder: bool) -> Answer: ...
    async def lock(self, path: str) -> Answer: ...
    async def close(self) -> None: ...


def password_of(name: str) -> str:
    return f"{name}-pw"


# --- JSON API -------------------------------------------------------------------------


class ApiVerbs:
    def __init__(self, http: httpx.AsyncClient, token: str) -> None:
        self.http = http
        self.headers = {"Authorization": token}

    @classmethod
    async def open(cls, ports: Ports, name: str) -> ApiVerbs:
        http = httpx.AsyncClient(base_url=ports.url, timeout=TIMEOUT)
        body = {"username": name, "password": password_of(name)}
        token = (await http.post("/api/auth/login", json=body)).json()["data"]["token"]
        return cls(http, token)

    async def _post(self, path: str, body: dict[str, Any]) -> Answer:
        return api_answer(await self.http.post(path, json=body, headers=self.headers))

    async def mkdir(self, path: str) -> Answer:
        return await self._post("/api/fs/mkdir", {"path": path})

    async def upload(self, path: str, data: bytes, overwrite: bool) -> Answer:
        headers = {**self.headers, "File-Path": quote(path)}
        if not overwrite:
            headers["Overwrite"] = "false"
        return api_answer(await self.http.put("/api/fs/put", content=data, headers=headers))

    async def rename(self, src: str, dst: str, overwrite: bool) -> Answer:
        (src_dir, _), (dst_dir, name) = src.rsplit("/", 1), dst.rsplit("/", 1)
        assert src_dir == dst_dir, "the API renames within a folder"
        return await self._post(
            "/api/fs/rename", {"path": src, "name": name, "overwrite": overwrite}
        )

    async def move(self, src: str, dst: str, overwrite: bool) -> Answer:
        return await self._post("/api/fs/move", _pair(src, dst, overwrite))

    async def copy(self, src: str, dst: str, overwrite: bool) -> Answer:
        return await self._post("/api/fs/copy", _pair(src, dst, overwrite))

    async def remove(self, path: str, folder: bool) -> Answer:
        parent, name = path.rsplit("/", 1)
        return await self._post("/api/fs/remove", {"dir": parent, "names": [name]})

    async def lock(self, path: str) -> Answer:
        raise AssertionError("the API has no locks")

    async def close(self) -> None:
        await self.http.aclose()


def _pair(src: str, dst: str, overwrite: bool) -> dict[str, Any]:
    """AList's move and copy keep the name: ``dst`` is ``dst_dir`` and that name."""
    (src_dir, name), (dst_dir, new_name) = src.rsplit("/", 1), dst.rsplit("/", 1)
    assert name == new_name, "the API moves and copies under the same name"
    return {"src_dir": src_dir, "dst_dir": dst_dir, "names": [name], "overwrite": overwrite}


def api_answer(response: httpx.Response) -> Answer:
    status = response.status_code
    if status != 200:
        return answer(f"HTTP {status}", "server-error" if status >= 500 else f"http-{status}")
    body = response.json()
    code, message = body["code"], str(body["message"])
    native = f"{code} {message}"
    if code == 200:
        return answer(native, "ok")
    if code == 400:
        return answer(native, "bad-name")
    if code in (401, 403):
        return answer(native, "exists" if message.endswith("exists") else "denied")
    if code == 404:
        return answer(native, "missing")
    if code == 500:
        return answer(native, _api_500(message))
    return answer(native, f"code-{code}")


def _api_500(message: str) -> str:
    """AList answers many refusals with 500 and a known message; any other is a failure."""
    if OVERLAP.search(message):
        return "overlap"
    if "parent folder not found" in message:
        return "missing-parent"
    if message.endswith("object not found"):
        return "missing"
    if message.endswith(("already exists", "exists")):
        return "exists"
    return "server-error"


# --- WebDAV ---------------------------------------------------------------------------

LOCKINFO = (
    b'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:">'
    b"<D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype>"
    b"<D:owner>table</D:owner></D:lockinfo>"
)


class DavVerbs:
    def __init__(self, ports: Ports, name: str) -> None:
        self.url = ports.url
        pair = base64.b64encode(f"{name}:{password_of(name)}".encode()).decode()
        headers = {"Authorization": f"Basic {pair}"}
        self.http = httpx.AsyncClient(base_url=ports.url, timeout=TIMEOUT, headers=headers)

    @classmethod
    async def open(cls, ports: Ports, name: str) -> DavVerbs:
        return cls(ports, name)

    async def _send(self, method: str, path: str, **kw: Any) -> Answer:
        response = await self.http.request(method, "/dav" + quote(path), **kw)
        return dav_answer(response.status_code, response.text)

    def _transfer(self, method: str, src: str, dst: str, overwrite: bool) -> Awaitable[Answer]:
        destination = f"{self.url}/dav{quote(dst)}"
        headers = {"Destination": destination, "Overwrite": "T" if overwrite else "F"}
        return self._send(method, src, headers=headers)

    async def mkdir(self, path: str) -> Answer:
        return await self._send("MKCOL", path)

    async def upload(self, path: str, data: bytes, overwrite: bool) -> Answer:
        assert overwrite, "a PUT replaces"
        return await self._send("PUT", path, content=data)

    async def rename(self, src: str, dst: str, overwrite: bool) -> Answer:
        return await self._transfer("MOVE", src, dst, overwrite)

    async def move(self, src: str, dst: str, overwrite: bool) -> Answer:
        return await self._transfer("MOVE", src, dst, overwrite)

    async def copy(self, src: str, dst: str, overwrite: bool) -> Answer:
        return await self._transfer("COPY", src, dst, overwrite)

    async def remove(self, path: str, folder: bool) -> Answer:
        return await self._send("DELETE", path)

    async def lock(self, path: str) -> Answer:
        headers = {"Depth": "0", "Timeout": "Second-600", "Content-Type": "application/xml"}
        return await self._send("LOCK", path, headers=headers, content=LOCKINFO)

    async def close(self) -> None:
        await self.http.aclose()


DAV_MEANS = {
    400: ("bad-name",),
    401: ("denied",),
    403: ("denied",),
    404: ("missing",),
    405: ("exists",),  # MKCOL on a taken name, PUT on a folder
    409: ("overlap", "missing-parent"),
    412: ("exists",),  # Overwrite: F
    423: ("locked",),
    501: ("unsupported",),
}


def dav_answer(status: int, text: str) -> Answer:
    native = f"{status} {' '.join(text.split())[:120]}".strip()
    if status < 300:
        return answer(native, "ok")
    if status >= 500 and status != 501:
        return answer(native, "server-error")
    return answer(native, *DAV_MEANS.get(status, (f"http-{status}",)))


# --- SFTP -----------------------------------------------------------------------------


class SftpVerbs:
    def __init__(self, conn: asyncssh.SSHClientConnection, sftp: asyncssh.SFTPClient) -> None:
        self.conn = conn
        self.sftp = sftp

    @classmethod
    async def open(cls, ports: Ports, name: str) -> SftpVerbs:
        options: dict[str, Any] = {"client_keys": None, "known_hosts": None}
        conn = await asyncssh.connect(
            "127.0.0.1", ports.sftp, username=name, password=password_of(name), **options
        )
        # Version 3, as OpenSSH's sftp and most clients speak it.
        return cls(conn, await conn.start_sftp_client())

    @staticmethod
    async def _do(call: Awaitable[object]) -> Answer:
        try:
            await call
        except asyncssh.SFTPError as exc:
            return sftp_answer(exc.code, str(exc.reason))
        return OK

    async def mkdir(self, path: str) -> Answer:
        return await self._do(self.sftp.mkdir(path))

    async def upload(self, path: str, data: bytes, overwrite: bool) -> Answer:
        assert overwrite, "an open with truncate replaces"

        async def put() -> None:
            async with self.sftp.open(path, "wb") as f:
                await f.write(data)

        return await self._do(put())

    async def rename(self, src: str, dst: str, overwrite: bool) -> Answer:
        if overwrite:
            return await self._do(self.sftp.posix_rename(src, dst))
        return await self._do(self.sftp.rename(src, dst))

    async def move(self, src: str, dst: str, overwrite: bool) -> Answer:
        return await self.rename(src, dst, overwrite)

    async def copy(self, src: str, dst: str, overwrite: bool) -> Answer:
        raise AssertionError("SFTP has no copy here")

    async def remove(self, path: str, folder: bool) -> Answer:
        return await self._do(self.sftp.rmdir(path) if folder else self.sftp.remove(path))

    async def lock(self, path: str) -> Answer:
        raise AssertionError("SFTP has no locks")

    async def close(self) -> None:
        self.sftp.exit()
        self.conn.close()
        await self.conn.wait_closed()


SFTP_MEANS = {
    asyncssh.FX_PERMISSION_DENIED: ("denied", "bad-name"),  # v3 has no invalid-filename
    asyncssh.FX_INVALID_FILENAME: ("bad-name",),
    asyncssh.FX_NO_SUCH_FILE: ("missing", "missing-parent"),
    asyncssh.FX_FILE_ALREADY_EXISTS: ("exists",),
    asyncssh.FX_OP_UNSUPPORTED: ("unsupported",),
}


def sftp_answer(code: int, reason: str) -> Answer:
    native = f"SFTP {code} {reason}"
    if code != asyncssh.FX_FAILURE:
        return answer(native, *SFTP_MEANS.get(code, (f"sftp-{code}",)))
    if reason.startswith("Uncaught exception") or reason == "internal error":
        return answer(native, "server-error")
    if "not empty" in reason:
        return answer(native, "not-empty")
    return answer(native, "exists", "overlap")


# --- FTP and FTPS -----------------------------------------------------------------------


class FtpVerbs:
    def __init__(self, ftp: ftplib.FTP) -> None:
        self.ftp = ftp

    @classmethod
    async def open(cls, ports: Ports, name: str, tls: ssl.SSLContext | None) -> FtpVerbs:
        return cls(await blocking(_ftp_login, ports.ftp, name, tls))

    async def _do(self, func: Callable[..., object], *args: Any) -> Answer:
        try:
            await blocking(func, *args)
        except ftplib.Error as exc:
            return ftp_answer(str(exc))
        return OK

    async def mkdir(self, path: str) -> Answer:
        return await self._do(self.ftp.mkd, path)

    async def upload(self, path: str, data: bytes, overwrite: bool) -> Answer:
        assert overwrite, "a STOR replaces"
        return await self._do(self.ftp.storbinary, f"STOR {path}", io.BytesIO(data))

    async def rename(self, src: str, dst: str, overwrite: bool) -> Answer:
        assert overwrite, "an RNTO replaces"
        return await self._do(self.ftp.rename, src, dst)

    async def move(self, src: str, dst: str, overwrite: bool) -> Answer:
        return await self.rename(src, dst, overwrite)

    async def copy(self, src: str, dst: str, overwrite: bool) -> Answer:
        raise AssertionError("FTP has no copy")

    async def remove(self, path: str, folder: bool) -> Answer:
        return await self._do(self.ftp.rmd if folder else self.ftp.delete, path)

    async def lock(self, path: str) -> Answer:
        raise AssertionError("FTP has no locks")

    async def close(self) -> None:
        await blocking(self.ftp.close)


def _ftp_login(port: int, name: str, tls: ssl.SSLContext | None) -> ftplib.FTP:
    ftp: ftplib.FTP
    if tls is None:
        ftp = ftplib.FTP(timeout=TIMEOUT, encoding="utf-8")
    else:
        ftp = ftplib.FTP_TLS(context=tls, timeout=TIMEOUT, encoding="utf-8")
    ftp.connect("127.0.0.1", port)
    ftp.login(name, password_of(name))  # FTP_TLS sends AUTH TLS first
    if isinstance(ftp, ftplib.FTP_TLS):
        ftp.prot_p()
    return ftp


def ftp_answer(text: str) -> Answer:
    code, lower = text[:3], text.lower()
    if code == "530":
        return answer(text, "denied")
    if code == "553":
        return answer(text, "bad-name")
    if code == "521":
        return answer(text, "exists")
    if code.startswith("4"):
        return answer(text, "server-error")
    if code != "550":
        return answer(text, f"ftp-{code}")
    if any(w in lower for w in ("permission denied", "no permission", "relative path")):
        return answer(text, "denied")
    if "not found" in lower or "no such" in lower:
        return answer(text, "missing", "missing-parent")
    if "not empty" in lower:
        return answer(text, "not-empty")
    return answer(text, "exists", "overlap")


# --- S3 -------------------------------------------------------------------------------


class S3Verbs:
    """The key pair, on one bucket; paths are keys."""

    def __init__(self, ports: Ports, bucket: str) -> None:
        config = BotoConfig(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            retries={"max_attempts": 1, "mode": "standard"},
        )
        self.bucket = bucket
        self.s3 = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{ports.s3}",
            aws_access_key_id=S3_KEY_ID,
            aws_secret_access_key=S3_SECRET,
            region_name="us-east-1",
            config=config,
        )

    async def _call(self, method: str, **kwargs: Any) -> Answer:
        try:
            await blocking(getattr(self.s3, method), Bucket=self.bucket, **kwargs)
        except ClientError as exc:
            error = exc.response["Error"]
            status = int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
            return s3_answer(status, str(error.get("Code")), str(error.get("Message")))
        return OK

    async def mkdir(self, path: str) -> Answer:
        raise AssertionError("S3 has no folders to make")

    async def upload(self, path: str, data: bytes, overwrite: bool) -> Answer:
        assert overwrite, "a PutObject replaces"
        return await self._call("put_object", Key=path, Body=data)

    async def rename(self, src: str, dst: str, overwrite: bool) -> Answer:
        raise AssertionError("S3 has no rename")

    async def move(self, src: str, dst: str, overwrite: bool) -> Answer:
        raise AssertionError("S3 has no move")

    async def copy(self, src: str, dst: str, overwrite: bool) -> Answer:
        assert overwrite, "a CopyObject replaces"
        source = {"Bucket": self.bucket, "Key": src}
        return await self._call("copy_object", Key=dst, CopySource=source)

    async def remove(self, path: str, folder: bool) -> Answer:
        return await self._call("delete_object", Key=path + "/" if folder else path)

    async def lock(self, path: str) -> Answer:
        raise AssertionError("S3 has no locks")

    async def close(self) -> None:
        self.s3.close()


def s3_answer(status: int, code: str, message: str) -> Answer:
    native = f"{status} {code} {message}"
    if status >= 500:
        return answer(native, "server-error")
    if code == "AccessDenied":
        return answer(native, "denied")
    if code in ("NoSuchKey", "NoSuchBucket"):
        return answer(native, "missing")
    return answer(native, *REFUSALS)  # "an error 4xx": S3 has no finer word


async def open_verbs(
    protocol: str, ports: Ports, name: str, tls: ssl.SSLContext, bucket: str
) -> Verbs:
    """A client of ``protocol`` logged in as ``name`` (S3: the key pair on ``bucket``)."""
    if protocol == "s3":
        return S3Verbs(ports, bucket)
    if protocol in ("ftp", "ftps"):
        return await FtpVerbs.open(ports, name, tls if protocol == "ftps" else None)
    opener = {"api": ApiVerbs, "dav": DavVerbs, "sftp": SftpVerbs}[protocol]
    verbs: Verbs = await opener.open(ports, name)
    return verbs
