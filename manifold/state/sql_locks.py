"""Run-once locks on the database: a row per lock, taken by a conditional update."""

from __future__ import annotations

import time

from sqlalchemy.ext.asyncio import AsyncEngine

from manifold.db.state_repo import LeaseRepo
from manifold.state.locks import LeaseLocks


class DatabaseLocks(LeaseLocks):
    def __init__(self, engine: AsyncEngine) -> None:
        self._repo = LeaseRepo(engine)

    async def take(self, name: str, token: str, ttl: float) -> bool:
        return await self._repo.take(name, token, time.time(), ttl)

    async def extend(self, name: str, token: str, ttl: float) -> bool:
        return await self._repo.extend(name, token, time.time() + ttl)

    async def release(self, name: str, token: str) -> None:
        await self._repo.release(name, token)
