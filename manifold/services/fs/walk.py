"""Walking the tree on a caller's behalf: each entry passes the checks a direct request does.

Operations that reach entries the caller never named (``recursive_move``,
``remove_empty_directory``, copies between storages, search hits, and archive or batch
work to come) go through ``TreeWalker``. An entry is reached only when the caller could
name it directly: it is not hidden by its folder's rules nor by its own meta, any folder
password over it was given (or the user needs none), and no link takes it out of the
caller's base path. Whatever fails a check is withheld, never followed. A folder reached
twice through links (a loop) is entered once, and so is a folder an Alias shows again.

A walk is bounded: past ``MAX_DEPTH`` levels below its start, or ``MAX_ENTRIES`` entries,
it stops with ``WalkTooLarge`` rather than run on; a walk whose request is cancelled (its
client gone) stops at its next folder, since every folder is an ``await``.

Whole-folder operations that do not walk (a rename, a move or copy inside one storage,
a remove) would carry withheld entries along unseen; ``guard_whole`` refuses them when
the folder holds anything the caller could not reach.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from dataclasses import dataclass

from manifold.errors import AliasLoop, PermissionDenied, ServerError
from manifold.models import Meta, Obj, Perm
from manifold.paths import child_path, is_sub_path
from manifold.policy import access
from manifold.services.admin.metas import MetaService
from manifold.services.auth.service import Caller
from manifold.services.fs.read import GuardedReader
from manifold.services.fs.rules import RealPlace

# How far below its start a walk goes, and how many entries it meets, before it stops.
MAX_DEPTH = 256
MAX_ENTRIES = 1_000_000


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    obj: Obj


@dataclass(frozen=True, slots=True)
class Visit:
    """One folder as the caller may reach it: the entries, and whether any were withheld."""

    entries: builtins.list[Entry]
    withheld: bool


class HiddenContents(PermissionDenied):
    default_message = "permission denied: the folder holds entries you cannot access"


class WalkTooLarge(ServerError):
    """A walk past its bounds: the request would go on for too long, or forever."""

    @classmethod
    def too_deep(cls, path: str) -> WalkTooLarge:
        return cls(f"walk too deep: more than {MAX_DEPTH} levels below the start at {path}")

    @classmethod
    def too_many(cls) -> WalkTooLarge:
        return cls(f"walk too large: more than {MAX_ENTRIES} entries")


class LoopGuard:
    """Tells a folder met for the first time from one reached again through links.

    ``across_aliases``: a folder shown by an Alias counts as the folder itself, and a
    loop of Aliases raises ``AliasLoop`` (a request's walk: it acts on each folder once
    and says why it stopped). Without it (the search index, which names every path a
    folder is shown at), an Alias's folder is a folder of its own and a loop of
    Aliases is simply not entered.
    """

    def __init__(self, fs: GuardedReader, across_aliases: bool = False) -> None:
        self._fs = fs
        self._across = across_aliases
        self._seen: set[RealPlace] = set()

    async def first_time(self, folder: str) -> bool:
        try:
            place = await self._fs.real_place(folder, self._across)
        except AliasLoop:
            if self._across:
                raise
            return False
        if place in self._seen:
            return False
        self._seen.add(place)
        return True


class TreeWalker:
    def __init__(self, fs: GuardedReader, metas: MetaService) -> None:
        self._fs = fs
        self._metas = metas

    async def visit(
        self, caller: Caller | None, folder: str, password: str, refresh: bool = True
    ) -> Visit:
        """The entries of ``folder`` the caller may reach (``None``: the server itself)."""
        objs, _ = await self._fs.list_path(folder, refresh)
        entries = [Entry(child_path(folder, obj.name), obj) for obj in objs]
        if caller is None:
            return Visit(entries, False)
        hidden = access.hides(self._metas.nearest(folder), folder, caller.user)
        allowed = [
            e
            for e in entries
            if not access.is_hidden(e.obj.name, hidden)
            and access.can_access(caller.user, self._metas.nearest(e.path), e.path, password)
        ]
        escaping = await self._fs.escaping(caller, [e.path for e in allowed])
        kept = [e for e in allowed if e.path not in escaping]
        return Visit(kept, len(kept) != len(entries))

    async def walk(
        self, caller: Caller | None, folder: str, password: str, start: Visit | None = None
    ) -> AsyncIterator[tuple[Entry, Visit | None]]:
        """Every reachable entry below ``folder``, depth first; a folder comes with its visit.

        ``start`` is the visit of ``folder`` when the caller has made it already. A
        folder whose real place was entered already (a link loop) comes with ``None``
        and is not entered again.
        """
        loops = LoopGuard(self._fs, across_aliases=True)
        await loops.first_time(folder)
        stack = [(start or await self.visit(caller, folder, password), 1)]
        met = 0
        while stack:
            visit, depth = stack.pop()
            met += len(visit.entries)
            if met > MAX_ENTRIES:
                raise WalkTooLarge.too_many()
            for entry in visit.entries:
                if not entry.obj.is_dir:
                    yield entry, None
                    continue
                inner = None
                if await loops.first_time(entry.path):
                    if depth >= MAX_DEPTH:
                        raise WalkTooLarge.too_deep(folder)
                    inner = await self.visit(caller, entry.path, password)
                    stack.append((inner, depth + 1))
                yield entry, inner

    async def guard_whole(
        self, caller: Caller, path: str, password: str, links: bool = True
    ) -> None:
        """Refuse a whole-folder change of ``path`` that would carry withheld entries along.

        Metas withhold entries inside one storage's folder: a password the caller lacks
        below ``path``, or hide rules over it. So do links out of the caller's base path
        (``links``): moving a folder that holds one would put the link at paths the
        caller named before, where a sign given then would follow it out. Without such
        a meta, or a base path links can leave, nothing is walked; otherwise the folder
        is walked to see whether anything is withheld.
        """
        metas = self._metas.all()
        if any(_locked_below(m, path, caller, password) for m in metas):
            raise HiddenContents()
        hides = not caller.user.can(Perm.SEE_HIDDEN) and any(_hides_inside(m, path) for m in metas)
        if not hides and not (links and self._fs.links_confine(caller)):
            return
        obj, _ = await self._fs.get_path(path)
        if not obj.is_dir:
            return
        visit = await self.visit(caller, path, password)
        if visit.withheld:
            raise HiddenContents()
        async for _, inner in self.walk(caller, path, password, visit):
            if inner is not None and inner.withheld:
                raise HiddenContents()


def _locked_below(meta: Meta, path: str, caller: Caller, password: str) -> bool:
    """Whether ``meta`` guards a folder strictly below ``path`` with a password not given."""
    return (
        meta.path != path
        and is_sub_path(path, meta.path)
        and not access.unlocks(caller.user, meta, password)
    )


def _hides_inside(meta: Meta, path: str) -> bool:
    """Whether ``meta``'s hide rules can apply to some folder at or below ``path``."""
    if not meta.hide:
        return False
    return is_sub_path(path, meta.path) or (meta.h_sub and is_sub_path(meta.path, path))
