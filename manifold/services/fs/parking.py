"""The journal of parked objects: what ``placing`` parks under a hidden name is
recorded before the step that parks it, so that a process killed mid-replace (SIGKILL,
the machine's power) leaves nothing hidden for good.

Each record says where the parked object lies (its storage and path there), its home
(the name it must get back in that folder; none for a folder that only held a copy)
and whether it may go once its home is taken (``garbage``: an old destination set
aside, a copy made beside) or is the only copy of a user's data. An operation drops
its records when it ends, done or undone; one that ends with an object still parked
(an undoing or a clean-up that failed) lets go of them, for recovery to take.

The records live in the database, where every process sharing the storages sees
them, each held by the owner that made it (the task service's owner id) and renewed
while its operation runs, as a task's lease is. ``parking_recovery`` puts back what a
dead owner left: at start for owners this data folder knows are dead
(``task_owners``), and on a timer for records whose owner no longer renews.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Iterable
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from manifold.db.parking_repo import Parking, ParkingRepo
from manifold.logs import error_text

if TYPE_CHECKING:
    from manifold.services.fs.parking_recovery import Recovery
    from manifold.services.fs.tree import Place

log = logging.getLogger("manifold.parking")

# A record whose owner has not renewed it for this long is recovered (the task lease).
LEASE_SECONDS = 30.0
# How often the records of operations under way are renewed, and unheld ones looked for.
HEARTBEAT_SECONDS = 5.0
POLL_SECONDS = 30.0


class ParkingJournal:
    """This process's records of parked objects; without a repo (a tree built alone)
    nothing is recorded."""

    def __init__(self, repo: ParkingRepo | None = None, owner: str = "") -> None:
        self.repo = repo
        self.owner = owner
        self.lease_seconds = LEASE_SECONDS
        self.heartbeat_seconds = HEARTBEAT_SECONDS
        self.poll_seconds = POLL_SECONDS
        # Puts back what dead owners left (set by the container).
        self.recovery: Recovery | None = None
        self._held: set[str] = set()
        self._tender: asyncio.Task[None] | None = None

    def set_lease(self, seconds: float) -> None:
        """A lease of ``seconds`` (at least one), renewed every sixth of it; unheld
        records are looked for once a lease."""
        self.lease_seconds = max(1.0, float(seconds))
        self.heartbeat_seconds = min(HEARTBEAT_SECONDS, self.lease_seconds / 6)
        self.poll_seconds = self.lease_seconds

    def operation(self) -> Parked:
        """The records of one operation, from its first parking to its end."""
        return Parked(self)

    def lease_end(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.lease_seconds)

    async def add(self, place: Place, home: str, garbage: bool) -> str:
        """Record an object about to be parked at ``place``; the record's id."""
        if self.repo is None:
            return ""
        now = datetime.now(UTC)
        parking = Parking(
            id=secrets.token_hex(16),
            storage_id=place.mounted.storage.id,
            path=place.sub_path,
            home=home,
            garbage=garbage,
            owner=self.owner,
            lease_until=now + timedelta(seconds=self.lease_seconds),
            created=now,
        )
        await self.repo.add(parking)
        self._held.add(parking.id)
        return parking.id

    async def end(self, ids: Iterable[str], settled: bool) -> None:
        """The operation is over: its records are dropped when nothing it parked is
        left (``settled``), else let go of for recovery. A database that fails here
        only delays that: the lease runs out and recovery finds out what is left."""
        wanted = [i for i in ids if i]
        self._held.difference_update(wanted)
        if self.repo is None or not wanted:
            return
        try:
            if settled:
                await self.repo.drop(wanted)
            else:
                await self.repo.release(wanted)
        except Exception as exc:
            log.warning("could not close parking records: %s", error_text(exc))

    # -- the background: leases renewed, what dead owners left put back ----------------

    async def start(self, dead: Iterable[str] = ()) -> None:
        """Renew this process's records, and recover what ``dead`` (owners found dead
        on this data folder) left, then every unheld record now and then."""
        if self.repo is None or self._tender is not None:
            return
        self._tender = asyncio.create_task(self._tend(list(dead)))

    async def stop(self) -> None:
        tender, self._tender = self._tender, None
        if tender is not None:
            tender.cancel()
            with suppress(asyncio.CancelledError):
                await tender
        if self.recovery is not None:
            await self.recovery.stop()

    async def _tend(self, dead: list[str]) -> None:
        if self.recovery is not None and dead:
            await self._quietly(self.recovery.of_owners(dead))
        loop = asyncio.get_running_loop()
        poll = loop.time() + self.poll_seconds
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            await self._quietly(self._renew())
            if loop.time() >= poll and self.recovery is not None:
                poll = loop.time() + self.poll_seconds
                await self._quietly(self.recovery.unheld())

    async def _renew(self) -> None:
        if self.repo is not None and self._held:
            await self.repo.renew(list(self._held), self.owner, self.lease_end())

    @staticmethod
    async def _quietly(work: Awaitable[None]) -> None:
        try:
            await work
        except Exception as exc:  # the loop goes on: the next round tries again
            log.warning("could not keep the parking records: %s", error_text(exc))


class Parked:
    """The parkings of one operation (``ParkingJournal.operation``)."""

    def __init__(self, journal: ParkingJournal) -> None:
        self._journal = journal
        self._ids: list[str] = []

    async def park(self, place: Place, home: str, garbage: bool) -> str:
        """Record what is about to be parked at ``place`` (before the step that parks
        it): its ``home`` in that folder, and whether it is ``garbage`` once that is
        taken. Raises when it cannot be recorded: then nothing may be parked."""
        parking_id = await self._journal.add(place, home, garbage)
        self._ids.append(parking_id)
        return parking_id

    async def left(self, parking_id: str) -> None:
        """The object recorded as ``parking_id`` was carried on (recorded anew where
        it went): this record is over."""
        self._ids.remove(parking_id)
        await self._journal.end([parking_id], settled=True)

    async def close(self, settled: bool) -> None:
        """The operation ended; ``settled``: nothing it parked is left parked."""
        ids, self._ids = self._ids, []
        await self._journal.end(ids, settled)
