"""Data connections: passive listeners (PASV/EPSV) and the transfers run over them.

Each PASV or EPSV opens a fresh listener, on a port of ``ftp_pasv_port_map`` (tried
in random order) or one the system picks, protected by TLS when the client asked for
it with ``PROT P``, and taking only a connection from the control connection's
address (AList's ``enable_pasv_conn_ip_check``). A transfer runs beside the control
connection (so that ``ABOR`` can stop it), answers ``150`` when it starts and
``226`` when it ends; an error ends it with the error's reply. A transfer is complete
only when every byte went through and the data connection ended cleanly (see
``channel``); one aborted (``ABOR``, a reset, TLS cut short, the control connection
gone) answers ``426``, is logged in one line, and an upload's file is given up.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import random
import ssl
from collections.abc import Awaitable, Callable

from aioftp import Connection

from manifold.errors import ManifoldError
from manifold.protocols.ftp.channel import DataChannel
from manifold.protocols.ftp.ports import PortPair
from manifold.protocols.ftp.replies import reply_of

log = logging.getLogger("manifold.ftp")

# How long a client has to make the data connection a transfer waits for (and,
# over TLS, to complete its handshake).
DATA_CONNECT_SECONDS = 30.0
# Ports of the map tried before a PASV gives up (AList's find_pasv_port_attempts).
PORT_ATTEMPTS = 50

Work = Callable[[DataChannel], Awaitable[None]]
Cleanup = Callable[[], Awaitable[None]]
Replies = tuple[tuple[str, str], ...]
DONE: Replies = (("226", "transfer complete"),)
CUT: Replies = (("426", "data connection closed; transfer aborted"),)
ABORTED: Replies = (("426", "transfer aborted"), ("226", "abort successful"))


class NoFreePort(Exception):
    """Every port of the map tried was taken."""


class NotConnected(Exception):
    """The data connection never came, or its TLS handshake failed."""


async def open_passive(
    connection: Connection, ports: list[PortPair], tls: ssl.SSLContext | None
) -> int:
    """Listen for the data connection of ``connection``; the port to tell the client."""
    close_passive(connection)

    def accepted(channel: DataChannel) -> None:
        if connection.future.data_connection.done() or channel.peer_host != connection.client_host:
            channel.close()
            return
        connection.data_connection = channel

    loop = asyncio.get_running_loop()

    def protocol() -> DataChannel:
        return DataChannel(tls, accepted)

    host = connection.server_host
    if not ports:
        server = await loop.create_server(protocol, host, 0)
        connection.passive_server = server
        port: int = server.sockets[0].getsockname()[1]
        return port
    for told, bound in random.sample(ports, min(len(ports), PORT_ATTEMPTS)):
        try:
            server = await loop.create_server(protocol, host, bound)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            continue
        connection.passive_server = server
        return told
    raise NoFreePort()


def close_passive(connection: Connection) -> None:
    """Close the listener and any unused data connection of an earlier PASV."""
    if connection.future.passive_server.done():
        connection.passive_server.close()
        del connection.passive_server
    if connection.future.data_connection.done():
        connection.data_connection.close()
        del connection.data_connection


def start_transfer(connection: Connection, what: str, work: Work, cleanup: Cleanup) -> None:
    """Answer 150 and run ``work`` over the data connection beside the commands;
    ``what`` (the command) names the transfer in the log."""
    if not connection.future.passive_server.done():
        connection.response("425", "use PASV or EPSV first")
        task: asyncio.Task[bool] = asyncio.create_task(_cleaned(cleanup))
    else:
        connection.response("150", "opening data connection")
        task = asyncio.create_task(_transfer(connection, what, work, cleanup))
    connection.extra_workers.add(task)


async def _cleaned(cleanup: Cleanup) -> bool:
    await cleanup()
    return True


async def _transfer(connection: Connection, what: str, work: Work, cleanup: Cleanup) -> bool:
    channel: DataChannel | None = None
    try:
        channel = await _connected(connection)
        await _opened(channel)
        await work(channel)
        await channel.finish()
        reply = DONE
    except NotConnected as exc:
        reply = (("425", str(exc)),)
    except ManifoldError as exc:
        reply = (reply_of(exc),)
    except (ConnectionError, ssl.SSLError) as exc:
        reply = _aborted(connection, what, CUT, exc)
    except asyncio.CancelledError:
        reply = _aborted(connection, what, ABORTED, "ABOR or the control connection closed")
    finally:
        if channel is not None:
            channel.close()
        # Before the reply, so that a client told the transfer ended finds what it left.
        await cleanup()
    for code, text in reply:
        connection.response(code, text)
    return True


def _aborted(connection: Connection, what: str, reply: Replies, why: object) -> Replies:
    # One line: a client that gives a transfer up (or loses it) is no server fault.
    log.info("FTP %s from %s aborted: %s", what, connection.client_host, why)
    return reply


async def _connected(connection: Connection) -> DataChannel:
    try:
        async with asyncio.timeout(DATA_CONNECT_SECONDS):
            await asyncio.shield(connection.future.data_connection)
    except TimeoutError:
        raise NotConnected("no data connection was made") from None
    channel: DataChannel = connection.data_connection
    del connection.data_connection
    return channel


async def _opened(channel: DataChannel) -> None:
    try:
        async with asyncio.timeout(DATA_CONNECT_SECONDS):
            await channel.open()
    except (TimeoutError, ConnectionError, ssl.SSLError) as exc:
        raise NotConnected("TLS negotiation on the data connection failed") from exc
