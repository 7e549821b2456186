"""What several Manifold processes share: the change bus, login counters and locks.

``open_state(config, engine)`` picks one of three back ends:

* ``memory``: one process and no ``redis_url``; everything stays in the process, as
  before, at no cost;
* ``database``: several processes (``workers`` above 1, ``cluster``, or asked for)
  and no Redis: the bus is a polled ``changes`` table, counters and locks are rows;
* ``redis``: ``redis_url`` set: bus, counters and locks in Redis (tasks stay in the
  database whatever the back end).

The pieces are small interfaces (``bus.Bus``, ``locks.Locks`` and the
``LoginLimiter`` and ``GuessLimiter`` of ``services.auth.limiter``), each with a
memory, a database and a Redis implementation that one contract test suite checks
alike.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any, Literal

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy.ext.asyncio import AsyncEngine

from manifold.config import Config
from manifold.state.bus import Bus, MemoryBus
from manifold.state.counters import (
    DatabaseGuessLimiter,
    DatabaseLoginLimiter,
    RedisGuessLimiter,
    RedisLoginLimiter,
)
from manifold.state.locks import Locks, MemoryLocks
from manifold.state.redis_bus import RedisBus
from manifold.state.redis_locks import RedisLocks
from manifold.state.sql_bus import DatabaseBus
from manifold.state.sql_locks import DatabaseLocks

Kind = Literal["memory", "database", "redis"]
# The longest a Redis call waits for a connection or an answer.
REPLY_SECONDS = 5.0


@dataclass(slots=True)
class State:
    kind: Kind
    bus: Bus
    locks: Locks
    engine: AsyncEngine
    # The id this process's messages carry (``instance_id``, else host:pid).
    origin: str
    redis: aioredis.Redis | None = None
    _listener: aioredis.Redis | None = field(default=None, repr=False)

    @property
    def shared(self) -> bool:
        """Whether other processes may share this state (anything but memory)."""
        return self.kind != "memory"

    def login_limiter(
        self, scope: str, max_failures: int, lockout_seconds: float
    ) -> DatabaseLoginLimiter | RedisLoginLimiter | None:
        """A shared login limiter for ``scope``; None for the memory back end (the
        caller keeps its own ``MemoryLoginLimiter``)."""
        if self.redis is not None:
            return RedisLoginLimiter(self.redis, scope, max_failures, lockout_seconds)
        if self.kind == "database":
            return DatabaseLoginLimiter(self.engine, scope, max_failures, lockout_seconds)
        return None

    def guess_limiter(
        self, scope: str, max_failures: int, lockout_seconds: float
    ) -> DatabaseGuessLimiter | RedisGuessLimiter | None:
        """A shared limiter of wrong folder passwords; None for the memory back end
        (the caller keeps its own ``MemoryGuessLimiter``)."""
        if self.redis is not None:
            return RedisGuessLimiter(self.redis, scope, max_failures, lockout_seconds)
        if self.kind == "database":
            return DatabaseGuessLimiter(self.engine, scope, max_failures, lockout_seconds)
        return None

    async def start(self) -> None:
        """Start the bus; after the database is migrated, before caches are loaded (so
        that a change made meanwhile is applied once they are)."""
        await self.bus.start()

    async def stop(self) -> None:
        await self.bus.stop()
        for client in (self.redis, self._listener):
            if client is not None:
                await client.aclose()


def state_kind(config: Config, shared: bool = False) -> Kind:
    if config.redis_url:
        return "redis"
    several = config.workers > 1 or config.cluster
    return "database" if shared or several else "memory"


def open_state(config: Config, engine: AsyncEngine, shared: bool = False) -> State:
    """The state back end ``config`` asks for (``shared``: at least the database's)."""
    kind = state_kind(config, shared)
    origin = config.instance_id or _default_origin()
    if kind == "redis":
        # A connection Redis closed (it restarted) is found dead on its next use: that
        # call is tried once more, on a new connection, instead of failing.
        client = _redis(config.redis_url, retry=Retry(NoBackoff(), 1, (RedisConnectionError,)))
        # The subscription must fail loudly when it drops (see ``redis_bus``).
        listener = _redis(config.redis_url, retry=Retry(NoBackoff(), 0))
        bus = RedisBus(client, listener, origin)
        return State(kind, bus, RedisLocks(client), engine, origin, client, listener)
    if kind == "database":
        return State(kind, DatabaseBus(engine, origin), DatabaseLocks(engine), engine, origin)
    return State(kind, MemoryBus(), MemoryLocks(), engine, origin)


def _redis(url: str, **options: Any) -> aioredis.Redis:
    """A client whose calls fail in bounded time when Redis hangs, instead of waiting."""
    return aioredis.Redis.from_url(
        url, socket_timeout=REPLY_SECONDS, socket_connect_timeout=REPLY_SECONDS, **options
    )


def _default_origin() -> str:
    # The pid alone repeats across machines, the host alone across workers; a random
    # tail tells apart two containers built in one process (tests).
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
