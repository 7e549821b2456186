"""Login failure counters that several processes share, with the semantics of
``services.auth.limiter.MemoryLoginLimiter`` (see there): failures per address and
per name, each split by the other half of the pair, expiring ``lockout_seconds``
after the last one; a success clears its own pair and makes its address known to
the name for ``KNOWN_SECONDS``.

``DatabaseLoginLimiter`` keeps them in the ``login_failures`` table, and
``RedisLoginLimiter`` in hashes (one per address or name) and sorted sets (a name's
known addresses). Each limiter has a ``scope`` (the API login and the two-factor
set-up count apart). Times are the wall clock's: every process reads the same one.

``DatabaseGuessLimiter`` and ``RedisGuessLimiter`` are the ``GuessLimiter`` of wrong
folder passwords on the same rows and hashes: the address half of a login limiter.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncEngine

from manifold.db.state_repo import FailureRepo

# As the memory limiter: how long a known address stays exempt from its name's lock,
# and how many a name keeps.
KNOWN_SECONDS = 30 * 24 * 3600
KNOWN_PER_NAME = 16
# A database limiter drops stale rows on one failure in this many.
_PURGE_EVERY = 200


class _DatabaseCounts:
    def __init__(
        self,
        engine: AsyncEngine,
        scope: str,
        max_failures: int,
        lockout_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._repo = FailureRepo(engine)
        self._scope = scope
        self.max_failures = max_failures
        self.lockout_seconds = lockout_seconds
        self.clock = clock
        self._failures = 0

    def _bucket(self, side: str, key: str) -> str:
        return _digest(self._scope, side, key)

    async def _count(self, bucket: str) -> int:
        rows = await self._repo.bucket(bucket)
        if not rows or self._expired(max(last for _, _, last in rows)):
            return 0
        return sum(count for _, count, _ in rows)

    async def _add(self, side: str, key: str, other: str) -> int:
        """Count one failure, then read the count it is in: read after the write, it
        takes in every failure written before (see ``LoginLimiter.attempt``)."""
        bucket = self._bucket(side, key)
        rows = await self._repo.bucket(bucket)
        expired = bool(rows) and self._expired(max(last for _, _, last in rows))
        await self._repo.add(bucket, _digest(bucket, other), other, self.clock(), expired)
        return await self._count(bucket)

    async def _purge_now_and_then(self) -> None:
        self._failures += 1
        if self._failures % _PURGE_EVERY == 0:
            now = self.clock()
            await self._repo.purge(now - self.lockout_seconds, now - KNOWN_SECONDS)

    def _expired(self, last: float) -> bool:
        return self.clock() - last >= self.lockout_seconds


class DatabaseLoginLimiter(_DatabaseCounts):
    async def is_locked(self, address: str, username: str) -> bool:
        if await self._count(self._bucket("a", address)) >= self.max_failures:
            return True
        if await self._is_known(username, address):
            return False
        return await self._count(self._bucket("n", username)) >= self.max_failures

    async def attempt(self, address: str, username: str) -> bool:
        if await self.is_locked(address, username):
            return False
        by_address = await self._add("a", address, username)
        by_name = await self._add("n", username, address)
        await self._purge_now_and_then()
        return _within(self.max_failures, by_address, by_name) or (
            by_address <= self.max_failures and await self._is_known(username, address)
        )

    async def record_failure(self, address: str, username: str) -> None:
        await self._add("a", address, username)
        await self._add("n", username, address)
        await self._purge_now_and_then()

    async def record_success(self, address: str, username: str) -> None:
        await self._repo.remove(_digest(self._bucket("a", address), username))
        await self._repo.remove(_digest(self._bucket("n", username), address))
        known = self._bucket("k", username)
        await self._repo.stamp(
            known, _digest(known, address), address, self.clock(), KNOWN_PER_NAME
        )

    async def _is_known(self, username: str, address: str) -> bool:
        seen = await self._repo.last_of(_digest(self._bucket("k", username), address))
        return seen is not None and self.clock() - seen < KNOWN_SECONDS


class DatabaseGuessLimiter(_DatabaseCounts):
    async def is_locked(self, address: str) -> bool:
        return await self._count(self._bucket("g", address)) >= self.max_failures

    async def record_failure(self, address: str) -> None:
        await self._add("g", address, "")
        await self._purge_now_and_then()

    async def attempt(self, address: str, guess: str) -> bool:
        if await self.is_locked(address):
            return False
        count = await self._add("g", address, guess)
        await self._purge_now_and_then()
        return count <= self.max_failures

    async def forgive(self, address: str, guess: str) -> None:
        bucket = self._bucket("g", address)
        await self._repo.remove(_digest(bucket, guess))


def _within(limit: int, *counts: int) -> bool:
    return all(count <= limit for count in counts)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


# Adds one failure to a hash of counts (fields "o:<other>") with its time ("last"),
# emptying it first when its last failure is ``lockout`` old, and returns the count
# of the hash with it; the key itself goes some time after that, as garbage.
_ADD = """
local last = redis.call('HGET', KEYS[1], 'last')
if last and tonumber(ARGV[2]) - tonumber(last) >= tonumber(ARGV[3]) then
    redis.call('DEL', KEYS[1])
