"""A base for the tests' own drivers."""

from __future__ import annotations

from manifold.drivers.base import Driver, OptionsT


class InertDriver(Driver[OptionsT]):
    """A driver with nothing to open or close: a test writes only what it serves
    (``list``, ``link`` and whatever else it needs)."""

    async def init(self) -> None:
        """Nothing to open."""

    async def drop(self) -> None:
        """Nothing to close."""
