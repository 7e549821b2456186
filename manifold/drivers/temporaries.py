"""Data in progress under a temporary name: one rule for every driver that writes a
file (or copies a folder) beside its target and puts it in place when whole.

A driver gives the primitives: how to delete a path (``Delete``), and the reserved
entries its listings meet. ``Temporaries`` does the rest:

* names the temporary (``RESERVED_PREFIX``, which listings leave out and clients
  may not use) and marks it as this process's while it is written, so that no
  storage of the process sweeps it, however long the upload takes;
* on any failure of the write, cancellation included, deletes it by a task of its
  own, which the caller waits for a bounded time and which goes on when the caller
  is cancelled again; a write the server may still be finishing (``pending``) is
  deleted again a little later;
* remembers what could not be deleted (the server was away) and tries again when
  the driver says it is back (``retry``) or lists again (``sweep``);
* sweeps reserved entries older than ``stale_after`` that are not this process's:
  the leftovers of a process that died mid-upload.

Keys are ``scope`` plus the path, so each driver picks a scope that makes them
absolute on its server (address, share, root): two storages on one server see each
other's temporaries as the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import secrets
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from manifold.paths import RESERVED_PREFIX

# Deletes a path (a folder with all in it when the flag says so); True when it is
# gone (or was never there), False or an exception when it is still there.
Delete = Callable[[str, bool], Awaitable[bool]]
DeleteNow = Callable[[str, bool], bool]

# A temporary nobody wrote to for this long belongs to a write that will never end.
STALE_AFTER = timedelta(minutes=30)
# Seconds a failing write waits for its temporary's deletion before it goes on.
DISCARD_WAIT = 10.0
# Seconds a deletion may take before it is given up and remembered.
DELETE_SECONDS = 60.0

# Temporaries being written by this process, by key, whichever storage writes them.
_IN_FLIGHT: set[str] = set()
_IN_FLIGHT_LOCK = threading.Lock()


def temporary_name() -> str:
    """A fresh name for data until it is whole: ``RESERVED_PREFIX``, then random hex."""
    return RESERVED_PREFIX + secrets.token_hex(8)


def is_temporary(name: str) -> bool:
    """Whether a listed ``name`` is a temporary (in any letter case)."""
    return name.casefold().startswith(RESERVED_PREFIX)


@dataclass(slots=True)
class Temporary:
    """One temporary: where it is, and what the driver has done with it so far.

    ``made``: a request that may have made it was sent (else there is nothing to
    delete). ``pending``: a request writing it may still be under way at the server.
    """

    path: str
    is_dir: bool = False
    made: bool = False
    pending: bool = False


@dataclass(frozen=True, slots=True)
class Seen:
    """A reserved entry a listing met."""

    path: str
    is_dir: bool
    modified: datetime | None


class Temporaries:
    """One storage's temporaries (see the module's docstring)."""

    def __init__(
        self,
        scope: str,
        delete: Delete,
        *,
        join: Callable[[str, str], str] = posixpath.join,
        stale_after: timedelta = STALE_AFTER,
        recheck: Sequence[float] = (),
        casefold: bool = False,
    ) -> None:
        self._scope = scope
        self._delete = delete
        self._join = join
        self._stale_after = stale_after
        self._recheck = tuple(recheck)
        self._casefold = casefold
        self._lock = threading.Lock()  # the leftovers are touched from threads too
        self._leftovers: set[tuple[str, bool]] = set()
        self._chores: set[asyncio.Task[None]] = set()
        self._closing = asyncio.Event()

    # --- naming and marking ------------------------------------------------------

    def new(self, folder: str, is_dir: bool = False) -> Temporary:
        return Temporary(self._join(folder, temporary_name()), is_dir)

    def key(self, path: str) -> str:
        joined = posixpath.normpath(f"{self._scope}/{path}".replace("\\", "/"))
        return joined.casefold() if self._casefold else joined

    def in_flight(self, path: str) -> bool:
        with _IN_FLIGHT_LOCK:
            return self.key(path) in _IN_FLIGHT

    @contextlib.contextmanager
    def marked(self, temp: Temporary) -> Iterator[Temporary]:
        """``temp`` is this process's (never swept) inside the block."""
        key = self.key(temp.path)
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.add(key)
        try:
            yield temp
        finally:
            with _IN_FLIGHT_LOCK:
                _IN_FLIGHT.discard(key)

    @contextlib.asynccontextmanager
    async def writing(self, temp: Temporary, delete: Delete | None = None) -> AsyncIterator[None]:
        """Marked inside the block; discarded when the block fails in any way (with
        ``delete`` instead of the storage's own, where given) once ``made``."""
        with self.marked(temp):
            try:
                yield
            except BaseException:
                if temp.made:
                    await self.discard(temp, delete)
                raise

    # --- discarding --------------------------------------------------------------

    async def discard(self, temp: Temporary, delete: Delete | None = None) -> None:
        """Delete ``temp`` by a task of its own, waited for at most ``DISCARD_WAIT``
        seconds; cancelling the caller stops the wait, not the deletion. A ``pending``
        one is deleted again later (``recheck``), without the caller waiting."""
        chore = self._chore(self._delete_then_recheck(temp, delete or self._delete))
        await asyncio.wait({chore}, timeout=DISCARD_WAIT)

    def remember(self, path: str, is_dir: bool = False) -> None:
        """``path`` is still there and must go: tried again by ``retry`` or ``sweep``."""
        with self._lock:
            self._leftovers.add((path, is_dir))

    def take_leftovers(self) -> list[tuple[str, bool]]:
        with self._lock:
            taken, self._leftovers = sorted(self._leftovers), set()
        return taken

    async def retry(self, delete: Delete | None = None) -> None:
        """Delete the remembered temporaries (the server is back); any that still
        cannot go are remembered again."""
        for path, is_dir in self.take_leftovers():
            await self._delete_once(Temporary(path, is_dir), delete or self._delete)

    def retry_now(self, delete: DeleteNow) -> None:
        """``retry`` for a driver whose calls block (in its own thread)."""
        for path, is_dir in self.take_leftovers():
            try:
                gone = delete(path, is_dir)
            except Exception:
                gone = False
            if not gone:
                self.remember(path, is_dir)

    # --- sweeping ----------------------------------------------------------------

    def stale(self, seen: Iterable[Seen]) -> list[Seen]:
        """The reserved entries a listing met that are to be swept: untouched for
        ``stale_after`` and not this process's."""
        now = datetime.now(UTC)
        return [
            entry
            for entry in seen
            if entry.modified is not None
            and now - entry.modified > self._stale_after
            and not self.in_flight(entry.path)
        ]

    async def sweep(self, seen: Iterable[Seen], delete: Delete | None = None) -> None:
        """Delete the stale entries of a listing and the remembered ones; never raises
        (what cannot go now is tried at the next look)."""
        for entry in self.stale(seen):
            with contextlib.suppress(Exception):
                await (delete or self._delete)(entry.path, entry.is_dir)
        await self.retry(delete)

    async def drain(self, seconds: float) -> None:
        """The storage is being dropped: deletions still under way get ``seconds``
        (later looks are made at once), then are given up."""
        self._closing.set()
        chores, self._chores = set(self._chores), set()
        if chores:
            await asyncio.wait(chores, timeout=seconds)
            for chore in chores:
                chore.cancel()
            await asyncio.wait(chores)  # each remembers what it had not deleted

    def reopen(self) -> None:
        """The storage starts (again): later looks wait their time again."""
        self._closing.clear()

    # --- helpers -------------------------------------------------------------------

    def _chore(self, work: Awaitable[None]) -> asyncio.Task[None]:
        chore = asyncio.ensure_future(work)
        self._chores.add(chore)
        chore.add_done_callback(self._chores.discard)
        return chore

    async def _delete_then_recheck(self, temp: Temporary, delete: Delete) -> None:
        if await self._delete_once(temp, delete) and temp.pending and self._recheck:
            self._chore(self._recheck_later(temp, delete))

    async def _recheck_later(self, temp: Temporary, delete: Delete) -> None:
        """The server may still be writing what the client gave up, and make the
        temporary anew: look again a little later (at once when dropped)."""
        for delay in self._recheck:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), delay)
            if not await self._delete_once(temp, delete):
                return

    async def _delete_once(self, temp: Temporary, delete: Delete) -> bool:
        """Delete ``temp``; whether it went. Remembered when it did not."""
        gone = False
        try:
            async with asyncio.timeout(DELETE_SECONDS):
                gone = await delete(temp.path, temp.is_dir)
        except Exception:
            gone = False
        finally:
            if not gone:
                self.remember(temp.path, temp.is_dir)
        return gone
