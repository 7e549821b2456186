"""The last scan of recently listed folders, so that a rescan reuses what did not change.

A rescan still reads every entry's ``stat``; an entry whose modification time, size
and mode are what they were last time is handed back as the very ``Obj`` made then,
instead of a new one equal to it. That saves building the object and its time, and
lets whatever was derived from the last listing (sorted, filtered and encoded
entries, see ``vfs.memo``) be recognised by identity rather than compared field by
field. A folder whose names are those of its last scan is not sorted again.

One budget, in entries, for every Local storage of the process; folders listed least
recently are forgotten first. Scans run in worker threads, so every access holds a
lock (held for dictionary operations only, never during a scan).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from manifold.models import Obj

# Entries kept for all folders together. The objects are mostly held by the listing
# cache anyway; past it, at some 400 bytes an entry, the budget is about 40 MiB.
SEEN_BUDGET = 100_000


@dataclass(frozen=True, slots=True)
class Scan:
    """What one scan of a folder found. Every list is shared: never change one.

    ``found`` is the folder's names as the system listed them; ``looked`` those that
    were looked at (no temporaries, hidden names only where shown), in that order, and
    ``names`` the same sorted; ``temps`` the temporaries; ``objs`` the objects made, in
    name order: the listing handed out; and beside each in ``stamps`` what it was made
    from: the modification time in ns (with the birth time where the system has one).
    ``places`` (once a rescan needed it) gives for each of ``looked`` its place in
    ``objs``, -1 for a name left out (gone meanwhile, a pipe, a link leading out).
    """

    found: list[str] = field(default_factory=list)
    looked: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    temps: list[str] = field(default_factory=list)
    objs: list[Obj] = field(default_factory=list)
    stamps: list[object] = field(default_factory=list)
    places: list[int] | None = None


NOTHING = Scan()


class SeenFolders:
    def __init__(self, budget: int = SEEN_BUDGET) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._folders: OrderedDict[tuple[object, str], Scan] = OrderedDict()
        self._count = 0

    def get(self, owner: object, folder: str) -> Scan:
        """What the last scan of ``folder`` (of the storage ``owner``) found."""
        with self._lock:
            found = self._folders.get((owner, folder))
            if found is None:
                return NOTHING
            self._folders.move_to_end((owner, folder))
            return found

    def put(self, owner: object, folder: str, scan: Scan) -> None:
        key = (owner, folder)
        size = len(scan.found)
        with self._lock:
            old = self._folders.pop(key, None)
            if old is not None:
                self._count -= len(old.found)
            if size > self._budget:
                return
            self._folders[key] = scan
            self._count += size
            while self._count > self._budget:
                _, dropped = self._folders.popitem(last=False)
                self._count -= len(dropped.found)

    def forget(self, owner: object) -> None:
        """Drop every folder of one storage (it is being unmounted)."""
        with self._lock:
            for key in [k for k in self._folders if k[0] is owner]:
                self._count -= len(self._folders.pop(key).found)

    def __len__(self) -> int:
        return self._count


SEEN = SeenFolders()
