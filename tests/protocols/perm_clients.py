"""One small client per front end (JSON API, WebDAV, SFTP, FTP, S3) with the same verbs,
for the permission table: each turns its protocol's refusals into ``Refused``.

``Refused.kind`` is ``denied`` (a permission or login refusal: 401/403, SFTP's
permission denied, FTP's 530 or a 550 that says so, S3's AccessDenied) or ``missing``
(not found: what a path that tried to leave a base path names inside it).
"""

from __future__ import annotations

import asyncio
import base64
import ftplib
import io
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import asyncssh
import boto3
import httpx
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

from manifold.app import start_s3
from manifold.container import Services
from manifold.protocols.ftp import start_ftp
from manifold.protocols.sftp import start_sftp
from tests.api.live_server import exchange, serving
from tests.protocols.sftp_helpers import keep_host_keys, reuse_host_keys

T = TypeVar("T")
TIMEOUT = 60
S3_KEY_ID = "perm-table-key"
S3_SECRET = "perm-table-secret-0123456789"
S3_BUCKET = "tree"
S3_ROOT = "/local"  # the bucket's folder
GUEST_PASSWORD = "guest-pw"
D = "{DAV:}"


class Refused(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Login:
    """Who connects: a user name (``guest`` for the guest), and for the guest the
    folder password it gives (the API sends it with each call, FTP as its login)."""

    name: str
    folder_password: str = ""

    @property
    def is_guest(self) -> bool:
        return self.name == "guest"

    @property
    def password(self) -> str:
        return GUEST_PASSWORD if self.is_guest else f"{self.name}-pw"


@dataclass(frozen=True, slots=True)
class Ports:
    url: str  # the main port: the API and /dav
    sftp: int
    ftp: int
    s3: int


class Client(Protocol):
    async def names(self, folder: str) -> list[str]: ...
    async def read(self, path: str) -> bytes: ...
    async def stat(self, path: str) -> None: ...
    async def write(self, path: str, data: bytes) -> None: ...
    async def mkdir(self, path: str) -> None: ...
    async def rename(self, src: str, dst: str) -> None: ...
    async def remove(self, path: str) -> None: ...
    async def close(self) -> None: ...


async def blocking(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(func, *args, **kwargs)


# --- JSON API -------------------------------------------------------------------------


class ApiClient:
    def __init__(self, http: httpx.AsyncClient, token: str, password: str) -> None:
        self.http = http
        self.token = token
        self.password = password

    @classmethod
    async def open(cls, ports: Ports, who: Login) -> ApiClient:
        http = httpx.AsyncClient(base_url=ports.url, timeout=TIMEOUT)
        token = ""
        if not who.is_guest:
            body = {"username": who.name, "password": who.password}
            answer = (await http.post("/api/auth/login", json=body)).json()
            if answer["code"] != 200:
                await http.aclose()
                raise Refused("denied", answer["message"])
            token = answer["data"]["token"]
        return cls(http, token, who.folder_password)

    async def _call(self, path: str, body: dict[str, Any]) -> Any:
        headers = {"Authorization": self.token} if self.token else {}
        answer = (await self.http.post(path, json=body, headers=headers)).json()
        return _api_data(answer)

    async def names(self, folder: str) -> list[str]:
        data = await self._call("/api/fs/list", {"path": folder, "password": self.password})
        return [o["name"] for o in data["content"] or []]

    async def read(self, path: str) -> bytes:
        data = await self._call("/api/fs/get", {"path": path, "password": self.password})
        return (await self.http.get(data["raw_url"])).content

    async def stat(self, path: str) -> None:
        await self._call("/api/fs/get", {"path": path, "password": self.password})

    async def write(self, path: str, data: bytes) -> None:
        headers = {"File-Path": quote(path), "Password": self.password}
        if self.token:
            headers["Authorization"] = self.token
        _api_data((await self.http.put("/api/fs/put", content=data, headers=headers)).json())

    async def mkdir(self, path: str) -> None:
        await self._call("/api/fs/mkdir", {"path": path})

    async def rename(self, src: str, dst: str) -> None:
        src_dir, _, name = src.rpartition("/")
        dst_dir, _, new = dst.rpartition("/")
        if src_dir == dst_dir:
            await self._call("/api/fs/rename", {"path": src, "name": new})
        else:
            body = {"src_dir": src_dir, "dst_dir": dst_dir, "names": [name]}
            await self._call("/api/fs/move", body)

    async def remove(self, path: str) -> None:
        folder, _, name = path.rpartition("/")
        await self._call("/api/fs/remove", {"dir": folder or "/", "names": [name]})

    async def close(self) -> None:
        await self.http.aclose()


def _api_data(answer: dict[str, Any]) -> Any:
    code, message = answer["code"], str(answer["message"])
    if code == 200:
        return answer["data"]
    if code in (401, 403):
        raise Refused("denied", message)
    if code == 404 or message.endswith("object not found"):
        raise Refused("missing", message)
    raise AssertionError(f"unexpected answer {answer}")


# --- WebDAV ---------------------------------------------------------------------------


class DavClient:
    def __init__(self, ports: Ports, who: Login) -> None:
        self.url = ports.url
        pair = base64.b64encode(f"{who.name}:{who.password}".encode()).decode()
        self.auth = {"Authorization": f"Basic {pair}"}
        self.http = httpx.AsyncClient(base_url=ports.url, timeout=TIMEOUT, headers=self.auth)

    @classmethod
    async def open(cls, ports: Ports, who: Login) -> DavClient:
        client = cls(ports, who)
        try:
            await client.send("PROPFIND", "/", headers={"Depth": "0"})
        except Refused:
            await client.close()
            raise
        return client

    async def send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        if "/../" in path:  # httpx would take the dots out of the URL before sending
            return await self.raw(method, path)
        answer = await self.http.request(method, "/dav" + quote(path, safe="/%"), **kw)
        _dav_status(answer.status_code, answer.text)
        return answer

    async def raw(self, method: str, path: str) -> httpx.Response:
        head = f"{method} /dav{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in self.auth.items())
        answer = await exchange(self.url, (head + "Content-Length: 0\r\n\r\n").encode())
        status = int((answer or b"HTTP/1.1 502").split(b" ", 2)[1])
        _dav_status(status, "")
        return httpx.Response(status)

    async def names(self, folder: str) -> list[str]:
        answer = await self.send("PROPFIND", folder, headers={"Depth": "1"})
        hrefs = [h.text or "" for h in ET.fromstring(answer.content).iter(D + "href")]
        own = "/dav" + quote(folder.rstrip("/"))
        return [
            httpx.URL(h).path.rstrip("/").rsplit("/", 1)[-1]
            for h in hrefs
            if httpx.URL(h).raw_path.decode().rstrip("/") != own
        ]

    async def read(self, path: str) -> bytes:
        return (await self.send("GET", path)).content

    async def stat(self, path: str) -> None:
        await self.send("PROPFIND", path, headers={"Depth": "0"})

    async def write(self, path: str, data: bytes) -> None:
        await self.send("PUT", path, content=data)

    async def mkdir(self, path: str) -> None:
        await self.send("MKCOL", path)

    async def rename(self, src: str, dst: str) -> None:
        await self.send("MOVE", src, headers={"Destination": f"{self.url}/dav{quote(dst)}"})

    async def remove(self, path: str) -> None:
        await self.send("DELETE", path)

    async def close(self) -> None:
        await self.http.aclose()


def _dav_status(status: int, text: str) -> None:
    if status in (401, 403):
        raise Refused("denied", f"{status} {text}")
    if status in (404, 409):
        raise Refused("missing", f"{status} {text}")
    if status >= 400:
        raise AssertionError(f"unexpected status {status} {text}")


# --- SFTP -----------------------------------------------------------------------------


class SftpClient:
    def __init__(self, conn: asyncssh.SSHClientConnection, sftp: asyncssh.SFTPClient) -> None:
        self.conn = conn
        self.sftp = sftp

    @classmethod
    async def open(cls, ports: Ports, who: Login) -> SftpClient:
        options: dict[str, Any] = {"client_keys": None, "known_hosts": None}
        if not who.is_guest:
            options["password"] = who.password
        try:
            conn = await asyncssh.connect("127.0.0.1", ports.sftp, username=who.name, **options)
        except asyncssh.PermissionDenied as exc:
            raise Refused("denied", str(exc)) from exc
        return cls(conn, await conn.start_sftp_client())

    async def _do(self, call: Any) -> Any:
        try:
            return await call
        except asyncssh.SFTPError as exc:
            if exc.code == asyncssh.FX_PERMISSION_DENIED:
                raise Refused("denied", exc.reason) from exc
            if exc.code == asyncssh.FX_NO_SUCH_FILE:
                raise Refused("missing", exc.reason) from exc
            raise

    async def names(self, folder: str) -> list[str]:
        found = await self._do(self.sftp.listdir(folder))
        return [n for n in found if n not in (".", "..")]

    async def read(self, path: str) -> bytes:
        async def whole() -> bytes:
            async with self.sftp.open(path, "rb") as f:
                data: bytes = await f.read()
                return data

        result: bytes = await self._do(whole())
        return result

    async def stat(self, path: str) -> None:
        await self._do(self.sftp.stat(path))

    async def write(self, path: str, data: bytes) -> None:
        async def put() -> None:
            async with self.sftp.open(path, "wb") as f:
                await f.write(data)

        await self._do(put())

    async def mkdir(self, path: str) -> None:
        await self._do(self.sftp.mkdir(path))

    async def rename(self, src: str, dst: str) -> None:
        await self._do(self.sftp.rename(src, dst))

    async def remove(self, path: str) -> None:
        await self._do(self.sftp.remove(path))

    async def close(self) -> None:
        self.sftp.exit()
        self.conn.close()
        await self.conn.wait_closed()


# --- FTP ------------------------------------------------------------------------------


class FtpClient:
    def __init__(self, ftp: ftplib.FTP) -> None:
        self.ftp = ftp

    @classmethod
    async def open(cls, ports: Ports, who: Login) -> FtpClient:
        name = "anonymous" if who.is_guest else who.name
        password = (who.folder_password or "me@example.com") if who.is_guest else who.password
        return cls(await _ftp_call(_ftp_login, ports.ftp, name, password))

    async def names(self, folder: str) -> list[str]:
        found: list[str] = await _ftp_call(self.ftp.nlst, folder)
        return [n.rsplit("/", 1)[-1] for n in found]

    async def read(self, path: str) -> bytes:
        parts: list[bytes] = []
        await _ftp_call(self.ftp.retrbinary, f"RETR {path}", parts.append)
        return b"".join(parts)

    async def stat(self, path: str) -> None:
        await _ftp_call(self.ftp.sendcmd, f"MDTM {path}")

    async def write(self, path: str, data: bytes) -> None:
        await _ftp_call(self.ftp.storbinary, f"STOR {path}", io.BytesIO(data))

    async def mkdir(self, path: str) -> None:
        await _ftp_call(self.ftp.mkd, path)

    async def rename(self, src: str, dst: str) -> None:
        await _ftp_call(self.ftp.rename, src, dst)

    async def remove(self, path: str) -> None:
        await _ftp_call(self.ftp.delete, path)

    async def close(self) -> None:
        await blocking(self.ftp.close)


def _ftp_login(port: int, name: str, password: str) -> ftplib.FTP:
    ftp = ftplib.FTP(timeout=TIMEOUT, encoding="utf-8")
    ftp.connect("127.0.0.1", port)
    try:
        ftp.login(name, password)
    except ftplib.Error:
        ftp.close()
        raise
    return ftp


async def _ftp_call(func: Callable[..., T], *args: Any) -> T:
    try:
        return await blocking(func, *args)
    except ftplib.error_perm as exc:
        text = str(exc)
        denied = text.startswith("530") or any(
            words in text for words in ("permission denied", "password is incorrect")
        )
        raise Refused("denied" if denied else "missing", text) from exc


# --- S3 -------------------------------------------------------------------------------


class S3Client:
    """The key pair: full rights, confined to the bucket ``tree`` (the folder ``/local``)."""

    def __init__(self, ports: Ports) -> None:
        config = BotoConfig(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            retries={"max_attempts": 1, "mode": "standard"},
        )
        self.s3 = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{ports.s3}",
            aws_access_key_id=S3_KEY_ID,
            aws_secret_access_key=S3_SECRET,
            region_name="us-east-1",
            config=config,
        )

    @staticmethod
    def key(path: str) -> str:
        assert path == S3_ROOT or path.startswith(S3_ROOT + "/"), path
        return path[len(S3_ROOT) :].lstrip("/")

    async def call(self, method: str, **kwargs: Any) -> Any:
        try:
            return await blocking(getattr(self.s3, method), Bucket=S3_BUCKET, **kwargs)
        except ClientError as exc:
            code = str(exc.response["Error"]["Code"])
            if code in ("AccessDenied", "403"):
                raise Refused("denied", code) from exc
            if code in ("NoSuchKey", "404"):
                raise Refused("missing", code) from exc
            raise

    async def names(self, folder: str) -> list[str]:
        prefix = self.key(folder) + "/" if self.key(folder) else ""
        found = await self.call("list_objects_v2", Prefix=prefix, Delimiter="/")
        keys = [o["Key"] for o in found.get("Contents", [])]
        keys += [p["Prefix"] for p in found.get("CommonPrefixes", [])]
        return [k[len(prefix) :].rstrip("/") for k in keys]

    async def read(self, path: str) -> bytes:
        got = await self.call("get_object", Key=self.key(path))
        data: bytes = await blocking(got["Body"].read)
        return data

    async def stat(self, path: str) -> None:
        await self.call("head_object", Key=self.key(path))

    async def write(self, path: str, data: bytes) -> None:
        await self.call("put_object", Key=self.key(path), Body=data)

    async def mkdir(self, path: str) -> None:
        await self.call("put_object", Key=self.key(path) + "/", Body=b"")

    async def rename(self, src: str, dst: str) -> None:
        source = {"Bucket": S3_BUCKET, "Key": self.key(src)}
        await self.call("copy_object", Key=self.key(dst), CopySource=source)
        await self.remove(src)

    async def remove(self, path: str) -> None:
        await self.call("delete_object", Key=self.key(path))

    async def close(self) -> None:
        self.s3.close()


async def connect(protocol: str, ports: Ports, who: Login) -> Client:
    """A client of ``protocol`` logged in as ``who``; ``Refused`` when the login is."""
    if protocol == "s3":
        return S3Client(ports)
    opener = {"api": ApiClient, "dav": DavClient, "sftp": SftpClient, "ftp": FtpClient}
    client: Client = await opener[protocol].open(ports, who)
    return client


@asynccontextmanager
async def listening(services: Services) -> AsyncIterator[Ports]:
    """The main port (API and /dav), SFTP, FTP and S3, each on a free port."""
    services.config.address = "127.0.0.1"
    reuse_host_keys(services.config.data_dir / "ssh")
    args = (services.ops, services.credentials, services.settings, services.config)
    async with AsyncExitStack() as stack, serving(services) as url:
        sftp = await start_sftp(*args, port=0)
        stack.push_async_callback(sftp.stop)
        keep_host_keys(services.config.data_dir / "ssh")
        ftp = await start_ftp(*args, 0)
        stack.push_async_callback(ftp.close)
        s3 = await start_s3(services, port=0)
        stack.push_async_callback(s3.stop)
        yield Ports(url, sftp.port, ftp.port, s3.port)
