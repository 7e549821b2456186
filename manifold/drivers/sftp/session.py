"""One SSH connection and its SFTP client per storage, reopened when it breaks.

``Connector.client()`` hands out the current SFTP client, opening a connection first
when there is none or the last one was lost; a lock makes sure only one reconnect
runs while the other callers wait for it. Requests made meanwhile on one client run
side by side: SFTP pipelines them on its one channel.

The server's host key is checked before the login is sent: a key that does not match
the pinned fingerprint fails the connection, naming both fingerprints and nothing
else. With no fingerprint pinned, the first key offered is accepted and reported to
``on_first_key``, which pins it (trust on first use).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import asyncssh
from asyncssh.encryption import get_default_encryption_algs

from manifold.drivers import reach
from manifold.drivers.sftp.lister import Lister
from manifold.errors import InvalidRequest, ManifoldError, PermissionDenied, TemporaryFailure

DEFAULT_PORT = 22
# Seconds to reach the server, exchange keys and log in.
CONNECT_SECONDS = 20.0
# A keepalive every 15 seconds; a server silent for three in a row is gone (its
# connection closed, so calls waiting on it fail and the next one reconnects).
KEEPALIVE_SECONDS = 15.0
KEEPALIVE_MISSES = 3
# Seconds a closing connection may take before it is left behind.
CLOSE_SECONDS = 5.0

_NO_KNOWN_HOSTS: tuple[list[Any], list[Any], list[Any]] = ([], [], [])


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where to log in and with what; never printed (``repr`` hides the secrets)."""

    host: str
    port: int
    username: str
    password: str
    private_key: str
    passphrase: str

    def __repr__(self) -> str:
        return f"Credentials({self.username}@{self.host}:{self.port})"

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


