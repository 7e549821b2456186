"""The rule book every front end shares: what a write may replace at its destination,
and where a path may lead.

What a write may replace
------------------------

Each protocol says what its verb asks for, and nothing more: WebDAV's
``Overwrite: T`` asks to replace anything (RFC 4918: the destination, file or
folder, is deleted first), SFTP's ``posix-rename@openssh.com``, FTP's ``RNTO`` and
``STOR``, S3's ``PutObject`` and ``CopyObject`` and the API's ``overwrite`` ask to
replace a file by a file, and SFTP's plain rename asks to replace nothing. The
decision is made here, once, before anything is touched:

* a destination that is the source reached by another path is the source itself
  (the caller decides whether that is a no-op); one inside the source, or one that
  holds the source (an ancestor), is ``Overlapping``, whatever the request asked;
* a taken destination is ``FileExists`` unless the request replaces, and a folder on
  either side is ``FileExists`` unless the request replaces folders, or (the API's
  copy with ``overwrite``, as AList does it) merges a folder into a folder: the
  folder stays and each file copied into it replaces its namesake;
* replacing needs the remove permission, since the replaced object is gone after,
  except an empty file, which loses nothing (the placeholder a WebDAV ``LOCK`` makes
  and the client's ``PUT`` then fills);
* a folder that goes must be removable whole by the caller (no entry withheld from
  them), as a remove checks it.

The steps that then place the object (``placing``) never replace what these rules
refused, and never a folder that holds the source, whoever calls them.

Where a path may lead
---------------------
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
The caller's root (its base path, or a narrower folder a protocol holds it in, as an S3
bucket's) is such a base; ``Confinement`` finds the paths that leave it.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from manifold.errors import AliasLoop, FileExists, Overlapping, PermissionDenied
from manifold.models import Obj, Perm, User
from manifold.paths import clean_path, is_sub_path, split_path

if TYPE_CHECKING:
    from manifold.services.fs.tree import FileTree, Place

INTO_ITSELF = "the destination folder is a subfolder of the source folder"
HOLDS_SOURCE = "the destination holds the source: it cannot be replaced by it"


@dataclass(frozen=True)
class Replace:
    """What a request may replace at a taken destination."""

    files: bool = False  # a file by a file
    folders: bool = False  # anything by anything: a folder on either side
    merge: bool = False  # a folder copied into a folder of its name, file by file

    @classmethod
    def of(cls, overwrite: bool, folders: bool = False) -> Replace:
        """A request's ``overwrite``, replacing folders too where its protocol says so."""
        return cls(files=overwrite, folders=overwrite and folders)


NOTHING = Replace()
FILES = Replace(files=True)
ANYTHING = Replace(files=True, folders=True)


async def overlap(tree: FileTree, src: str, dst: str) -> bool:
    """Whether ``dst`` is the object at ``src`` itself, reached by whatever path;
    ``Overlapping`` when ``dst`` lies inside it or holds it."""
    if clean_path(src) == clean_path(dst):
        return True
    real, real_dst = await tree.backing_path(src), await tree.backing_path(dst)
    if real == real_dst:
        return True
    if is_sub_path(real, real_dst):
        raise Overlapping(INTO_ITSELF)
    if is_sub_path(real_dst, real):
        raise Overlapping(HOLDS_SOURCE)
    return False


async def destination(
    tree: FileTree, user: User, dst: str, replace: Replace, source: Obj | None
) -> Obj | None:
    """What stands at ``dst`` and may go for ``source`` (None for a new folder, or a
    put that has no object yet: a file), or None for a free name; refused by the
    rules above otherwise. The overlap of a source with ``dst`` is ``overlap``'s."""
    existing = await tree.exists(tree.place(dst))
    if existing is None:
        return None
    name = split_path(dst)[1]
    if not replace.files:
        raise FileExists(name)
    moving_folder = source is not None and source.is_dir
    merging = replace.merge and existing.is_dir and moving_folder
    if (existing.is_dir or moving_folder) and not (replace.folders or merging):
        raise FileExists(name)
    if not may_replace(user, existing):
        raise PermissionDenied()
    return existing


def may_replace(user: User, existing: Obj) -> bool:
    """Whether ``user`` may have ``existing`` replaced (or, a folder, merged into): the
    remove bit, unless it is an empty file, whose replacing loses nothing."""
    if not existing.is_dir and existing.size == 0:
        return True
    return user.can(Perm.REMOVE)


# Where a folder really is: the storages on the way (Aliases, when they count, then the
# one holding it) and its real path there.
RealPlace = tuple[tuple[int, ...], str]
# A group of paths of one storage, entered at one place: (path, its place) pairs.
_Group = builtins.list[tuple[str, "Place"]]


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