end
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('HSET', KEYS[1], 'last', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local fields = redis.call('HGETALL', KEYS[1])
local total = 0
for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 2) == 'o:' then
        total = total + tonumber(fields[i + 1])
    end
end
return total
"""
# Clears one pair's count; a hash left with only its time goes.
_CLEAR = """
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HLEN', KEYS[1]) <= 1 then
    redis.call('DEL', KEYS[1])
end
return 1
"""
# Notes a known address, keeping the newest few.
_KNOW = """
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -1 - tonumber(ARGV[3]))
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""


class _RedisCounts:
    def __init__(
        self,
        client: aioredis.Redis,
        scope: str,
        max_failures: int,
        lockout_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._prefix = f"manifold:fail:{scope}:"
        self.max_failures = max_failures
        self.lockout_seconds = lockout_seconds
        self.clock = clock
        self._add = client.register_script(_ADD)
        self._clear = client.register_script(_CLEAR)
        self._know = client.register_script(_KNOW)

    def _key(self, side: str, key: str) -> str:
        return f"{self._prefix}{side}:{key}"

    async def _count(self, key: str) -> int:
        fields: dict[bytes, bytes] = await self._client.hgetall(key)  # type: ignore[assignment]
        last = fields.get(b"last")
        if last is None or self.clock() - float(last) >= self.lockout_seconds:
            return 0
        counts = [int(value) for name, value in fields.items() if name.startswith(b"o:")]
        return sum(counts)

    async def _count_one(self, key: str, other: str) -> int:
        """Count one failure; the count of ``key`` with it, in the same script."""
        ttl = int((self.lockout_seconds + 60) * 1000)
        now = repr(self.clock())
        args: list[str | float] = ["o:" + other, now, self.lockout_seconds, ttl]
        return int(await self._add(keys=[key], args=args))


class RedisLoginLimiter(_RedisCounts):
    async def is_locked(self, address: str, username: str) -> bool:
        if await self._count(self._key("a", address)) >= self.max_failures:
            return True
        if await self._is_known(username, address):
            return False
        return await self._count(self._key("n", username)) >= self.max_failures

    async def attempt(self, address: str, username: str) -> bool:
        if await self.is_locked(address, username):
            return False
        by_address = await self._count_one(self._key("a", address), username)
        by_name = await self._count_one(self._key("n", username), address)
        return _within(self.max_failures, by_address, by_name) or (
            by_address <= self.max_failures and await self._is_known(username, address)
        )

    async def record_failure(self, address: str, username: str) -> None:
        await self._count_one(self._key("a", address), username)
        await self._count_one(self._key("n", username), address)

    async def record_success(self, address: str, username: str) -> None:
        await self._clear(keys=[self._key("a", address)], args=["o:" + username])
        await self._clear(keys=[self._key("n", username)], args=["o:" + address])
        await self._know(
            keys=[self._key("k", username)],
            args=[address, repr(self.clock()), KNOWN_PER_NAME, KNOWN_SECONDS],
        )

    async def _is_known(self, username: str, address: str) -> bool:
        seen = await self._client.zscore(self._key("k", username), address)
        return seen is not None and self.clock() - float(seen) < KNOWN_SECONDS


class RedisGuessLimiter(_RedisCounts):
    async def is_locked(self, address: str) -> bool:
        return await self._count(self._key("g", address)) >= self.max_failures

    async def record_failure(self, address: str) -> None:
        await self._count_one(self._key("g", address), "")

    async def attempt(self, address: str, guess: str) -> bool:
        if await self.is_locked(address):
            return False
        return await self._count_one(self._key("g", address), guess) <= self.max_failures

    async def forgive(self, address: str, guess: str) -> None:
        await self._clear(keys=[self._key("g", address)], args=["o:" + guess])
