"""A real uvicorn server, started with the options ``manifold server`` uses."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn

from manifold.app import create_app
from manifold.container import Services
from manifold.server import uvicorn_config

STUCK = 120  # seconds after which a server that has not answered is taken as stuck


@asynccontextmanager
async def serving(services: Services) -> AsyncIterator[str]:
    """Serve ``services`` on a free loopback port; yields the base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = create_app(services.config, services)
    config = uvicorn_config(app, services.config, log_level="warning", lifespan="off")
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
