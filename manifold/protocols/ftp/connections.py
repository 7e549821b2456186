"""Control connections as aioftp runs them, ended quietly when the client goes.

aioftp reads each command, writes the replies in order and, on any error, logs it with
a traceback and ends the connection. A client resetting its connection, cutting its
TLS short, staying idle past the time allowed or failing the handshake of ``AUTH TLS``
is no server fault: here each such end is the client leaving, ended as ``QUIT`` does
(its transfers aborted) with no more in the log than aioftp's line for every closing
connection. The server's own close (``FtpServer.close``) ends connections quietly too.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

import aioftp

# What a connection's stream raises when the client is gone (or was idle too long).
GONE = (ConnectionError, ssl.SSLError, TimeoutError)


class ControlConnections(aioftp.Server):
    async def dispatcher(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Closing the server cancels every connection's dispatcher; the stream server of
        # Python 3.11 logs a cancelled handler as an error, so it ends here.
        with contextlib.suppress(asyncio.CancelledError):
            await super().dispatcher(reader, writer)

    async def parse_command(  # type: ignore[override]
        self, stream: aioftp.StreamIO, censor_commands: tuple[str] = ("pass",)
    ) -> tuple[str, str] | bool:
        """The verb and its argument, which keeps its spaces (names may end in one)."""
        try:
            line = await stream.readline()
        except GONE:
            line = b""
        if not line:
            # False ends the connection as QUIT does, its transfers aborted.
            return False
        text = line.decode(self.encoding, errors="replace").removesuffix("\n")
        verb, _, rest = text.removesuffix("\r").partition(" ")
        return verb.lower(), rest

    async def response_writer(
        self, stream: aioftp.StreamIO, response_queue: asyncio.Queue[Any]
    ) -> None:
        """The replies, in order. Once the client is gone they are dropped, though still
        taken from the queue (the connection's end waits for it to empty); reading
        fails then too, which ends the connection."""
        gone = False
        while True:
            args = await response_queue.get()
            try:
                if not gone:
                    await self.write_response(stream, *args)
            except GONE:
                gone = True
            finally:
                response_queue.task_done()
