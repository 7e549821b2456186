"""FTPS: explicit (AUTH TLS, PROT P) and implicit TLS with ftplib, mandatory TLS, bad
settings; uploads by curl and lftp kept whole, and uploads whose TLS ends without its
close_notify refused."""

from __future__ import annotations

import ftplib
import hashlib
import io
import os
import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from manifold.config import ConfigError
from manifold.container import Services
from manifold.protocols.ftp import start_ftp
from tests.api.fs_helpers import make_tree
from tests.fixtures.certs import self_signed
from tests.protocols.ftp_helpers import (
    ImplicitFTP,
    blocking,
    explicit,
    live_ftp,
    mount,
    read,
    reset,
    trusting,
    user,
)


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "disk", {"docs/readme.txt": "hello world"})
    await mount(services, "/local", root)
    await user(services, "tess")
    return root


@pytest.fixture
async def cert(services: Services, tmp_path: Path) -> Path:
    cert, key = self_signed(tmp_path)
    await services.settings.save(
        [("ftp_tls_public_cert_path", str(cert)), ("ftp_tls_private_key_path", str(key))]
    )
    return cert


def explicit_session(port: int, context: ssl.SSLContext) -> dict[str, object]:
    ftp = explicit(port, "tess", context)
    seen: dict[str, object] = {"cipher": ftp.sock.cipher() is not None}
    ftp.cwd("/local")
    ftp.storbinary("STOR up.bin", io.BytesIO(b"0123456789" * 1000))
    seen["names"] = sorted(ftp.nlst())
    seen["range"] = read(ftp, "up.bin", rest=9990)
    ftp.rename("up.bin", "docs/up.bin")
    ftp.storbinary("APPE docs/up.bin", io.BytesIO(b"!"))
    seen["size"] = ftp.size("docs/up.bin")
    ftp.delete("docs/readme.txt")
    ftp.quit()
    return seen


async def test_explicit_tls(services: Services, disk: Path, cert: Path) -> None:
    async with live_ftp(services) as port:
        seen = await blocking(explicit_session, port, trusting(cert))
    assert seen["cipher"]
    assert seen["names"] == ["docs", "up.bin"]
    assert seen["range"] == b"0123456789"
    assert seen["size"] == 10001
    assert (disk / "docs" / "up.bin").read_bytes() == b"0123456789" * 1000 + b"!"
    assert not (disk / "docs" / "readme.txt").exists()


def implicit_session(port: int, context: ssl.SSLContext) -> tuple[str, bytes]:
    ftp = ImplicitFTP(context=context, timeout=60)
    welcome = ftp.connect("127.0.0.1", port)
    ftp.login("tess", "tess-pw", secure=False)  # the connection is already TLS
    ftp.prot_p()
    data = read(ftp, "/local/docs/readme.txt")
    ftp.quit()
    return welcome, data


async def test_implicit_tls(services: Services, disk: Path, cert: Path) -> None:
    await services.settings.save([("ftp_implicit_tls", "true")])
    async with live_ftp(services) as port:
        assert await blocking(implicit_session, port, trusting(cert)) == (
            "220 AList FTP Endpoint",
            b"hello world",
        )


def clear_login(port: int) -> str:
    with ftplib.FTP(timeout=60) as ftp:
        ftp.connect("127.0.0.1", port)
        try:
            ftp.login("tess", "tess-pw")
        except ftplib.error_perm as exc:
            return str(exc)
    return "logged in"


def clear_data_after_tls(port: int, context: ssl.SSLContext) -> str:
    with explicit(port, "tess", context) as ftp:
        return ftp.sendcmd("PROT C")


async def test_mandatory_tls_refuses_a_clear_login(
    services: Services, disk: Path, cert: Path
) -> None:
    await services.settings.save([("ftp_mandatory_tls", "true")])
    async with live_ftp(services) as port:
        assert (await blocking(clear_login, port)).startswith("530 TLS is required")
        with pytest.raises(ftplib.error_perm, match=r"^536"):
            await blocking(clear_data_after_tls, port, trusting(cert))
        seen = await blocking(explicit_session, port, trusting(cert))
    assert seen["size"] == 10001


async def test_auth_tls_without_a_certificate_is_refused(services: Services, disk: Path) -> None:
    async with live_ftp(services) as port:
        assert (await blocking(auth_tls, port)).startswith("502")


def auth_tls(port: int) -> str:
    with ftplib.FTP(timeout=60) as ftp:
        ftp.connect("127.0.0.1", port)
        try:
            return ftp.sendcmd("AUTH TLS")
        except ftplib.error_perm as exc:
            return str(exc)


