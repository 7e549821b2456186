"""Run-once locks with a lease: work that one process at a time may do.

``async with locks.hold(name, ttl) as got:`` runs its block with ``got`` true when
this process took the lock, false when another held it for the whole of ``wait``
seconds (0: one try). While the block runs the lease is renewed every third of
``ttl``, so a long index build keeps its lock; a process that dies lets go when its
last lease runs out. The release names the holder's token: a lock whose lease ran
out and was taken by another is never released by the first.

``MemoryLocks`` holds them in this process; ``sql_locks.DatabaseLocks`` and
``redis_locks.RedisLocks`` share them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from manifold.logs import error_text

log = logging.getLogger("manifold.state")
_RETRY_SECONDS = 0.1


class Locks(Protocol):
    def hold(
        self, name: str, ttl: float, wait: float = 0.0
    ) -> AbstractAsyncContextManager[bool]: ...


class LeaseLocks:
    """``hold`` over three primitives a store implements."""

    async def take(self, name: str, token: str, ttl: float) -> bool:
        raise NotImplementedError

    async def extend(self, name: str, token: str, ttl: float) -> bool:
        raise NotImplementedError

    async def release(self, name: str, token: str) -> None:
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def hold(self, name: str, ttl: float, wait: float = 0.0) -> AsyncIterator[bool]:
        token = secrets.token_hex(16)
        deadline = time.monotonic() + wait
        got = await self.take(name, token, ttl)
        while not got and time.monotonic() < deadline:
            await asyncio.sleep(_RETRY_SECONDS)
            got = await self.take(name, token, ttl)
        if not got:
            yield False
            return
        renewal = asyncio.create_task(self._renew(name, token, ttl))
        try:
            yield True
        finally:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
            await asyncio.shield(self._let_go(name, token))

    async def _renew(self, name: str, token: str, ttl: float) -> None:
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                if not await self.extend(name, token, ttl):
                    log.warning("the lease on %s ran out before the work ended", name)
                    return
            except Exception as exc:
                log.warning("renewing the lease on %s failed: %s", name, error_text(exc))

    async def _let_go(self, name: str, token: str) -> None:
        try:
            await self.release(name, token)
        except Exception as exc:  # the lease runs out by itself
            log.warning("releasing %s failed: %s", name, error_text(exc))


class MemoryLocks(LeaseLocks):
    def __init__(self) -> None:
        self._held: dict[str, tuple[str, float]] = {}  # name -> (token, expires)

    async def take(self, name: str, token: str, ttl: float) -> bool:
        now = time.monotonic()
        held = self._held.get(name)
        if held is not None and held[1] > now:
            return False
        self._held[name] = (token, now + ttl)
        return True

    async def extend(self, name: str, token: str, ttl: float) -> bool:
        held = self._held.get(name)
        if held is None or held[0] != token:
            return False
        self._held[name] = (token, time.monotonic() + ttl)
        return True

    async def release(self, name: str, token: str) -> None:
        held = self._held.get(name)
        if held is not None and held[0] == token:
            del self._held[name]
