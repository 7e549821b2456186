"""The SFTP server's listener: started and stopped with the app (``sftp_port``).

Only the SFTP subsystem is served: shells, commands, scp and forwarding are refused.
Stopping closes the listener and every open connection, whose sessions then give up
their unfinished uploads.
"""

from __future__ import annotations

import asyncssh

from manifold.container import Services

from .compat import tolerate_padded_writes
from .gate import Gate, admitted
from .hostkeys import host_keys
from .session import TreeSession

# SSH flow-control window: large enough that a transfer is not held back waiting for
# window adjustments on a fast link.
_WINDOW = 8 << 20


class SftpServer:
    def __init__(self, services: Services, port: int) -> None:
        self._services = services
        self._port = port
        self._listener: asyncssh.SSHAcceptor | None = None
        self._connections: set[asyncssh.SSHServerConnection] = set()

    @property
    def port(self) -> int:
        """The port listened on (the one picked when 0 was asked for)."""
        return self._listener.get_port() if self._listener is not None else self._port

    async def start(self) -> None:
        services = self._services
        tolerate_padded_writes()
        keys = await host_keys(services.config.data_dir)
        self._listener = await asyncssh.listen(
            services.config.address,
            self._port,
            server_factory=lambda: Gate(services.credentials, services.settings, self._connections),
            server_host_keys=keys,
            sftp_factory=self._session,
            allow_scp=False,
            agent_forwarding=False,
            x11_forwarding=False,
            window=_WINDOW,
            reuse_address=True,
        )

    async def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        listener.close()
        for conn in list(self._connections):
            conn.close()
        for conn in list(self._connections):
            await conn.wait_closed()
        await listener.wait_closed()

    def _session(self, chan: asyncssh.SSHServerChannel[bytes]) -> TreeSession:
        return TreeSession(chan, self._services.ops, admitted(chan))


async def start_sftp(services: Services, port: int | None = None) -> SftpServer:
    """The SFTP server on ``port`` (else ``sftp_port``), listening once this returns."""
    server = SftpServer(services, services.config.sftp_port if port is None else port)
    await server.start()
    return server
