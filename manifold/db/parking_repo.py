"""The parking table: objects a replace or a move in progress parked under a hidden
name, shared by every instance on the database (see ``services.fs.parking``).

A record is held by the owner that made it while its lease runs; recovery takes one
over by one conditional update (``claim``), as a task is claimed: when nobody holds
it, its lease ran out, or its owner is known to be dead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, delete, insert, or_, select, update

from manifold.db import tables as t
from manifold.db.repos import Repo
from manifold.db.task_repo import as_utc

_c = t.parkings.c


@dataclass(frozen=True, slots=True)
class Parking:
    """One parked object: where it lies, the name it must get back, and whether it may
    go once that name is taken (else it is the only copy)."""

    id: str
    storage_id: int
    path: str
    home: str
    garbage: bool
    owner: str | None = None
    lease_until: datetime | None = None
    created: datetime | None = None


class ParkingRepo(Repo):
    async def add(self, parking: Parking) -> None:
        await self._write(insert(t.parkings).values(**_values(parking)))

    async def drop(self, ids: Iterable[str]) -> None:
        wanted = list(ids)
        if wanted:
            await self._write(delete(t.parkings).where(_c.id.in_(wanted)))

    async def get(self, parking_id: str) -> Parking | None:
        found = await self._parkings(_c.id == parking_id)
        return found[0] if found else None

    async def all(self) -> list[Parking]:
        return await self._parkings()

    async def of_owners(self, owners: Iterable[str]) -> list[Parking]:
        """The records ``owners`` made (owners found dead), oldest first."""
        return await self._parkings(_c.owner.in_(list(owners)))

    async def unheld(self, now: datetime) -> list[Parking]:
        """The records nobody holds now (let go of, or a lease run out), oldest first."""
        return await self._parkings(_free(now))

    async def renew(self, ids: Iterable[str], owner: str, lease_until: datetime) -> None:
        """Extend the lease of the records ``owner`` still holds among ``ids``."""
        wanted = list(ids)
        if wanted:
            held = update(t.parkings).where(_c.id.in_(wanted), _c.owner == owner)
            await self._write(held.values(lease_until=lease_until))

    async def release(self, ids: Iterable[str]) -> None:
        """Let go of records whose operation ended with the object still parked, for
        recovery to take at once."""
        wanted = list(ids)
        if wanted:
            stmt = update(t.parkings).where(_c.id.in_(wanted))
            await self._write(stmt.values(owner=None, lease_until=None))

    async def claim(
        self,
        parking_id: str,
        owner: str,
        now: datetime,
        lease_until: datetime,
        dead: str | None = None,
    ) -> bool:
        """Take the record for ``owner`` if nobody holds it, or ``dead`` (an owner
        known to be gone) does; whether it was taken."""
        free = _free(now) if dead is None else or_(_free(now), _c.owner == dead)
        stmt = update(t.parkings).where(_c.id == parking_id, free)
        result = await self._write(stmt.values(owner=owner, lease_until=lease_until))
        return bool(result.rowcount)

    async def _parkings(self, *where: ColumnElement[bool]) -> list[Parking]:
        stmt = select(t.parkings).where(*where).order_by(_c.created, _c.id)
        return [_parking(row._mapping) for row in await self._rows(stmt)]


def _free(now: datetime) -> ColumnElement[bool]:
    """Held by nobody: no owner, or an owner whose lease has run out."""
    return or_(_c.owner.is_(None), _c.lease_until.is_(None), _c.lease_until < now)


def _values(parking: Parking) -> dict[str, object]:
    return {
        "id": parking.id,
        "storage_id": parking.storage_id,
        "path": parking.path,
        "home": parking.home,
        "garbage": parking.garbage,
        "owner": parking.owner,
        "lease_until": parking.lease_until,
        "created": parking.created,
    }


def _parking(row: object) -> Parking:
    values = dict(row)  # type: ignore[call-overload]
    values["lease_until"] = as_utc(values["lease_until"])
    values["created"] = as_utc(values["created"])
    values["garbage"] = bool(values["garbage"])
    return Parking(**values)
