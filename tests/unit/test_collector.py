"""The server's garbage-collector settings (``manifold.server.tune_collector``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from manifold.server import YOUNG_COLLECTION_EVERY, tune_collector


@pytest.fixture
def restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored")
def test_what_exists_at_start_is_frozen_and_young_collections_are_rarer() -> None:
    _, middle, oldest = gc.get_threshold()
    started: list[int] = []  # a container the collector tracks
    assert any(o is started for o in gc.get_objects())
    tune_collector()
    assert gc.get_freeze_count() > 0
    assert not any(o is started for o in gc.get_objects())
    assert gc.get_threshold() == (YOUNG_COLLECTION_EVERY, middle, oldest)
