"""A download whose data connection is spliced into the client's socket.

When the server offers a sink for exactly this read (``manifold.splice``) and the
data connection is plain (no FTPS), its bytes go from the FTP server's socket to the
client's in the kernel instead of through Python. The rest is ``transfer``'s, as for
every download: the connection comes from the pool and goes back to it in step
however the read ends. A back end that fails or stalls mid-way fails as
``TemporaryFailure``.
"""

from __future__ import annotations

import asyncio
import functools
import socket

from manifold.drivers.ftp.protocol import Connection
from manifold.drivers.ftp.transfer import PieceReader
from manifold.errors import TemporaryFailure
from manifold.splice import Sink, SourceFailed, SourceStalled, Step


def spliced(sink: Sink) -> PieceReader[socket.socket]:
    """The pieces of a transfer (``transfer.transfer``, announced, on a bare socket)
    spliced into ``sink``: each yields nothing, or its bytes when the client's socket
    could not take them spliced, so the layers above see a read that makes progress."""
    return functools.partial(_piece, sink)


async def _piece(sink: Sink, conn: Connection, data: socket.socket, count: int | None) -> Step:
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