def parse_address(address: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` as (host, port)."""
    text = address.strip()
    if not text:
        raise InvalidRequest("address is required (host or host:port)")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""  # a bare host, or a bare IPv6 address
    if not host:
        raise InvalidRequest(f"invalid address: {address}")
    if not port:
        return host, DEFAULT_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidRequest(f"invalid port in address: {address}")
    return host, int(port)


def fingerprint_of(key: asyncssh.SSHKey, pinned: str = "") -> str:
    """``key``'s fingerprint in the form of ``pinned`` (MD5 or SHA256, as ssh-keygen)."""
    if pinned.upper().startswith("MD5:"):
        return key.get_fingerprint("md5")
    return key.get_fingerprint("sha256")


def same_fingerprint(pinned: str, offered: str) -> bool:
    """Whether an admin's ``pinned`` text names the ``offered`` fingerprint: the hash's
    name may be left out (SHA256 then), base64 padding is ignored, MD5 hex is caseless."""
    text = pinned.strip().rstrip("=")
    kind, sep, digest = text.partition(":")
    if not sep or kind.upper() not in ("SHA256", "MD5"):
        kind, digest = "SHA256", text
    want_kind, _, want = offered.partition(":")
    if kind.upper() != want_kind.upper():
        return False
    if kind.upper() == "MD5":
        return digest.lower() == want.lower()
    return digest == want


class _Client(asyncssh.SSHClient):
    """Checks the host key against the pinned fingerprint; notes when the link drops."""

    def __init__(self, pinned: str) -> None:
        self.pinned = pinned
        self.offered = ""
        self.lost = False

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        self.offered = fingerprint_of(key, self.pinned)
        return not self.pinned or same_fingerprint(self.pinned, self.offered)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


@dataclass(slots=True)
class _Session:
    conn: asyncssh.SSHClientConnection
    client: _Client
    sftp: asyncssh.SFTPClient
    # The listing channel; None where the server refused a second channel.
    lister: Lister | None = None

    @property
    def alive(self) -> bool:
        return not self.client.lost

    async def close(self) -> None:
        """Say goodbye to a live server; a lost one is cut off at once (a server that
        hangs would never read the goodbye)."""
        if self.client.lost:
            with suppress(Exception):
                self.conn.abort()
            return
        self.client.lost = True
        with suppress(Exception):
            if self.lister is not None:
                self.lister.close()
            self.sftp.exit()
        with suppress(Exception):
            self.conn.close()
            async with asyncio.timeout(CLOSE_SECONDS):
                await self.conn.wait_closed()


class Connector:
    """The storage's SSH connection: opened on demand, reopened after a loss.

    ``pinned`` gives the fingerprint required at each connection (read anew every
    time, so a key pinned on first use is required from the next reconnect on);
    ``on_first_key`` hears the fingerprint offered when none was pinned.
    ``on_reconnect`` runs once after each reconnect (not the first connection), with
    the new client: the driver removes what a transfer cut short left behind.
    """

    def __init__(
        self,
        credentials: Credentials,
        pinned: Callable[[], str],
        on_first_key: Callable[[str], Awaitable[None]],
        on_reconnect: Callable[[asyncssh.SFTPClient], Awaitable[None]],
        keepalive: float = KEEPALIVE_SECONDS,
    ) -> None:
        self._credentials = credentials
        self._keepalive = keepalive
        self._pinned = pinned
        self._on_first_key = on_first_key
        self._on_reconnect = on_reconnect
        self._session: _Session | None = None
        self._opened = 0
        self._lock = asyncio.Lock()
        self._closed = False

    async def client(self) -> asyncssh.SFTPClient:
        """The SFTP client of a live connection, connecting first when needed."""
        return (await self._live()).sftp

    async def lister(self) -> tuple[asyncssh.SFTPClient, Lister | None]:
        """The live connection's SFTP client and its listing channel (None where the
        server allows one channel only: listings then go over the client)."""
        session = await self._live()
        return session.sftp, session.lister

    async def _live(self) -> _Session:
        session = self._session
        if session is not None and session.alive:
            return session
        async with self._lock:
            session = self._session
            if session is None or not session.alive:
                session = await self._reopen(session)
            return session

    def lost(self, sftp: asyncssh.SFTPClient) -> None:
        """A call on ``sftp`` failed as the network fails: the next call reconnects.

        Only the session that client belongs to is given up: a caller that learns late
        of an old loss must not throw away the connection made since.
        """
        session = self._session
        if session is not None and session.sftp is sftp:
            session.client.lost = True

    @property
    def copy_data(self) -> bool:
        """Whether the server copies file data itself (OpenSSH's copy-data extension)."""
        session = self._session
        return session is not None and session.sftp.supports_remote_copy

    @property
    def server_version(self) -> str:
        """What the server calls itself (``SSH-2.0-OpenSSH_9.2p1 ...``), once connected."""
        session = self._session
        if session is None:
            return ""
        return str(session.conn.get_extra_info("server_version", ""))

    async def close(self) -> None:
        """Close the connection; later calls fail as temporary. Never raises."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def _reopen(self, old: _Session | None) -> _Session:
        if self._closed:
            raise TemporaryFailure("the SFTP storage is closed")
        if old is not None:
            await old.close()
        session = await self._open()
        if self._closed:  # dropped while this connection was being made
            await session.close()
            raise TemporaryFailure("the SFTP storage is closed")
        self._session = session
        self._opened += 1
        if self._opened > 1:
            with suppress(ManifoldError, asyncssh.Error, OSError):
                await self._on_reconnect(session.sftp)
        return session

    async def _open(self) -> _Session:
        pinned = self._pinned()
        client = _Client(pinned)
        creds = self._credentials
        try:
            options = _options(creds, self._keepalive)
            conn, _ = await asyncssh.create_connection(
                lambda: client, creds.host, creds.port, options=options
            )
        except Exception as exc:
            raise _connect_error(exc, creds, client) from exc
        try:
            sftp = await conn.start_sftp_client()
        except Exception as exc:
            conn.close()
            if isinstance(exc, asyncssh.ChannelOpenError):
                raise PermissionDenied(
                    f"the server at {creds.where} refused the SFTP subsystem: {exc.reason}"
                ) from exc
            raise _connect_error(exc, creds, client) from exc
        session = _Session(conn, client, sftp, await _open_lister(conn))
        if not pinned and client.offered:
            try:
                await self._on_first_key(client.offered)
            except BaseException:
                await session.close()  # the key could not be pinned: nothing is kept
                raise
        return session


# AES-GCM first (the processor does AES, and the library seals a packet in one call),
# then the library's own order, so any server still finds one it speaks: with
# ChaCha20-Poly1305 first, a copy into SFTP spent a seventh of its time on ciphers.
_GCM = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
CIPHERS = (*_GCM, *(alg.decode() for alg in get_default_encryption_algs() if b"gcm" not in alg))


async def _open_lister(conn: asyncssh.SSHClientConnection) -> Lister | None:
    """A listing channel, or None where the server refuses one (some allow a single
    channel per connection) or does not answer it in time."""
    try:
        async with asyncio.timeout(CONNECT_SECONDS):
            return await Lister.open(conn)
    except (asyncssh.Error, OSError, TimeoutError):
        return None


def _options(creds: Credentials, keepalive: float) -> asyncssh.SSHClientConnectionOptions:
    keys = [_private_key(creds)] if creds.private_key.strip() else None
    return asyncssh.SSHClientConnectionOptions(
        username=creds.username,
        password=creds.password or None,
        client_keys=keys,
        # Only what the storage's options say: no agent, no ~/.ssh/config, no default
        # keys or known_hosts of the account this server runs as.
        agent_path=None,
        config=[],
        known_hosts=lambda host, addr, port: _NO_KNOWN_HOSTS,
        host_based_auth=False,
        gss_auth=False,
        connect_timeout=CONNECT_SECONDS,
        keepalive_interval=keepalive,
        keepalive_count_max=KEEPALIVE_MISSES,
        encryption_algs=CIPHERS,
    )


def _private_key(creds: Credentials) -> asyncssh.SSHKey:
    try:
        return asyncssh.import_private_key(creds.private_key.strip(), creds.passphrase or None)
    except (asyncssh.KeyImportError, ValueError) as exc:
        # The library's reason names the format or a missing passphrase, never the key.
        raise InvalidRequest(f"private_key cannot be used: {exc}") from None


def _connect_error(exc: Exception, creds: Credentials, client: _Client) -> ManifoldError:
    """What a failed connection tells the admin: never the password or the key."""
    where = creds.where
    if isinstance(exc, ManifoldError):
        return exc
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return PermissionDenied(
            f"host key mismatch for {where}: expected {client.pinned}, "
            f"the server offered {client.offered or 'an unreadable key'}"
        )
    if isinstance(exc, asyncssh.PermissionDenied):
        return PermissionDenied(
            f"login as {creds.username} at {where} refused: check the username, "
            "password or private key"
        )
    if isinstance(exc, asyncssh.DisconnectError):
        return TemporaryFailure(f"SFTP connection to {where} failed: {exc.reason}")
    if isinstance(exc, socket.gaierror):
        return TemporaryFailure(f"cannot resolve the SFTP host {creds.host}: {exc.strerror}")
    if isinstance(exc, TimeoutError):
        return TemporaryFailure(f"SFTP connection to {where} timed out")
    if isinstance(exc, OSError):
        return reach.unreachable("SFTP", where, exc)
    return TemporaryFailure(f"SFTP connection to {where} failed: {type(exc).__name__}")
