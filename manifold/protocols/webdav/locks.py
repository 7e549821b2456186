"""WebDAV write locks (RFC 4918 sections 6-7) and the ``If`` header.

``LockStore`` is what the server needs of a lock table; ``MemoryLockStore`` keeps
one in this process, and ``shared_locks`` has the database and Redis stores that
several processes share (``lock_store`` picks one by the state back end). Paths are
full virtual paths (the caller's base path joined), so two users with different base
paths see the same locks on one file.

A lock covers its own path, and with depth infinity every path below it. A write
to a covered path must name one of the covering locks' tokens in its ``If`` header
(else 423), and the ``If`` header as a whole must hold (else 412).

A lock belongs to the user who took it (``holder``, the user's id; RFC 4918 section
6.4): only that user's requests may submit its token, and only that user is shown
the token. ``owner`` is the client's own ``DAV:owner`` text, shown to everyone.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from manifold.paths import is_sub_path

DEFAULT_TIMEOUT = 3600
MAX_TIMEOUT = 7 * 24 * 3600
TOKEN_PREFIX = "opaquelocktoken:"  # noqa: S105 - a URI scheme


@dataclass(frozen=True, slots=True)
class Lock:
    token: str
    path: str
    infinite: bool
    exclusive: bool
    owner: str  # the client's DAV:owner element, as sent
    timeout: int
    expires: float  # seconds since the epoch, so that a shared store can compare
    holder: int  # the id of the user who took the lock

    def held_by(self, user_id: int) -> bool:
        return self.holder == user_id

    def covers(self, path: str) -> bool:
        return path == self.path or (self.infinite and is_sub_path(self.path, path))

    def conflicts(self, other: Lock) -> bool:
        """Whether ``other`` cannot be taken while this lock is held."""
        overlap = self.covers(other.path) or (other.infinite and is_sub_path(other.path, self.path))
        return overlap and (self.exclusive or other.exclusive)


class LockConflict(Exception):
    """Another lock prevents the one asked for."""


class LockStore(Protocol):
    async def create(self, lock: Lock) -> None:
        """Add ``lock``; ``LockConflict`` when a lock it does not share with is there."""

    async def refresh(self, token: str, seconds: int) -> Lock | None: ...

    async def remove(self, token: str) -> bool: ...

    async def covering(self, path: str) -> list[Lock]:
        """Locks on ``path`` or on a folder above it with depth infinity."""

    async def below(self, path: str) -> list[Lock]:
        """Locks on ``path`` and on anything below it (what removing it would end)."""


def new_lock(
    path: str, infinite: bool, exclusive: bool, owner: str, timeout: int, *, holder: int
) -> Lock:
    token = TOKEN_PREFIX + secrets.token_hex(16)
    return Lock(token, path, infinite, exclusive, owner, timeout, time.time() + timeout, holder)


class MemoryLockStore:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._locks: dict[str, Lock] = {}
        self._clock = clock

    async def create(self, lock: Lock) -> None:
        for held in self._live():
            if held.conflicts(lock):
                raise LockConflict(held.token)
        self._locks[lock.token] = lock

    async def refresh(self, token: str, seconds: int) -> Lock | None:
        held = self._get(token)
        if held is None:
            return None
        renewed = replace(held, timeout=seconds, expires=self._clock() + seconds)
        self._locks[token] = renewed
        return renewed

    async def remove(self, token: str) -> bool:
        return self._locks.pop(token, None) is not None

    async def covering(self, path: str) -> list[Lock]:
        if not self._locks:
            return []
        return [lock for lock in self._live() if lock.covers(path)]

    async def below(self, path: str) -> list[Lock]:
        if not self._locks:
            return []
        return [lock for lock in self._live() if is_sub_path(path, lock.path)]

    def _get(self, token: str) -> Lock | None:
        lock = self._locks.get(token)
        if lock is not None and lock.expires <= self._clock():
            del self._locks[token]
            return None
        return lock

    def _live(self) -> list[Lock]:
        now = self._clock()
        for token in [t for t, lock in self._locks.items() if lock.expires <= now]:
            del self._locks[token]
        return list(self._locks.values())


def parse_timeout(header: str) -> int:
    """``Timeout: Second-600, Infinite`` → the first usable value, capped."""
    for part in header.split(","):
        part = part.strip()
        if part.lower() == "infinite":
            return MAX_TIMEOUT
        if part.lower().startswith("second-") and part[7:].isdigit():
            return max(1, min(int(part[7:]), MAX_TIMEOUT))
    return DEFAULT_TIMEOUT


# --- the If header (RFC 4918 section 10.4) -------------------------------------


@dataclass(frozen=True, slots=True)
class Condition:
    negated: bool
    token: str = ""  # a state token (lock token or "DAV:no-lock")
    etag: str = ""


@dataclass(frozen=True, slots=True)
class IfList:
    resource: str  # the tagged resource's URL or path; "" for the request's own
    conditions: tuple[Condition, ...]


_IF_PART = re.compile(r"\s*(?:<([^>]*)>|\(([^)]*)\))")
_CONDITION = re.compile(r"\s*(Not\s+)?(?:<([^>]*)>|\[([^\]]*)\])", re.IGNORECASE)


class BadIf(ValueError):
    """An ``If`` header that cannot be read."""


def parse_if(header: str) -> list[IfList]:
    lists: list[IfList] = []
    resource = ""
    pos = 0
    header = header.strip()
    while pos < len(header):
        match = _IF_PART.match(header, pos)
        if match is None:
            if header[pos:].strip():
                raise BadIf(header)
            break
        pos = match.end()
        if match.group(1) is not None:
            resource = match.group(1)
            continue
        lists.append(IfList(resource, _conditions(match.group(2))))
    if not lists:
        raise BadIf(header)
    return lists


def _conditions(text: str) -> tuple[Condition, ...]:
    found: list[Condition] = []
    pos = 0
    while pos < len(text) and text[pos:].strip():
        match = _CONDITION.match(text, pos)
        if match is None:
            raise BadIf(text)
        pos = match.end()
        negated = bool(match.group(1))
        if match.group(2) is not None:
            found.append(Condition(negated, token=match.group(2).strip()))
        else:
            found.append(Condition(negated, etag=match.group(3).strip()))
    if not found:
        raise BadIf(text)
    return tuple(found)


def submitted_tokens(lists: list[IfList]) -> set[str]:
    return {c.token for item in lists for c in item.conditions if c.token and not c.negated}
