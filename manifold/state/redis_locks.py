"""Run-once locks on Redis: ``SET NX PX`` to take, scripts that check the token to
extend and release."""

from __future__ import annotations

import redis.asyncio as aioredis

from manifold.state.locks import LeaseLocks

PREFIX = "manifold:lock:"
_EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisLocks(LeaseLocks):
    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
        self._extend = client.register_script(_EXTEND)
        self._release = client.register_script(_RELEASE)

    async def take(self, name: str, token: str, ttl: float) -> bool:
        return bool(await self._client.set(PREFIX + name, token, nx=True, px=_ms(ttl)))

    async def extend(self, name: str, token: str, ttl: float) -> bool:
        return bool(await self._extend(keys=[PREFIX + name], args=[token, _ms(ttl)]))

    async def release(self, name: str, token: str) -> None:
        await self._release(keys=[PREFIX + name], args=[token])


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
