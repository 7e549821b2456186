"""FTPS: explicit (AUTH TLS, PROT P) and implicit TLS with ftplib, mandatory TLS, bad settings."""

from __future__ import annotations

import ftplib
import io
import ssl
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
