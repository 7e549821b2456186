"""Login failure limiting, per client address and per username.

Every failed attempt is counted twice: against the real client address and against
the username tried. Once either has ``max_failures`` failures, attempts on it are
refused with 429. A success clears only the failures of its own (address, username)
pair, so an attacker's logins to an account of their own neither unlock their
address nor the name they are guessing, and guesses spread over many addresses
still lock the name.

Unlike AList, failures expire ``lockout_seconds`` after the last one and refused
attempts do not extend the lock, so an attacker cannot keep a victim locked out
forever.

``LoginLimiter`` is the interface; ``MemoryLoginLimiter`` keeps state in this
process. Several instances behind a load balancer need a shared implementation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

# Past this many tracked addresses and names, stale entries are dropped.
_MAX_TRACKED = 100_000


class LoginLimiter(Protocol):
    async def is_locked(self, address: str, username: str) -> bool: ...

    async def record_failure(self, address: str, username: str) -> None: ...

    async def record_success(self, address: str, username: str) -> None: ...


@dataclass(slots=True)
class _Failures:
    """One address's (or name's) failures, split by the other half of the pair."""

    last: float
    by_pair: dict[str, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(self.by_pair.values())


class MemoryLoginLimiter:
    def __init__(
        self,
        max_failures: int,
        lockout_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.lockout_seconds = lockout_seconds
        self.clock = clock
        self._by_address: dict[str, _Failures] = {}
        self._by_name: dict[str, _Failures] = {}

    async def is_locked(self, address: str, username: str) -> bool:
        counts = (self._count(self._by_address, address), self._count(self._by_name, username))
        return max(counts) >= self.max_failures

    async def record_failure(self, address: str, username: str) -> None:
        self._add(self._by_address, address, username)
        self._add(self._by_name, username, address)
        if len(self._by_address) + len(self._by_name) > _MAX_TRACKED:
            self._evict()

    async def record_success(self, address: str, username: str) -> None:
        self._clear(self._by_address, address, username)
        self._clear(self._by_name, username, address)

    def _count(self, table: dict[str, _Failures], key: str) -> int:
        entry = self._current(table, key)
        return entry.count if entry else 0

    def _add(self, table: dict[str, _Failures], key: str, other: str) -> None:
        entry = self._current(table, key) or table.setdefault(key, _Failures(0.0))
        entry.last = self.clock()
        entry.by_pair[other] = entry.by_pair.get(other, 0) + 1

    def _clear(self, table: dict[str, _Failures], key: str, other: str) -> None:
        entry = table.get(key)
        if entry is None:
            return
        entry.by_pair.pop(other, None)
        if not entry.by_pair:
            del table[key]

    def _current(self, table: dict[str, _Failures], key: str) -> _Failures | None:
        entry = table.get(key)
        if entry is not None and self._expired(entry):
            del table[key]
            return None
        return entry

    def _expired(self, entry: _Failures) -> bool:
        return self.clock() - entry.last >= self.lockout_seconds

    def _evict(self) -> None:
        for table in (self._by_address, self._by_name):
            for key in [k for k, entry in table.items() if self._expired(entry)]:
                del table[key]
