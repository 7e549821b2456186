"""Putting back what a dead owner left parked (see ``parking``): the one place the
recovery rules are written.

For each record, once the storage holding it is ready (storages start in the
background) and the record is taken over (``ParkingRepo.claim``):

* the parked object is gone: the record is dropped;
* a folder that only held a copy (no home): it is removed;
* its home is free: it is renamed back home, visible again under its name;
* its home is taken and it is garbage (an old destination set aside, a copy made
  beside): it is removed;
* its home is taken and it is the only copy: it is renamed to a free visible name
  beside its home, ``name (recovered 1).ext``, and a warning says so.

Nothing that may be the only copy is ever removed. The records of one storage are
recovered one after another, only copies first (so an object moved over another
takes its name before what it replaced is judged), each storage in a task of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from itertools import groupby

from manifold.db.parking_repo import Parking, ParkingRepo
from manifold.errors import ManifoldError, ObjectNotFound, ServerError
from manifold.logs import error_text
from manifold.models import Obj
from manifold.paths import MAX_NAME_BYTES, child_path, clean_path, name_bytes, split_path
from manifold.services.admin.storages import StorageService
from manifold.services.fs.events import TreeEvents
from manifold.services.fs.parking import ParkingJournal
from manifold.vfs.mounts import actual_mount_path
from manifold.vfs.storage_ops import StorageOps

log = logging.getLogger("manifold.parking")

# Names ``x (recovered N)`` tried before recovery gives up on a folder (and tries later).
MOST_RECOVERED = 1000


class Recovery:
    """Recovers the records of dead owners, for the journal of this process."""

    def __init__(
        self,
        repo: ParkingRepo,
        storages: StorageService,
        journal: ParkingJournal,
        events: TreeEvents | None = None,
    ) -> None:
        self._repo = repo
        self._storages = storages
        self._journal = journal
        self._events = events or TreeEvents()
        self._running: dict[int, asyncio.Task[None]] = {}

    async def of_owners(self, dead: Iterable[str]) -> None:
        """Recover the records ``dead`` owners left (found dead on this data folder),
        each storage's once it is ready; returns once begun."""
        gone = set(dead)
        records = await self._repo.of_owners(gone)
        self._begin(records, lambda p: p.owner if p.owner in gone else None)

    async def unheld(self) -> None:
        """Recover the records nobody renews any longer; returns once begun."""
        self._begin(await self._repo.unheld(datetime.now(UTC)), lambda _: None)

    async def settled(self) -> None:
        """Wait for the recoveries begun so far (tests, a stop)."""
        while self._running:
            await asyncio.gather(*list(self._running.values()), return_exceptions=True)

    async def stop(self) -> None:
        running = list(self._running.values())
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    def _begin(self, records: list[Parking], dead: Callable[[Parking], str | None]) -> None:
        for storage_id, group in groupby(sorted(records, key=_order), lambda p: p.storage_id):
            if storage_id in self._running:
                continue  # under way already: what it missed, the next round finds
            task = asyncio.create_task(self._recover_storage(storage_id, list(group), dead))
            self._running[storage_id] = task
            task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        for storage_id, running in list(self._running.items()):
            if running is task:
                del self._running[storage_id]

    async def _recover_storage(
        self, storage_id: int, records: list[Parking], dead: Callable[[Parking], str | None]
    ) -> None:
        await self._storages.ready_storage(storage_id)
        for parking in records:
            try:
                await self._take(parking, dead(parking))
            except Exception as exc:  # never an unhandled error in a background task
                log.warning("could not recover %s: %s", parking.path, error_text(exc))

    async def _take(self, parking: Parking, dead: str | None) -> None:
        owner, now = self._journal.owner, datetime.now(UTC)
        if not await self._repo.claim(parking.id, owner, now, self._journal.lease_end(), dead):
            return  # taken by another process, or renewed by a living owner
        try:
            done = await self._put_back(parking)
        except ManifoldError as exc:
            log.warning("could not recover %s yet: %s", parking.path, error_text(exc))
            done = False
        if done:
            await self._repo.drop([parking.id])
        else:
            await self._repo.release([parking.id])

    async def _put_back(self, parking: Parking) -> bool:
        """Apply the rules to one record; whether it is over (else it is tried again)."""
        mounted = await self._storages.ready_storage(parking.storage_id)
        if mounted is None:
            return not await self._stored(parking.storage_id)  # disabled: kept for later
        if mounted.ops is None:
            return False  # failed to start: tried again by the timer
        mount = actual_mount_path(mounted.storage.mount_path)
        return await Shelf(mounted.ops, mount, self._events).put_back(parking)

    async def _stored(self, storage_id: int) -> bool:
        try:
            await self._storages.get(storage_id)
        except ManifoldError:
            return False
        return True


class Shelf:
    """One storage as recovery sees it: its operations, and where it is mounted (to
    tell the tree's listeners of what came back)."""

    def __init__(self, ops: StorageOps, mount: str, events: TreeEvents) -> None:
        self._ops = ops
        self._mount = mount
        self._events = events

    async def put_back(self, parking: Parking) -> bool:
        folder, _ = split_path(parking.path)
        self._ops.dropped(folder, below=False)  # as the back end has it now
        if await self._found(parking.path) is None:
            return True
        if not parking.home:
            await self._remove(parking.path)
            return True
        home = child_path(folder, parking.home)
        if await self._found(home) is None:
            await self._rename(parking.path, home)
            log.info("put %s back at %s", self._virtual(parking.path), self._virtual(home))
            return True
        if parking.garbage:
            await self._remove(parking.path)
            return True
        beside = await self._free_name(folder, parking.home)
        await self._rename(parking.path, beside)
        log.warning(
            "%s was taken: what an interrupted replace left parked is at %s",
            self._virtual(home),
            self._virtual(beside),
        )
        return True

    async def _found(self, path: str) -> Obj | None:
        try:
            return await self._ops.get(path)
        except ObjectNotFound:
            return None

    async def _free_name(self, folder: str, home: str) -> str:
        for number in range(1, MOST_RECOVERED + 1):
            candidate = child_path(folder, recovered_name(home, number))
            if await self._found(candidate) is None:
                return candidate
        raise ServerError(f"no free name to recover {home} under")

    async def _rename(self, path: str, target: str) -> None:
        await self._ops.rename(path, split_path(target)[1])
        await self._events.moved(self._virtual(path), self._virtual(target))

    async def _remove(self, path: str) -> None:
        await self._ops.remove(path)
        await self._events.removed(self._virtual(path))

    def _virtual(self, path: str) -> str:
        return clean_path(f"{self._mount}/{path}")


def recovered_name(home: str, number: int) -> str:
    """``report (recovered 1).pdf`` for ``report.pdf``; the stem is cut so the name
    stays within the longest name a back end takes."""
    stem, dot, extension = home.rpartition(".")
    if not stem:  # no extension, or a name that starts with its only dot
        stem, dot, extension = home, "", ""
    mark = f" (recovered {number})"
    tail = mark + dot + extension
    while stem and name_bytes(stem + tail) > MAX_NAME_BYTES:
        stem = stem[:-1]
    return stem + tail


def _order(parking: Parking) -> tuple[int, bool, datetime, str]:
    """By storage; in each, only copies first, then the oldest first."""
    created = parking.created or datetime.min.replace(tzinfo=UTC)
    return (parking.storage_id, parking.garbage, created, parking.id)
