"""Manifold's tree over FTP and FTPS, on its own port (``ftp_port``), as AList serves it.

``start_ftp`` reads the FTP settings (public host, passive ports, TLS), refusing to
start on a wrong one, and listens on ``address``:``ftp_port``; ``FtpServer.close``
ends every connection.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl

from manifold.concurrency import DISK_POOL, run_in
from manifold.config import Config, ConfigError
from manifold.protocols.ftp.ports import parse_port_map
from manifold.protocols.ftp.server import FtpOptions, FtpServer
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.credentials import Credentials
from manifold.services.fs.ops import GuardedOps

__all__ = ["FtpOptions", "FtpServer", "start_ftp"]


async def start_ftp(
    ops: GuardedOps,
    credentials: Credentials,
    settings: SettingsService,
    config: Config,
    port: int | None = None,
) -> FtpServer:
    """The FTP server listening on ``port`` (else the ``ftp_port`` config key)."""
    server = FtpServer(ops, credentials, await read_options(settings))
    await server.start(config.address, config.ftp_port if port is None else port)
    return server


async def read_options(settings: SettingsService) -> FtpOptions:
    mandatory = settings.get_bool("ftp_mandatory_tls")
    implicit = settings.get_bool("ftp_implicit_tls")
    key = settings.get("ftp_tls_private_key_path")
    cert = settings.get("ftp_tls_public_cert_path")
    tls = None
    if key and cert:
        tls = await run_in(DISK_POOL, _tls_context, cert, key)
    elif mandatory or implicit:
        raise ConfigError(
            "FTP over TLS is asked for (ftp_mandatory_tls or ftp_implicit_tls) but "
            "ftp_tls_public_cert_path and ftp_tls_private_key_path are not both set"
        )
    return FtpOptions(
        public_host=await _ipv4(settings.get("ftp_public_host").strip()),
        ports=parse_port_map(settings.get("ftp_pasv_port_map")),
        tls=tls,
        mandatory_tls=mandatory,
        implicit_tls=implicit,
    )


def _tls_context(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the FTP TLS certificate or key: {exc}") from exc
    return context


async def _ipv4(host: str) -> str:
    """``ftp_public_host`` as an IPv4 address (a name is resolved once, at start)."""
    if not host:
        return ""
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    try:
        return await run_in(DISK_POOL, socket.gethostbyname, host)
    except OSError as exc:
        raise ConfigError(f"ftp_public_host {host!r} does not resolve: {exc}") from exc
