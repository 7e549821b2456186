"""Login failure limiting, keyed on the real client address.

After ``max_failures`` failed logins from one address, further attempts are refused
with 429 until ``lockout_seconds`` have passed since the last failure. Unlike AList,
failures expire (no permanent lock-out) and refused attempts do not extend the lock,
so an attacker cannot keep a victim's address locked forever.

``LoginLimiter`` is the interface; ``MemoryLoginLimiter`` keeps state in this
process. Several instances behind a load balancer need a shared implementation.
"""

from __future__ import annotations

import time
from typing import Protocol


class LoginLimiter(Protocol):
    async def is_locked(self, key: str) -> bool: ...

    async def record_failure(self, key: str) -> None: ...

    async def record_success(self, key: str) -> None: ...


class MemoryLoginLimiter:
    def __init__(self, max_failures: int, lockout_seconds: float) -> None:
        self.max_failures = max_failures
        self.lockout_seconds = lockout_seconds
        self._failures: dict[str, tuple[int, float]] = {}

    async def is_locked(self, key: str) -> bool:
        count, _ = self._current(key)
        return count >= self.max_failures

    async def record_failure(self, key: str) -> None:
        count, _ = self._current(key)
        self._failures[key] = (count + 1, time.monotonic())
        if len(self._failures) > 100_000:
            self._evict()

    async def record_success(self, key: str) -> None:
        self._failures.pop(key, None)

    def _current(self, key: str) -> tuple[int, float]:
        entry = self._failures.get(key)
        if entry is None:
            return 0, 0.0
        if time.monotonic() - entry[1] >= self.lockout_seconds:
            del self._failures[key]
            return 0, 0.0
        return entry

    def _evict(self) -> None:
        now = time.monotonic()
        stale = [k for k, (_, last) in self._failures.items() if now - last >= self.lockout_seconds]
        for key in stale:
            del self._failures[key]
