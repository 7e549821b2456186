"""Changes to the tree made through Manifold, told to whoever keeps derived state.

The file services call a ``TreeListener`` after each successful change, in virtual
paths. The search index is one listener; a shared cache in another process would be
another. Listeners must not raise: a failure to update derived state never fails
the user's write.
"""

from __future__ import annotations

import logging
from typing import Protocol

from manifold.logs import error_text
from manifold.models import Obj

log = logging.getLogger("manifold.events")


class TreeListener(Protocol):
    async def created(self, path: str, obj: Obj) -> None:
        """``obj`` now exists at ``path`` (a new or replaced file, or a new folder)."""

    async def removed(self, path: str) -> None:
        """``path`` and everything below it are gone."""

    async def moved(self, src: str, dst: str) -> None:
        """``src`` (and everything below it) is now at ``dst``: a rename or a move."""


class TreeEvents:
    """Fans one change out to every listener, logging (never raising) their failures."""

    def __init__(self) -> None:
        self._listeners: list[TreeListener] = []

    def subscribe(self, listener: TreeListener) -> None:
        self._listeners.append(listener)

    async def created(self, path: str, obj: Obj) -> None:
        for listener in self._listeners:
            try:
                await listener.created(path, obj)
            except Exception as exc:
                log.warning("tree listener failed on create of %s: %s", path, error_text(exc))

    async def removed(self, path: str) -> None:
        for listener in self._listeners:
            try:
                await listener.removed(path)
            except Exception as exc:
                log.warning("tree listener failed on remove of %s: %s", path, error_text(exc))

    async def moved(self, src: str, dst: str) -> None:
        for listener in self._listeners:
            try:
                await listener.moved(src, dst)
            except Exception as exc:
                log.warning("tree listener failed on move of %s: %s", src, error_text(exc))
