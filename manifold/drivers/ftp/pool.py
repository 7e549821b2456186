"""Logged-in FTP connections kept for reuse.

As the server's concurrency layer counts them, calls, range readers and uploads each
have ``size`` slots of their own: a copy within the storage holds an upload while its
reader opens, and one shared count would let copies wait on themselves for ever. At
most ``size`` idle connections are kept.

A call borrows one, and gives it back when done; one that broke (a socket error, a
cancelled command, a transfer cut off) is closed instead, and so are the idle ones
with it, since a connection that broke usually means the server went away (a
restart) and took them all. A connection idle for a while is asked a ``NOOP`` before
it is lent, and a lent one that fails before its first reply (the server closed it
while it sat idle) is replaced by a new one and the call tried once more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from manifold.drivers.ftp.protocol import Connection, Kind
from manifold.errors import ManifoldError, ServerError, TemporaryFailure

T = TypeVar("T")

# Seconds a connection may sit idle and still be lent without a NOOP first.
PROBE_AFTER = 15.0

KINDS: tuple[Kind, ...] = ("call", "read", "write")


class ConnectionPool:
    """Connections made by ``opener``; ``logins`` and ``reuses`` count what it did."""

    def __init__(self, opener: Callable[[], Awaitable[Connection]], size: int) -> None:
        self._opener = opener
        self._size = size
        self._slots = {kind: asyncio.Semaphore(size) for kind in KINDS}
        self._idle: list[Connection] = []
        self._closed = False
        # Connections opened (each one a login), and loans of an already open one.
        self.logins = 0
        self.reuses = 0

    @property
    def idle(self) -> int:
        """Connections waiting to be lent."""
        return len(self._idle)

    async def acquire(self, kind: Kind = "call", fresh: bool = False) -> Connection:
        """A connection of its own for the caller, who must ``release`` it."""
        slots = self._slots[kind]
        await slots.acquire()
        try:
            conn = await self._take(fresh)
        except BaseException:
            slots.release()
            raise
        conn.replies = 0
        conn.loans += 1
        conn.kind = kind
        return conn

    def release(self, conn: Connection, reusable: bool, gone: bool = False) -> None:
        """Give ``conn`` back: kept for the next caller if ``reusable`` and sound. ``gone``
        (the call failed as temporary) closes the idle ones too: they went with it."""
        try:
            keep = reusable and not self._closed and len(self._idle) < self._size
            if keep and conn.alive():
                conn.last_used = time.monotonic()
                self._idle.append(conn)
            else:
                conn.close()
                if gone:
                    self.discard_idle()
        finally:
            self._slots[conn.kind].release()

    async def run(self, call: Callable[[Connection], Awaitable[T]], kind: Kind = "call") -> T:
        """``call`` on a borrowed connection, given back afterwards."""
        conn, result = await self.hold(call, kind)
        self.release(conn, True)
        return result

    async def hold(
        self, call: Callable[[Connection], Awaitable[T]], kind: Kind = "call"
    ) -> tuple[Connection, T]:
        """``call`` on a borrowed connection that the caller keeps (and releases)."""
        conn = await self.acquire(kind)
        stale_retry = conn.loans > 1  # lent before: it may have gone stale while idle
        while True:
            try:
                return conn, await call(conn)
            except BaseException as exc:
                stale = stale_retry and _stale(conn, exc)
                self.release(conn, _reusable(conn, exc), isinstance(exc, TemporaryFailure))
                if not stale:
                    raise
            stale_retry = False
            conn = await self.acquire(kind, fresh=True)

    def discard_idle(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        """Close the idle connections now and each lent one when it comes back."""
        self._closed = True
        self.discard_idle()

    async def _take(self, fresh: bool) -> Connection:
        if self._closed:
            raise ServerError("storage not init: its connections are closed")
        while self._idle and not fresh:
            conn = self._idle.pop()
            if await self._sound(conn):
                self.reuses += 1
                return conn
        conn = await self._opener()
        self.logins += 1
        return conn

    async def _sound(self, conn: Connection) -> bool:
        if not conn.alive():
            conn.close()
            return False
        if time.monotonic() - conn.last_used < PROBE_AFTER:
            return True
        try:
            if (await conn.ask("NOOP")).ok():
                return True
        except Exception:  # noqa: S110 - a connection that cannot say NOOP is not lent
            pass
        conn.close()
        return False


def _reusable(conn: Connection, exc: BaseException) -> bool:
    """Whether a connection whose call raised ``exc`` is still in step: the server
    answered (not found, refused) and nothing was left half-way."""
    return (
        isinstance(exc, ManifoldError) and not isinstance(exc, TemporaryFailure) and not conn.broken
    )


def _stale(conn: Connection, exc: BaseException) -> bool:
    return isinstance(exc, TemporaryFailure) and conn.broken and conn.replies == 0
