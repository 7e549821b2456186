"""Times as the API shows them: RFC 3339 in UTC, AList's zero time for none."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson

ZERO_TIME = "0001-01-01T00:00:00Z"
# With this option orjson writes a UTC datetime exactly as ``iso_time`` spells it.
ORJSON_TIME = orjson.OPT_UTC_Z


def iso_time(when: datetime | None) -> str:
    if when is None or when.year <= 1970:
        return ZERO_TIME
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def json_time(when: datetime | None) -> datetime | str:
    """``when`` for ``orjson.dumps(..., option=ORJSON_TIME)``: encoded as ``iso_time``
    spells it, but by orjson itself in the common case (already in UTC)."""
    if when is None or when.year <= 1970:
        return ZERO_TIME
    if when.tzinfo is UTC:
        return when
    return iso_time(when)
