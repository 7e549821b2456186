"""Run-once locks with a lease: work that one process at a time may do.

``async with locks.hold(name, ttl) as got:`` runs its block with ``got`` true when
this process took the lock, false when another held it for the whole of ``wait``
seconds (0: one try). While the block runs the lease is renewed every third of
``ttl``, so a long index build keeps its lock; a process that dies lets go when its
last lease runs out. A holder whose lease cannot be renewed (the store unreachable
until it would run out, or another holds it) is stopped before another may take it:
its block is cancelled and ``hold`` raises ``LeaseLost``, so two never run at once.
The release names the holder's token: a lock whose lease ran out and was taken by
another is never released by the first.

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

from manifold.errors import LeaseLost
from manifold.logs import error_text

log = logging.getLogger("manifold.state")
_RETRY_SECONDS = 0.1
# The block under a lock is stopped this share of the lease after the last renewal
# was sent: before the store lets another take it, whatever the delay in stopping.
_SAFE = 0.8


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
        if not await self._take_within(name, token, ttl, wait):
            yield False
            return
        lease = asyncio.timeout(None)
        try:
            async with lease:
                renewal = asyncio.create_task(self._renew(name, token, ttl, lease))
                try:
                    yield True
                finally:
                    _move(lease, None)  # the block is over: nothing left to stop
                    renewal.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await renewal
                    await asyncio.shield(self._let_go(name, token))
        except TimeoutError as exc:
            if lease.expired():
                raise LeaseLost(f"the lease on {name} was lost before the work ended") from exc
            raise

    async def _take_within(self, name: str, token: str, ttl: float, wait: float) -> bool:
        deadline = time.monotonic() + wait
        got = await self.take(name, token, ttl)
        while not got and time.monotonic() < deadline:
            await asyncio.sleep(_RETRY_SECONDS)
            got = await self.take(name, token, ttl)
        return got

    async def _renew(self, name: str, token: str, ttl: float, lease: asyncio.Timeout) -> None:
        """Renew every third of ``ttl``, each renewal moving ``lease`` (the block's
        deadline) to a little before the store's lease runs out. A store that cannot be
        reached is asked again soon, until then; a lease another holds ends it at once."""
        loop = asyncio.get_running_loop()
        _move(lease, loop.time() + ttl * _SAFE)
        delay = ttl / 3
        while True:
            await asyncio.sleep(delay)
            sent = loop.time()
            try:
                kept = await self.extend(name, token, ttl)
            except Exception as exc:
                log.warning("renewing the lease on %s failed: %s", name, error_text(exc))
                delay = ttl / 10
                continue
            if not kept:
                log.warning("the lease on %s ran out before the work ended", name)
                _move(lease, loop.time())
                return
            _move(lease, sent + ttl * _SAFE)
            delay = ttl / 3

    async def _let_go(self, name: str, token: str) -> None:
        try:
            await self.release(name, token)
        except Exception as exc:  # the lease runs out by itself
            log.warning("releasing %s failed: %s", name, error_text(exc))


def _move(lease: asyncio.Timeout, when: float | None) -> None:
    """Set the block's deadline, unless it has passed already (and the block is
    being stopped)."""
    if not lease.expired():
        lease.reschedule(when)


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
