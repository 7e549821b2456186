"""Times as the API shows them: RFC 3339 in UTC, AList's zero time for none."""

from __future__ import annotations

from datetime import UTC, datetime

ZERO_TIME = "0001-01-01T00:00:00Z"


def iso_time(when: datetime | None) -> str:
    if when is None or when.year <= 1970:
        return ZERO_TIME
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")
