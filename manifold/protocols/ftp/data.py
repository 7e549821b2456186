"""Data connections: passive listeners (PASV/EPSV) and the transfers run over them.

Each PASV or EPSV opens a fresh listener, on a port of ``ftp_pasv_port_map`` (tried
in random order) or one the system picks, protected by TLS when the client asked for
it with ``PROT P``, and taking only a connection from the control connection's
address (AList's ``enable_pasv_conn_ip_check``). A transfer runs beside the control
connection (so that ``ABOR`` can stop it), answers ``150`` when it starts and
``226`` when it ends; an error ends it with the error's reply, an abort with ``426``.
"""

from __future__ import annotations

import asyncio
import errno
import random
import ssl
from collections.abc import Awaitable, Callable

from aioftp import Connection, ThrottleStreamIO

from manifold.errors import ManifoldError
from manifold.protocols.ftp.ports import PortPair
from manifold.protocols.ftp.replies import reply_of

# How long a client has to make the data connection a transfer waits for.
DATA_CONNECT_SECONDS = 30.0
# Ports of the map tried before a PASV gives up (AList's find_pasv_port_attempts).
PORT_ATTEMPTS = 50

Work = Callable[[ThrottleStreamIO], Awaitable[None]]
Cleanup = Callable[[], Awaitable[None]]


class NoFreePort(Exception):
    """Every port of the map tried was taken."""


async def open_passive(
    connection: Connection, ports: list[PortPair], tls: ssl.SSLContext | None
) -> int:
    """Listen for the data connection of ``connection``; the port to tell the client."""
    close_passive(connection)

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("",)
        if connection.future.data_connection.done() or peer[0] != connection.client_host:
            writer.close()
            return
        connection.data_connection = ThrottleStreamIO(
            reader, writer, throttles=connection.command_connection.throttles
        )

    loop = asyncio.get_running_loop()

    def protocol() -> asyncio.StreamReaderProtocol:
        return asyncio.StreamReaderProtocol(DataReader(), accepted)

    host = connection.server_host
    if not ports:
        server = await loop.create_server(protocol, host, 0, ssl=tls)
        connection.passive_server = server
        port: int = server.sockets[0].getsockname()[1]
        return port
    for told, bound in random.sample(ports, min(len(ports), PORT_ATTEMPTS)):
        try:
            server = await loop.create_server(protocol, host, bound, ssl=tls)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            continue
        connection.passive_server = server
        return told
    raise NoFreePort()


class DataReader(asyncio.StreamReader):
    """A data connection's bytes, which stay readable to their end once the client
    has ended them: over TLS the client's close_notify is answered with ours, and a
    client that closed at once makes that write fail, which a plain reader would
    raise in place of the bytes still buffered (an upload cut short)."""

    ended = False

    def feed_eof(self) -> None:
        self.ended = True
        super().feed_eof()

    def set_exception(self, exc: Exception) -> None:
        if not self.ended:
            super().set_exception(exc)


def close_passive(connection: Connection) -> None:
    """Close the listener and any unused data connection of an earlier PASV."""
    if connection.future.passive_server.done():
        connection.passive_server.close()
        del connection.passive_server
    if connection.future.data_connection.done():
        connection.data_connection.close()
        del connection.data_connection


def start_transfer(connection: Connection, work: Work, cleanup: Cleanup) -> None:
    """Answer 150 and run ``work`` over the data connection beside the commands."""
    if not connection.future.passive_server.done():
        connection.response("425", "use PASV or EPSV first")
        task: asyncio.Task[bool] = asyncio.create_task(_cleaned(cleanup))
    else:
        connection.response("150", "opening data connection")
        task = asyncio.create_task(_transfer(connection, work, cleanup))
    connection.extra_workers.add(task)


async def _cleaned(cleanup: Cleanup) -> bool:
    await cleanup()
    return True


async def _transfer(connection: Connection, work: Work, cleanup: Cleanup) -> bool:
    reply: tuple[tuple[str, str], ...] = (("226", "transfer complete"),)
    stream: ThrottleStreamIO | None = None
    try:
        async with asyncio.timeout(DATA_CONNECT_SECONDS):
            await asyncio.shield(connection.future.data_connection)
        stream = connection.data_connection
        del connection.data_connection
        await work(stream)
        await _close(stream)
        stream = None
    except TimeoutError:
        reply = (("425", "no data connection was made"),)
    except ManifoldError as exc:
        reply = (reply_of(exc),)
    except (ConnectionError, ssl.SSLError):
        reply = (("426", "data connection closed; transfer aborted"),)
    except asyncio.CancelledError:
        reply = (("426", "transfer aborted"), ("226", "abort successful"))
    finally:
        if stream is not None:
            stream.close()
        # Before the reply, so that a client told the transfer ended finds what it left.
        await cleanup()
    for code, text in reply:
        connection.response(code, text)
    return True


async def _close(stream: ThrottleStreamIO) -> None:
    """Close the data connection once its bytes are sent (and, over TLS, the
    close_notify exchanged), so that 226 never arrives before the data's end."""
    stream.writer.close()
    try:
        async with asyncio.timeout(DATA_CONNECT_SECONDS):
            await stream.writer.wait_closed()
    except (TimeoutError, ConnectionError, ssl.SSLError):
        pass
