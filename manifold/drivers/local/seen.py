"""The entries of recently listed folders, so that a rescan reuses unchanged objects.

A rescan still reads every entry's ``stat``; an entry whose modification time, size
and mode are what they were last time is handed back as the very ``Obj`` made then,
instead of a new one equal to it. That saves building the object and its time, and
lets whatever was derived from the last listing (sorted, filtered and encoded
entries, see ``vfs.memo``) be recognised by identity rather than compared field by
field.

One budget, in entries, for every Local storage of the process; folders listed least
recently are forgotten first. Scans run in worker threads, so every access holds a
lock (held for dictionary operations only, never during a scan).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from manifold.models import Obj

# Entries kept for all folders together. The objects are mostly held by the listing
# cache anyway; past it, at some 400 bytes an entry, the budget is about 40 MiB.
SEEN_BUDGET = 100_000

# A folder: the objects of its last scan, in the order found, and beside each the
# stamp it was made from: the modification time in ns (with the birth time where
# the system has one). Both lists are shared: never change them.
Seen = tuple[list[Obj], list[object]]
_NONE: Seen = ([], [])


class SeenFolders:
    def __init__(self, budget: int = SEEN_BUDGET) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._folders: OrderedDict[tuple[object, str], Seen] = OrderedDict()
        self._count = 0

    def get(self, owner: object, folder: str) -> Seen:
        """What the last scan of ``folder`` (of the storage ``owner``) found."""
        with self._lock:
            found = self._folders.get((owner, folder))
            if found is None:
                return _NONE
            self._folders.move_to_end((owner, folder))
            return found

    def put(self, owner: object, folder: str, objs: list[Obj], stamps: list[object]) -> None:
        key = (owner, folder)
        with self._lock:
            old = self._folders.pop(key, None)
            if old is not None:
                self._count -= len(old[0])
            if len(objs) > self._budget:
                return
            self._folders[key] = (objs, stamps)
            self._count += len(objs)
            while self._count > self._budget:
                _, dropped = self._folders.popitem(last=False)
                self._count -= len(dropped[0])

    def forget(self, owner: object) -> None:
        """Drop every folder of one storage (it is being unmounted)."""
        with self._lock:
            for key in [k for k in self._folders if k[0] is owner]:
                self._count -= len(self._folders.pop(key)[0])

    def __len__(self) -> int:
        return self._count


SEEN = SeenFolders()
