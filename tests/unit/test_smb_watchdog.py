"""SMB's watchdog: a call past its deadline has its connection severed, and a call
that says it made a step (a folder removed entry by entry) gets its time anew."""

from __future__ import annotations

import time

from manifold.drivers.base import made_progress
from manifold.drivers.smb.watchdog import Watchdog


def test_a_call_without_a_step_past_its_deadline_is_severed() -> None:
    severed: list[str] = []
    watchdog = Watchdog("test-watchdog")
    try:
        with watchdog.watch(0.2, lambda: severed.append("cut")):
            time.sleep(1.0)
    finally:
        watchdog.close()
    assert severed == ["cut"]


def test_a_call_making_steady_steps_is_never_severed() -> None:
    # Ten steps a quarter of the deadline apart: longer than it in all, never
    # near it between two steps.
    severed: list[str] = []
    watchdog = Watchdog("test-watchdog")
    try:
        with watchdog.watch(1.0, lambda: severed.append("cut")):
            for _ in range(10):
                time.sleep(0.25)
                made_progress()
    finally:
        watchdog.close()
    assert severed == []
