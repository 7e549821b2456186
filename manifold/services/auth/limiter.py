"""Login failure limiting, per client address and per username.

Every failed attempt is counted twice: against the real client address and against
the username tried. Once either has ``max_failures`` failures, attempts on it are
refused with 429. A success clears only the failures of its own (address, username)
pair, so an attacker's logins to an account of their own neither unlock their
address nor the name they are guessing, and guesses spread over many addresses
still lock the name.

Unlike AList, failures expire ``lockout_seconds`` after the last one and refused
attempts do not extend the lock. And the lock on a name does not hold at an address
that has logged in as that name before (for ``known_seconds``, 30 days): a stranger's
five guesses every few minutes lock the name for other strangers, not for its owner
at the address the owner uses (where the address lock still counts every failure).

``GuessLimiter`` counts wrong folder passwords per client address the same way: a
folder password is a login of its own, and without a limit a guest could guess it at
request rate.

``LoginLimiter`` and ``GuessLimiter`` are the interfaces; ``MemoryLoginLimiter`` and
``MemoryGuessLimiter`` keep state in this process; ``manifold.state.counters`` has the
database and Redis ones that several processes share.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from manifold.errors import TooManyAttempts

# Past this many tracked addresses and names, stale entries are dropped.
_MAX_TRACKED = 100_000
# How long an address that logged in as a name stays exempt from that name's lock, and
# how many such addresses a name keeps (the oldest go first).
KNOWN_SECONDS = 30 * 24 * 3600
_KNOWN_PER_NAME = 16


class LoginLimiter(Protocol):
    async def is_locked(self, address: str, username: str) -> bool: ...

    async def attempt(self, address: str, username: str) -> bool:
        """Count an attempt about to be checked as a failure, before the check; False
        (locked) when the pair is locked, or when counting it took a count past the
        limit. Each attempt reads the count its own failure is in, so of parallel
        attempts however interleaved at most ``max_failures`` are let through to the
        check; one refused before counting is not counted (nor extends the lock)."""
        ...

    async def record_failure(self, address: str, username: str) -> None: ...

    async def record_success(self, address: str, username: str) -> None: ...


class GuessLimiter(Protocol):
    """Wrong guesses of a secret other than a login (a folder password), per address:
    ``max_failures`` of them lock the address out of further guesses until
    ``lockout_seconds`` after the last one.

    A guess is counted before it is checked (``attempt``, atomic in every store), and
    forgiven when it was right (``forgive``, by the ``guess`` id it was counted under):
    checking first and counting after let parallel guesses past the limit."""

    async def is_locked(self, address: str) -> bool: ...

    async def record_failure(self, address: str) -> None: ...

    async def attempt(self, address: str, guess: str) -> bool:
        """Count one guess; False (not to be checked) when the address is past the limit."""
        ...

    async def forgive(self, address: str, guess: str) -> None:
        """The guess counted as ``guess`` was right: it no longer counts."""
        ...


@dataclass(slots=True)
class _Failures:
    """One address's (or name's) failures, split by the other half of the pair."""

    last: float
    by_pair: dict[str, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(self.by_pair.values())


class _Window:
    """``max_failures`` within ``lockout_seconds`` of each other lock; ``clock`` for tests."""

    def __init__(
        self,
        max_failures: int,
        lockout_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.lockout_seconds = lockout_seconds
        self.clock = clock
        self._start()

    def _start(self) -> None:
        """Make the empty state of a new limiter."""


class MemoryLoginLimiter(_Window):
    def _start(self) -> None:
        self._by_address: dict[str, _Failures] = {}
        self._by_name: dict[str, _Failures] = {}
        # Per name, the addresses that logged in as it and when they last did.
        self._known: dict[str, dict[str, float]] = {}

    async def is_locked(self, address: str, username: str) -> bool:
        if self._count(self._by_address, address) >= self.max_failures:
            return True
        if self._is_known(username, address):
            return False
        return self._count(self._by_name, username) >= self.max_failures

    async def attempt(self, address: str, username: str) -> bool:
        # No await between the check and the count: nothing in this process runs
        # between them.
        if await self.is_locked(address, username):
            return False
        await self.record_failure(address, username)
        return True

    async def record_failure(self, address: str, username: str) -> None:
        self._add(self._by_address, address, username)
        self._add(self._by_name, username, address)
        if len(self._by_address) + len(self._by_name) > _MAX_TRACKED:
            self._evict()

    async def record_success(self, address: str, username: str) -> None:
        self._clear(self._by_address, address, username)
        self._clear(self._by_name, username, address)
        known = self._known.setdefault(username, {})
        known.pop(address, None)
        known[address] = self.clock()
        while len(known) > _KNOWN_PER_NAME:
            del known[next(iter(known))]
        if len(self._known) > _MAX_TRACKED:
            del self._known[next(iter(self._known))]

    def _is_known(self, username: str, address: str) -> bool:
        seen = self._known.get(username, {}).get(address)
        return seen is not None and self.clock() - seen < KNOWN_SECONDS

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


class MemoryGuessLimiter(_Window):
    """``GuessLimiter`` in this process."""

    def _start(self) -> None:
        self._failures: dict[str, tuple[int, float]] = {}

    async def is_locked(self, address: str) -> bool:
        return self._locked(address)

    def _locked(self, address: str) -> bool:
        count, last = self._failures.get(address, (0, 0.0))
        if count and self.clock() - last >= self.lockout_seconds:
            del self._failures[address]
            return False
        return count >= self.max_failures

    async def attempt(self, address: str, guess: str) -> bool:
        # No await between the check and the count: nothing in this process runs
        # between them.
        if self._locked(address):
            return False
        await self.record_failure(address)
        return True

    async def forgive(self, address: str, guess: str) -> None:
        count, last = self._failures.get(address, (0, 0.0))
        if count:
            self._failures[address] = (count - 1, last)

    async def record_failure(self, address: str) -> None:
        self._locked(address)  # drops an expired count first
        count, _ = self._failures.get(address, (0, 0.0))
        self._failures[address] = (count + 1, self.clock())
        if len(self._failures) > _MAX_TRACKED:
            now = self.clock()
            for key in [
                k for k, (_, t) in self._failures.items() if now - t >= self.lockout_seconds
            ]:
                del self._failures[key]


@contextlib.asynccontextmanager
async def guessing(guesses: GuessLimiter | None, address: str) -> AsyncIterator[None]:
    """A guess of a secret from ``address``, checked in the block: counted first
    (``TooManyAttempts`` past the limit, unchecked), forgiven when the block passes.
    None: nothing is counted (no limiter, or nothing was guessed)."""
    if guesses is None:
        yield
        return
    guess = secrets.token_hex(8)
    if not await guesses.attempt(address, guess):
        raise TooManyAttempts()
    yield
    await guesses.forgive(address, guess)
