"""The SFTP server: the tree over SSH's file transfer protocol (asyncssh).

``server`` listens and closes; ``gate`` admits a connection (none for the guest,
password, public key); ``session`` maps SFTP requests onto ``GuardedOps``, ``files``
holds the open files, ``statuses`` turns errors into SFTP status codes, ``hostkeys``
keeps the host keys in the data folder, ``compat`` bears with a client bug,
``dispatch`` answers each open file's requests in a lane of its own.
"""

from __future__ import annotations

from manifold.config import Config
from manifold.protocols.sftp.server import SftpServer
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.credentials import Credentials
from manifold.services.fs.ops import GuardedOps

__all__ = ["SftpServer", "start_sftp"]


async def start_sftp(
    ops: GuardedOps,
    credentials: Credentials,
    settings: SettingsService,
    config: Config,
    port: int | None = None,
) -> SftpServer:
    """The SFTP server on ``port`` (else ``sftp_port``), listening once this returns."""
    server = SftpServer(
        ops, credentials, settings, config, config.sftp_port if port is None else port
    )
    await server.start()
    return server
