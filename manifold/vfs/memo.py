"""Values derived from a listing, kept for as long as that listing is current.

A cached listing is never changed in place: a change stores a new list (see
``ListCache``). So a value derived from a list (merged with virtual folders,
hide-filtered, rendered) stays right exactly as long as the cache still hands out
that same list object, and asking costs an identity comparison. An entry holds
its source, so the source's identity cannot pass to another object meanwhile.
Entries are dropped least recently used first once their total weight (roughly,
the number of objects they hold) passes the budget.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class DerivedMemo(Generic[V]):
    def __init__(self, budget: int) -> None:
        self._entries: OrderedDict[Hashable, tuple[object, V, int]] = OrderedDict()
        self._budget = budget
        self._weight = 0

    def get(self, key: Hashable, source: object) -> V | None:
        """The value kept under ``key`` if it was derived from ``source`` itself."""
        entry = self._entries.get(key)
        if entry is None or entry[0] is not source:
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def peek(self, key: Hashable) -> V | None:
        """The value kept under ``key`` whatever its source: stale, but maybe reusable."""
        entry = self._entries.get(key)
        return entry[1] if entry is not None else None

    def put(self, key: Hashable, source: object, value: V, weight: int) -> V:
        """Keep ``value``, derived from ``source``, replacing whatever ``key`` held."""
        self.drop(key)
        self._entries[key] = (source, value, weight)
        self._weight += weight
        while self._weight > self._budget and len(self._entries) > 1:
            _, (_, _, dropped) = self._entries.popitem(last=False)
            self._weight -= dropped
        return value

    def derive(
        self, key: Hashable, source: object, build: Callable[[], V], weigh: Callable[[V], int]
    ) -> V:
        """The kept value for ``(key, source)``, building and keeping it when missing."""
        found = self.get(key, source)
        if found is not None:
            return found
        value = build()
        return self.put(key, source, value, weigh(value))

    def drop(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._weight -= entry[2]

    def __len__(self) -> int:
        return len(self._entries)
