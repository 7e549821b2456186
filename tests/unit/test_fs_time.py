"""Times as the API shows them, by hand and through orjson."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest

from manifold.api.fs_time import ORJSON_TIME, ZERO_TIME, iso_time, json_time

TIMES = [
    datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC),
    datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC),
    datetime(2024, 5, 1, 10, 0, 0, 100, tzinfo=UTC),
    datetime(2024, 5, 1, 18, 0, 0, 5, tzinfo=timezone(timedelta(hours=8))),
    datetime(1999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(1, 1, 1, tzinfo=UTC),
    None,
]


@pytest.mark.parametrize("when", TIMES)
def test_orjson_writes_what_iso_time_spells(when: datetime | None) -> None:
    encoded = orjson.dumps(json_time(when), option=ORJSON_TIME)
    assert orjson.loads(encoded) == iso_time(when)


def test_examples() -> None:
    assert iso_time(TIMES[1]) == "2024-05-01T10:00:00.123456Z"
    assert iso_time(TIMES[3]) == "2024-05-01T10:00:00.000005Z"
    assert iso_time(None) == iso_time(TIMES[5]) == ZERO_TIME
