"""A real uvicorn server, started with the options ``manifold server`` uses."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn

from manifold.app import create_app
from manifold.container import Services
from manifold.server import uvicorn_config

STUCK = 120  # seconds after which a server that has not answered is taken as stuck


@asynccontextmanager
async def serving(services: Services, **overrides: Any) -> AsyncIterator[str]:
    """Serve ``services`` on a free loopback port; yields the base URL. ``overrides``
    are uvicorn options (``timeout_keep_alive``)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = create_app(services.config, services)
    options = {"log_level": "warning", "lifespan": "off", **overrides}
    config = uvicorn_config(app, services.config, **options)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 - uvicorn offers no event
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


async def exchange(url: str, request: bytes) -> bytes | None:
    """Send raw ``request`` bytes and read the answer until the server closes.

    ``None`` when the server reset the connection before answering anything. A server
    that keeps waiting for more (a head that never ends) fails the test, not hangs it.
    """
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    received = b""
    try:
        async with asyncio.timeout(STUCK):
            writer.write(request)
            await writer.drain()
            while chunk := await reader.read(1 << 16):
                received += chunk
    except ConnectionError:
        pass
    finally:
        writer.close()
    return received or None


class Connection:
    """One kept-alive HTTP/1.1 connection, a request at a time: its second and later
    requests of /api/me and public settings are the ones the HTTP protocol answers
    itself (``ManifoldApp.quick``)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def get(self, path: str, headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
        """The answer's headers (less its date) and body; it must be a 200."""
        lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        async with asyncio.timeout(STUCK):
            head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            status, *fields = head.strip().split("\r\n")
            assert status.startswith("HTTP/1.1 200"), status
            answer = {k.lower(): v for k, v in (f.split(": ", 1) for f in fields)}
            body = await self.reader.readexactly(int(answer["content-length"]))
        answer.pop("date")
        return answer, body

    async def closed_by_server(self) -> bool:
        """Whether the server closes the connection (it sends nothing more first)."""
        async with asyncio.timeout(STUCK):
            return await self.reader.read(1) == b""


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[Connection]:
    """A kept-alive connection to the server at ``url``; closed at the end."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        yield Connection(reader, writer)
    finally:
        writer.close()
