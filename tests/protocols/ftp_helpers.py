"""The FTP server of a live Manifold, and the users, mounts and certificates its tests share."""

from __future__ import annotations

import asyncio
import ftplib
import json
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from manifold.container import Services
from manifold.models import Perm, Storage
from manifold.protocols.ftp import start_ftp
from manifold.services.auth.users import UserInput
from tests.api.live_server import serving

T = TypeVar("T")
FTP_BITS = int(Perm.FTP_READ | Perm.FTP_MANAGE)
FILE_BITS = 0xF8  # write, rename, move, copy, remove: no hidden files, no password pass
ALL = FTP_BITS | FILE_BITS
TIMEOUT = 60


async def mount(services: Services, mount_path: str, root: Path) -> None:
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, mount_path, "Local", addition=addition))


async def user(services: Services, name: str, permission: int = ALL, **fields: Any) -> None:
    await services.users.create(UserInput(name, f"{name}-pw", permission=permission, **fields))


async def enable_guest(services: Services, permission: int) -> None:
    guest = await services.users.guest()
    update = UserInput("guest", "", role=guest.role, permission=permission)
    await services.users.update(guest.id, update)


@asynccontextmanager
async def live_ftp(services: Services) -> AsyncIterator[int]:
    """A live Manifold (HTTP and FTP); yields the FTP port."""
    async with serving(services):
        server = await start_ftp(
            services.ops, services.credentials, services.settings, services.config, 0
        )
        try:
            yield server.port
        finally:
            await server.close()


async def blocking(func: Callable[..., T], *args: Any) -> T:
    """Run a blocking client (ftplib, a subprocess) beside the server's loop."""
    return await asyncio.to_thread(func, *args)


def plain(port: int, name: str, password: str = "") -> ftplib.FTP:
    ftp = ftplib.FTP(timeout=TIMEOUT, encoding="utf-8")
    ftp.connect("127.0.0.1", port)
    ftp.login(name, password or f"{name}-pw")
    return ftp


def explicit(port: int, name: str, context: ssl.SSLContext) -> ftplib.FTP_TLS:
    ftp = ftplib.FTP_TLS(context=context, timeout=TIMEOUT, encoding="utf-8")
    ftp.connect("127.0.0.1", port)
    ftp.login(name, f"{name}-pw")  # AUTH TLS first, as FTP_TLS.login does
    ftp.prot_p()
    return ftp


class ImplicitFTP(ftplib.FTP_TLS):
    """ftplib speaks explicit TLS only; implicit TLS wraps the socket at connect."""

    def connect(
        self, host: str = "", port: int = 0, timeout: float = -999, source_address: Any = None
    ) -> str:
        self.host, self.port = host, port
        raw = socket.create_connection((host, port), TIMEOUT)
        self.sock = self.context.wrap_socket(raw, server_hostname=host)
        self.af = self.sock.family
        self.file = self.sock.makefile("r", encoding=self.encoding)
        self.welcome = self.getresp()
        return self.welcome


def reset(sock: socket.socket) -> None:
    """Close ``sock`` with a reset (RST) rather than an orderly end, as a client
    killed or giving a connection up does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def drop_control(ftp: ftplib.FTP) -> None:
    """Reset the control connection of ``ftp`` (its reader is closed first, else
    the socket would stay open behind it)."""
    ftp.file.close()
    reset(ftp.sock)


def read(ftp: ftplib.FTP, name: str, rest: int | None = None) -> bytes:
    parts: list[bytes] = []
    ftp.retrbinary(f"RETR {name}", parts.append, rest=rest)
    return b"".join(parts)


def trusting(cert: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cert))
    return context
