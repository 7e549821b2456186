"""The SFTP server's listener: started and stopped with the app (``sftp_port``).

Only the SFTP subsystem is served: shells, commands, scp and forwarding are refused.
Stopping closes the listener and every open connection, whose sessions then give up
their unfinished uploads.
"""

from __future__ import annotations

import asyncssh

from manifold.config import Config
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.credentials import Credentials
from manifold.services.fs.ops import GuardedOps

from .compat import tolerate_padded_writes
from .dispatch import answer_in_lanes
from .gate import Gate, admitted
from .hostkeys import host_keys
from .session import TreeSession

# SSH flow-control window: large enough that a transfer is not held back waiting for
# window adjustments on a fast link.
_WINDOW = 8 << 20
# The largest SSH packet a client may send: above the 32 KiB default, so that a
# client that writes 32 KiB blocks sends each in one packet rather than two.
_PACKET = 256 << 10


class SftpServer:
    def __init__(
        self,
        ops: GuardedOps,
        credentials: Credentials,
        settings: SettingsService,
        config: Config,
        port: int,
    ) -> None:
        self._ops = ops
        self._credentials = credentials
        self._settings = settings
        self._config = config
        self._port = port
        self._listener: asyncssh.SSHAcceptor | None = None
        self._connections: set[asyncssh.SSHServerConnection] = set()

    @property
    def port(self) -> int:
        """The port listened on (the one picked when 0 was asked for)."""
        return self._listener.get_port() if self._listener is not None else self._port

    async def start(self) -> None:
        tolerate_padded_writes()
        answer_in_lanes(TreeSession)
        keys = await host_keys(self._config.data_dir)
        self._listener = await asyncssh.listen(
            self._config.address,
            self._port,
            server_factory=self._gate,
            server_host_keys=keys,
            sftp_factory=self._session,
            allow_scp=False,
            agent_forwarding=False,
            x11_forwarding=False,
            window=_WINDOW,
            max_pktsize=_PACKET,
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

    def _gate(self) -> Gate:
        return Gate(self._credentials, self._settings, self._connections)

    def _session(self, chan: asyncssh.SSHServerChannel[bytes]) -> TreeSession:
        return TreeSession(chan, self._ops, admitted(chan))
