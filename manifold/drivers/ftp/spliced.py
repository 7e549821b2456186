"""A download whose data connection is spliced into the client's socket.

When the server offers a sink for exactly this read (``manifold.splice``) and the
data connection is plain (no FTPS), its bytes go from the FTP server's socket to the
client's in the kernel instead of through Python. The rest is ``FtpDriver._read``'s:
the connection comes from the pool and goes back to it in step however the read
ends, a range read to its end is ended with ``ABOR``, and a back end that fails or
stalls mid-way fails as ``TemporaryFailure``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

from manifold.drivers.ftp.errors import ftp_errors
from manifold.drivers.ftp.pool import ConnectionPool
from manifold.drivers.ftp.protocol import Connection, ReplyError
from manifold.errors import TemporaryFailure
from manifold.splice import ClientGone, Sink, SourceFailed, SourceStalled, Step


async def spliced(
    pool: ConnectionPool, sink: Sink, path: str, offset: int, length: int | None
) -> AsyncIterator[bytes]:
    """Bytes ``[offset, offset + length)`` of ``path`` spliced into ``sink``; yields an
    empty piece once the transfer is open (the response's head goes out then) and
    after each piece, so the layers above see a read that makes progress (a piece the
    client's socket could not take spliced comes as its bytes)."""
    conn, data = await pool.hold(lambda conn: _retrieve(conn, path, offset), "read")
    if data is None:  # the offset lies past the end
        pool.release(conn, True)
        return
    reusable = gone = False
    try:
        yield b""
        remaining = length
        while remaining is None or remaining > 0:
            step = await _piece(conn, data, sink, remaining)
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
    except (GeneratorExit, ClientGone):
        await conn.abandon(data)
        reusable = not conn.broken
        raise
    except TemporaryFailure:
        gone = True
        raise
    finally:
        data.close()
        pool.release(conn, reusable, gone=gone)


async def _piece(conn: Connection, data: socket.socket, sink: Sink, count: int | None) -> Step:
    """One piece of the relay, waiting for the server no longer than a read on the
    ordinary path does; a server that failed or stalled fails as temporary."""
    timeout = conn.endpoint.io_timeout
    try:
        return await sink.relay(data.fileno(), count, timeout)
    except SourceStalled as exc:
        conn.broken = True
        raise TemporaryFailure(f"read stalled for {timeout:g}s") from exc
    except SourceFailed as exc:
        conn.broken = True
        raise TemporaryFailure(f"the FTP server stopped sending the file: {exc}") from exc
    except asyncio.CancelledError:
        conn.broken = True  # the transfer is cut: its replies are unknown
        raise


async def _retrieve(conn: Connection, path: str, offset: int) -> socket.socket | None:
    with ftp_errors():
        try:
            return await conn.open_socket(f"RETR {path}", offset)
        except ReplyError as exc:
            if offset and exc.code == "554":  # REST beyond the end
                return None
            raise
