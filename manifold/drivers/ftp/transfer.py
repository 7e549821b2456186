"""A download on a pooled connection, whichever way its pieces are moved.

The connection comes from the pool and goes back to it in step however the read ends:
a transfer read to the file's end ends with the server's final reply; one ended before
(every byte of a range read, the reader closed early, the client gone) with ``ABOR``;
a back end that fails mid-way (``TemporaryFailure``) leaves the connection out of the
pool. The pieces themselves are the caller's: read through Python (``FtpDriver``), or
spliced into the client's socket (``spliced``).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeVar

from manifold.drivers.ftp.errors import ftp_errors
from manifold.drivers.ftp.pool import ConnectionPool
from manifold.drivers.ftp.protocol import Connection, DataChannel, ReplyError
from manifold.errors import TemporaryFailure
from manifold.splice import ClientGone, Step

Data = TypeVar("Data", DataChannel, socket.socket)
# Opens the data connection of a command from an offset (``Connection.open_data``...).
Opener = Callable[[Connection, str, int], Awaitable[Data]]
# One piece of the file from the data connection, ``count`` bytes at most (None: any).
PieceReader = Callable[[Connection, Data, "int | None"], Awaitable[Step]]


async def transfer(
    pool: ConnectionPool,
    path: str,
    offset: int,
    length: int | None,
    opener: Opener[Data],
    piece: PieceReader[Data],
    *,
    announce: bool = False,
) -> AsyncGenerator[bytes, None]:
    """Bytes ``[offset, offset + length)`` of ``path``, each piece's as ``piece`` gives
    them; ``announce``: an empty piece first, once the transfer is open."""
    conn, data = await pool.hold(lambda conn: _retrieve(conn, path, offset, opener), "read")
    if data is None:  # the offset lies past the end
        pool.release(conn, True)
        return
    reusable = gone = False
    try:
        if announce:
            yield b""
        remaining = length
        while remaining is None or remaining > 0:
            step = await piece(conn, data, remaining)
            if step.ended:
                data.close()
                with ftp_errors():
                    await conn.final()
                reusable = True
                return
            if remaining is not None:
                remaining -= step.count
            yield step.data
        await conn.abandon(data)  # every byte asked for is read
        reusable = not conn.broken
    except (GeneratorExit, ClientGone):  # closed early: keep the connection if we can
        await conn.abandon(data)
        reusable = not conn.broken
        raise
    except TemporaryFailure:
        gone = True
        raise
    finally:
        data.close()
        pool.release(conn, reusable, gone=gone)


async def _retrieve(conn: Connection, path: str, offset: int, opener: Opener[Data]) -> Data | None:
    """A data connection carrying ``path`` from ``offset``; None past its end."""
    with ftp_errors():
        try:
            return await opener(conn, f"RETR {path}", offset)
        except ReplyError as exc:
            if offset and exc.code == "554":  # REST beyond the end
                return None
            raise
