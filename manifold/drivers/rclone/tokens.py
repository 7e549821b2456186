"""Keys rclone renews at run time (an OAuth token it refreshes), kept in line across the
server processes that each run their own rclone on one storage's saved ``config``.

Providers rotate refresh tokens: once one process's rclone refreshed, the token every
other process holds is dead. So the saved ``config`` is the truth: a process saves what
its rclone renewed (``to_save``: over what is saved now, never a token expiring before
the saved one), the others take it into their rclone (``to_take``), and a process whose
token is about to expire first asks the database for a newer one (``expires_soon``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from manifold.drivers.rclone.section import Section, parse, updated
from manifold.errors import InvalidRequest


def expiry(value: str | None) -> datetime | None:
    """When a token expires: rclone keeps one as JSON with an RFC 3339 ``expiry``;
    None for any other value."""
    if not value or not value.startswith("{"):
        return None
    try:
        found = json.loads(value).get("expiry")
        when = datetime.fromisoformat(str(found).replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def older(value: str, than: str | None) -> bool:
    """Whether token ``value`` expires before token ``than`` (two processes refreshed
    at once: the later one is kept). False unless both are tokens."""
    mine, theirs = expiry(value), expiry(than)
    return mine is not None and theirs is not None and mine < theirs


def changes(
    section: Section, current: dict[str, Any], passwords: dict[str, bool]
) -> dict[str, str]:
    """Keys rclone holds with another value than ``section`` (passwords aside: rclone
    keeps them obscured, the section may hold them plain)."""
    return {
        key: str(value)
        for key, value in current.items()
        if key != "type" and not passwords.get(key) and section.values.get(key) != str(value)
    }


def to_save(base: Section, mine: Section, stored: str) -> str:
    """The config to save: ``stored`` (what the database holds now) with what this
    process renewed since ``base`` (what it last saved or took) written over it, but
    for a token that expires before the stored one."""
    theirs = parse(stored).values
    renewed = {key: value for key, value in mine.values.items() if base.values.get(key) != value}
    kept = {key: value for key, value in renewed.items() if not older(value, theirs.get(key))}
    return updated(stored, kept) if kept else stored


def to_take(mine: Section, stored: Section, passwords: dict[str, bool]) -> dict[str, str]:
    """The keys of ``stored`` this process's rclone must take: those with another value
    than ``mine``, but a token expiring before this process's and a password (an edit
    of the storage restarts it anyway)."""
    return {
        key: value
        for key, value in stored.values.items()
        if mine.values.get(key) != value
        and not passwords.get(key)
        and not older(value, mine.values.get(key))
    }


def expires_soon(config: str, seconds: float) -> bool:
    """Whether a token of ``config`` expires within ``seconds`` (rclone would refresh
    it on the next call)."""
    soonest = _soonest(config)
    return soonest is not None and soonest < datetime.now(UTC) + timedelta(seconds=seconds)


@lru_cache(maxsize=64)
def _soonest(config: str) -> datetime | None:
    """The earliest expiry of a token in ``config`` (asked before every call: cached)."""
    try:
        values = parse(config).values.values()
    except InvalidRequest:
        return None
    found = [when for when in map(expiry, values) if when is not None]
    return min(found, default=None)
