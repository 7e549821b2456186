"""Names a back end gives, checked once, where every driver's listings and lookups pass.

A back end is not trusted to name its entries as a folder can: an FTP or SFTP server
may list ``../../secret`` or ``a/b``, an S3 key ``a/../b`` gives a folder an entry
``..``, a WebDAV server's ``%2e%2e`` decodes to ``..``. Joined into a path, such a name
points somewhere else in the tree, another storage included. ``StorageOps`` passes
every listing and every object a driver looks up through ``NameCheck`` before any code
sees them: an entry whose name is no name of the tree (``paths.is_tree_name``), or
holds a control or text-reordering character that no client may give a new entry
(``paths.is_listable_name``), is left out and logged, once, with its name escaped; and
a path through such a name is not found. So is a name under ``paths.RESERVED_PREFIX``:
drivers write data in progress there (an upload, a copy, or what a crash left), which
no front end may list or read by its exact name; it is left out without a warning.

The folder remembers how many entries it left out (``left_out``), so that nothing
decides from the listing alone that a folder is empty and may go: removing it would
remove what is left out with it.
"""

from __future__ import annotations

import builtins
import logging
import operator
from collections import OrderedDict

from manifold.errors import ObjectNotFound
from manifold.models import Obj
from manifold.paths import all_shown_names, is_listable_name, is_reserved_name

log = logging.getLogger("manifold.drivers")

# Folders and names remembered: each left-out name is logged once, not on every
# listing, and each folder's count of left-out entries is kept (the least recently
# listed go first past these numbers).
LOGGED_NAMES = 10_000
FOLDERS_KEPT = 10_000
# Folders whose last listing passed whole are remembered by its objects: a rescan that
# hands out the very same objects (Local reuses every unchanged one) skips the check,
# a tenth of the cost of a rescan of 10,000 entries. A few folders only, since what is
# remembered keeps its objects alive.
PASSED_KEPT = 4


class NameCheck:
    """One storage's check of the names its driver gives."""

    def __init__(self, mount_path: str) -> None:
        self.mount_path = mount_path
        self._logged: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._left_out: OrderedDict[str, int] = OrderedDict()
        self._passed: OrderedDict[str, tuple[Obj, ...]] = OrderedDict()

    def listed(self, folder: str, objs: builtins.list[Obj]) -> builtins.list[Obj]:
        """``objs`` (the listing of ``folder``) without the entries whose names are
        left out; the very list given when none is."""
        if self._passed_before(folder, objs):
            self._passed.move_to_end(folder)
            return objs
        if all_shown_names([obj.name for obj in objs]):
            self._left_out.pop(folder, None)
            self._remember_passed(folder, objs)
            return objs
        self._passed.pop(folder, None)
        kept = [obj for obj in objs if _shown(obj.name)]
        for obj in objs:
            if not is_listable_name(obj.name):
                self._warn(folder, obj.name)
        self._left_out[folder] = len(objs) - len(kept)
        self._left_out.move_to_end(folder)
        while len(self._left_out) > FOLDERS_KEPT:
            self._left_out.popitem(last=False)
        return kept

    def _passed_before(self, folder: str, objs: builtins.list[Obj]) -> bool:
        """Whether ``objs`` are the very objects (frozen, so the same names) of the
        last listing of ``folder`` that passed whole."""
        last = self._passed.get(folder)
        return last is not None and len(last) == len(objs) and all(map(operator.is_, last, objs))

    def _remember_passed(self, folder: str, objs: builtins.list[Obj]) -> None:
        self._passed[folder] = tuple(objs)  # a copy: a driver may reuse its list
        self._passed.move_to_end(folder)
        while len(self._passed) > PASSED_KEPT:
            self._passed.popitem(last=False)

    @staticmethod
    def refuse_unlisted(path: str) -> None:
        """``ObjectNotFound`` when a segment of the clean ``path`` is a name listings
        leave out: what no listing shows is not found by its path either."""
        if not all(_shown(name) for name in path.split("/")[1:]):
            raise ObjectNotFound()

    def found(self, path: str, obj: Obj) -> Obj:
        """``obj`` as the driver looked ``path`` up; ``ObjectNotFound`` when its name is
        one a listing leaves out."""
        if _shown(obj.name):
            return obj
        if not is_reserved_name(obj.name):
            self._warn(path, obj.name)
        raise ObjectNotFound()

    def left_out(self, folder: str) -> int:
        """How many entries the last listing of ``folder`` left out (0 when none, or
        when that listing is forgotten)."""
        return self._left_out.get(folder, 0)

    def _warn(self, where: str, name: str) -> None:
        key = (where, name)
        if key in self._logged:
            return
        self._logged[key] = None
        if len(self._logged) > LOGGED_NAMES:
            self._logged.popitem(last=False)
        log.warning(
            "storage %s: left out an entry of %s named %s: no name a folder can show",
            self.mount_path,
            ascii(where),
            ascii(name),
        )


def _shown(name: str) -> bool:
    """Whether an entry named ``name`` is shown and found: a listable name that is not
    reserved for data in progress."""
    return is_listable_name(name) and not is_reserved_name(name)
