"""Where a path really is, through links and any number of Aliases: found in one place.

A path below a base path is confined when no link takes it out of the place it was
entered through:

* a storage mounted at or below the base is entered at its root, which its driver
  keeps every link inside;
* a storage holding the base is entered at the base: a path whose real place
  (``Driver.real_paths``) is not below the base's real place has left it;
* an Alias is entered where its target lies: the path and the place it was entered
  are both carried into the target (``Driver.served_from``), and the same rules apply
  there, down to the storage that really holds the bytes.

So a link in an alias target that leads out of the target leaves the alias, as a link
out of a Local root leaves that storage, however many Aliases lie on the way. An Alias
met twice while a path is carried down is a loop (its tree holds itself): ``AliasLoop``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from manifold.errors import AliasLoop
from manifold.paths import is_sub_path
from manifold.services.fs.tree import FileTree, Place

# Where a folder really is: the storages on the way (Aliases, when they count, then the
# one holding it) and its real path there.
RealPlace = tuple[tuple[int, ...], str]
# A group of paths of one storage, entered at one place: (path, its place) pairs.
_Group = builtins.list[tuple[str, Place]]


class Confinement:
    def __init__(self, tree: FileTree) -> None:
        self._tree = tree

    async def escaping(self, anchor: str, paths: Sequence[str]) -> set[str]:
        """Those of ``paths`` (each at or below ``anchor``) that links take out of it."""
        return await self._escaping(anchor, paths, ())

    async def real_place(self, path: str, across_aliases: bool = True) -> RealPlace:
        """The storage that really holds ``path`` and its place there, links followed.

        Two paths with the same place are one folder reached twice: a link loop, or
        (``across_aliases``) a folder reached both directly and through an Alias.
        Without it, the Aliases crossed on the way are part of the place, so a folder
        shown by an Alias differs from the folder itself but a link loop in it does not.
        """
        through: tuple[Place, ...] = ()
        while True:
            place = self._tree.find(path)
            if place is None:
                return (0,), path  # a virtual folder: no link leads to it
            driver = place.ops.driver
            served = await driver.served_from(place.sub_path, [place.sub_path])
            pair = served[0] if served is not None else None
            if pair is None:
                crossed = () if across_aliases else tuple(id(p.mounted) for p in through)
                return (*crossed, id(place.mounted)), await self._real(place, served is None)
            through = _entering(through, place)
            path = pair[1]

    @staticmethod
    async def _real(place: Place, has_links: bool) -> str:
        """``place`` with its storage's links followed (a folder an Alias makes has none)."""
        if not has_links:
            return place.sub_path
        (real,) = await place.ops.driver.real_paths([place.sub_path])
        return real if real is not None else place.sub_path

    async def _escaping(
        self, anchor: str, paths: Sequence[str], through: tuple[Place, ...]
    ) -> set[str]:
        at_anchor = self._tree.find(anchor)
        groups: dict[tuple[int, str], _Group] = {}
        for path in paths:
            place = self._tree.find(path)
            if place is None:
                continue  # a virtual folder: no link leads to it
            inside = at_anchor is not None and at_anchor.same_storage(place)
            entered = at_anchor.sub_path if inside and at_anchor is not None else "/"
            groups.setdefault((id(place.mounted), entered), []).append((path, place))
        found: set[str] = set()
        for (_, entered), group in groups.items():
            found |= await self._group_escaping(entered, group, through)
        return found

    async def _group_escaping(
        self, entered: str, group: _Group, through: tuple[Place, ...]
    ) -> set[str]:
        """Those of one storage's paths, entered at ``entered``, that leave it."""
        driver = group[0][1].ops.driver
        subs = [place.sub_path for _, place in group]
        served = await driver.served_from(entered, subs)
        if served is None:
            if entered == "/":
                return set()  # the driver holds links inside its root itself
            real_anchor, *reals = await driver.real_paths([entered, *subs])
            return {
                path
                for (path, _), real in zip(group, reals, strict=True)
                if real is None or real_anchor is None or not is_sub_path(real_anchor, real)
            }
        through = _entering(through, group[0][1])
        carried: dict[str, builtins.list[tuple[str, str]]] = {}
        for (path, _), pair in zip(group, served, strict=True):
            if pair is not None:
                carried.setdefault(pair[0], []).append((path, pair[1]))
        found: set[str] = set()
        for anchor, pairs in carried.items():
            inner = await self._escaping(anchor, [target for _, target in pairs], through)
            found.update(path for path, target in pairs if target in inner)
        return found


def _entering(through: tuple[Place, ...], place: Place) -> tuple[Place, ...]:
    """``through`` with the Alias of ``place`` added; ``AliasLoop`` when it is there."""
    if any(place.same_storage(seen) for seen in through):
        raise AliasLoop.through([p.mount_path for p in (*through, place)])
    return (*through, place)