@pytest.mark.parametrize(
    "setting",
    [
        ("ftp_pasv_port_map", "30000-30010:40000-40005"),
        ("ftp_pasv_port_map", "80-90"),
        ("ftp_pasv_port_map", "30000-x"),
        ("ftp_implicit_tls", "true"),
        ("ftp_tls_public_cert_path", "/nonexistent/cert.pem"),
    ],
)
async def test_wrong_settings_stop_the_start(services: Services, setting: tuple[str, str]) -> None:
    changes = [setting]
    if setting[0] == "ftp_tls_public_cert_path":
        changes.append(("ftp_tls_private_key_path", "/nonexistent/key.pem"))
    await services.settings.save(changes)
    with pytest.raises(ConfigError, match=r"ftp_|FTP"):
        await start_ftp(services.ops, services.credentials, services.settings, services.config, 0)


# --- real clients, and uploads cut short ------------------------------------------------

SIZES = (10 << 20, 1 << 20)
ROUNDS = 3
Client = Callable[[int, str, Path, str, Path], None]  # port, put or get, file, name, home


def run(command: list[str], home: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    done = subprocess.run(command, env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()


def curl(*options: str) -> Client:
    def transfer(port: int, verb: str, local: Path, name: str, home: Path) -> None:
        url = f"ftp://tess:tess-pw@127.0.0.1:{port}/local/{name}"
        way = "-T" if verb == "put" else "-o"
        run(["curl", "-sS", "--ftp-ssl-reqd", "-k", *options, way, str(local), url], home)

    return transfer


def lftp(port: int, verb: str, local: Path, name: str, home: Path) -> None:
    command = f"put {local} -o /local/{name}" if verb == "put" else f"get /local/{name} -o {local}"
    # No retries: a transfer that fails must fail the test, not be quietly sent again.
    script = (
        "set ssl:verify-certificate no; set ftp:ssl-force true; set ftp:ssl-protect-data true; "
        f"set net:max-retries 1; open -u tess,tess-pw -p {port} 127.0.0.1; {command}"
    )
    run(["lftp", "-c", script], home)


def installed(name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(shutil.which(name) is None, reason=f"{name} is not installed")


def digest(path: Path) -> tuple[int, str]:
    return path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "client",
    [
        pytest.param(curl(), id="curl", marks=installed("curl")),
        pytest.param(curl("--tls-max", "1.2"), id="curl-tls1.2", marks=installed("curl")),
        pytest.param(lftp, id="lftp", marks=installed("lftp")),
    ],
)
async def test_real_clients_store_every_byte_over_tls(
    services: Services, disk: Path, cert: Path, tmp_path: Path, client: Client
) -> None:
    """Clients that send their last bytes and close_notify, then close without waiting
    for the server's answer: every byte is kept, each time."""
    sources = {size: tmp_path / f"source-{size}.bin" for size in SIZES}
    for size, source in sources.items():
        source.write_bytes(os.urandom(size))
    async with live_ftp(services) as port:
        for turn in range(ROUNDS):
            for size, source in sources.items():
                name = f"up-{size}-{turn}.bin"
                await blocking(client, port, "put", source, name, tmp_path)
                assert digest(disk / name) == digest(source), name
        back = tmp_path / "back.bin"
        await blocking(client, port, "get", back, f"up-{SIZES[0]}-0.bin", tmp_path)
    assert digest(back) == digest(sources[SIZES[0]])


def cut_upload(port: int, context: ssl.SSLContext, how: str) -> tuple[str, str]:
    """An upload whose data connection ends without the client's close_notify: its
    TCP connection ended in order (``fin``), or reset (``rst``)."""
    with explicit(port, "tess", context) as ftp:
        ftp.voidcmd("TYPE I")
        conn = ftp.transfercmd(f"STOR /local/cut-{how}.bin")
        conn.sendall(os.urandom(1 << 20))
        if how == "fin":
            conn.shutdown(socket.SHUT_WR)  # on a TLS socket: the TCP end, no close_notify
        else:
            reset(conn)
        try:
            reply = ftp.getresp()
        except ftplib.Error as exc:
            reply = str(exc)
        conn.close()
        return reply, ftp.voidcmd("NOOP")


@pytest.mark.parametrize("how", ["fin", "rst"])
async def test_an_upload_whose_tls_is_cut_short_leaves_nothing(
    services: Services, disk: Path, cert: Path, how: str
) -> None:
    async with live_ftp(services) as port:
        reply, after = await blocking(cut_upload, port, trusting(cert), how)
    assert reply.startswith("426"), reply
    assert after.startswith("200")
    assert not (disk / f"cut-{how}.bin").exists()
