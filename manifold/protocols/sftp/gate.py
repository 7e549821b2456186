"""Who may open an SFTP session: the SSH authentication of one connection.

As AList: "none" only for the user ``guest``, when the guest is enabled and has the
FTP/SFTP login bit; a password (the API's lock-out counts the failures, under the
same keys); or one of the user's registered public keys (its last use noted). Every
refusal looks the same to the client, whether the user exists or not, and whatever
the reason (wrong secret, no login bit, disabled, locked out). The caller admitted
is kept on the connection for the SFTP session to act as.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

import asyncssh

from manifold.errors import ManifoldError
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.credentials import Credentials
from manifold.services.auth.service import Caller

from .dispatch import batch_sends

logger = logging.getLogger(__name__)

GUEST = "guest"
CALLER = "manifold_caller"  # the connection's extra info that holds the Caller


class Gate(asyncssh.SSHServer):
    def __init__(
        self,
        credentials: Credentials,
        settings: SettingsService,
        connections: set[asyncssh.SSHServerConnection],
    ) -> None:
        self._credentials = credentials
        self._settings = settings
        # The server's open connections, which it closes when it stops.
        self._connections = connections
        self._conn: asyncssh.SSHServerConnection | None = None
        self._client = ""

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._connections.add(conn)
        batch_sends(conn)
        peer = conn.get_extra_info("peername")
        self._client = str(peer[0]) if peer else ""

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._connections.discard(self._conn)

    async def begin_auth(self, username: str) -> bool:
        """False (no authentication needed) only for an admitted guest."""
        self._admit(None)
        announcement = self._settings.get("announcement")
        if announcement and self._conn is not None:
            self._conn.send_auth_banner(announcement.strip() + "\n")
        if username != GUEST:
            return True
        return not await self._try(self._credentials.guest("sftp", self._client))

    def password_auth_supported(self) -> bool:
        return True

    async def validate_password(self, username: str, password: str) -> bool:
        return await self._try(self._credentials.password(username, password, self._client, "sftp"))

    def public_key_auth_supported(self) -> bool:
        return True

    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return await self._try(
            self._credentials.public_key(username, key.public_data, self._client)
        )

    async def _try(self, admission: Awaitable[Caller]) -> bool:
        try:
            caller = await admission
        except ManifoldError as exc:
            logger.info("SFTP login refused from %s: %s", self._client, exc.message)
            return False
        self._admit(caller)
        return True

    def _admit(self, caller: Caller | None) -> None:
        if self._conn is not None:
            self._conn.set_extra_info(**{CALLER: caller})


def admitted(chan: asyncssh.SSHServerChannel[bytes]) -> Caller:
    """The caller the connection of ``chan`` logged in as."""
    caller = chan.get_extra_info(CALLER)
    if not isinstance(caller, Caller) or caller.user.username != chan.get_extra_info("username"):
        raise asyncssh.DisconnectError(asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE, "not admitted")
    return caller
