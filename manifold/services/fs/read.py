"""The file tree, read side, in virtual paths: every read with its permission check.

Every entry point takes an explicit caller and a client-supplied path, joins it
onto the caller's base path (which refuses any escape), finds the nearest meta,
checks access once, and only then asks a storage.

Listings are shared, never copied: a folder's list (merged with virtual mount
folders, then hide-filtered) is derived once per cached listing (``vfs.memo``) and
a page is a pair of bounds into it, so a request costs nothing per entry that is
not on its page.
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from manifold.errors import (
    Forbidden,
    ManifoldError,
    PasswordRequired,
    PermissionDenied,
)
from manifold.models import DiskUsage, Link, LinkArgs, Meta, Obj
from manifold.paths import clean_path, join_base, split_path
from manifold.policy import access
from manifold.services.admin.metas import MetaService
from manifold.services.admin.storages import USAGE_SECONDS
from manifold.services.auth.limiter import GuessLimiter, guessing
from manifold.services.auth.service import Caller
from manifold.services.fs.rules import Confinement, RealPlace
from manifold.services.fs.tree import FileTree, Place
from manifold.vfs.memo import DerivedMemo

# Derived lists kept at once, in objects: a few folders of 100,000 entries.
_VIEW_BUDGET = 400_000


@dataclass(slots=True)
class Listing:
    """One page of a folder: ``entries[start:stop]`` of the visible entries (shared)."""

    entries: builtins.list[Obj]
    start: int
    stop: int
    readme: str
    header: str
    write: bool
    provider: str
    path: str
    signed: bool
    meta: Meta | None = None
    hidden: access.Hides = ()
    direct_upload_tools: builtins.list[str] = field(default_factory=builtins.list)

    @property
    def view(self) -> tuple[str, access.Hides]:
        """What tells this folder's visible entries from another folder's or user's."""
        return self.path, self.hidden

    @property
    def total(self) -> int:
        return len(self.entries)

    @property
    def objs(self) -> builtins.list[Obj]:
        return self.entries[self.start : self.stop]


@dataclass(slots=True)
class Related:
    """Siblings sharing a file's base name (subtitles next to a video), visible ones."""

    objs: builtins.list[Obj]
    folder: str
    signed: bool


@dataclass(slots=True)
class Found:
    obj: Obj
    path: str
    provider: str
    readme: str
    header: str
    meta: Meta | None
    signed: bool = False
    related: Related | None = None
    # A mount point's space (AList's ``mount_details``), where its back end tells it.
    space: DiskUsage | None = None


class GuardedReader:
    """Reads for a caller, each after its checks (base path, metas, hide rules, links).

    ``Guarded*`` objects check the caller; ``FileTree`` below them checks nothing.
    """

    def __init__(
        self, tree: FileTree, metas: MetaService, guesses: GuessLimiter | None = None
    ) -> None:
        self.tree = tree
        self._metas = metas
        # Wrong folder passwords per address (None: no limit).
        self.guesses = guesses
        self._views: DerivedMemo[builtins.list[Obj]] = DerivedMemo(_VIEW_BUDGET)
        self._names: DerivedMemo[tuple[builtins.list[str], builtins.list[int]]]
        self._names = DerivedMemo(_VIEW_BUDGET)
        self._confinement = Confinement(tree)

    def resolve(self, caller: Caller, path: str) -> str:
        """The full path of a path the caller names: below its base path (or its
        ``root``), never outside it."""
        return join_base(caller.base, path)

    async def confine(self, caller: Caller, full: str) -> None:
        """Refuse ``full`` when links take it out of the caller's base path (or root), or
        out of an alias target it is reached through (see ``confine.Confinement``)."""
        if await self.escaping(caller, (full,)):
            raise PermissionDenied()

    async def escaping(self, caller: Caller, paths: Sequence[str]) -> set[str]:
        """Those of ``paths`` that links take out of the caller's base path (its ``root``
        where it has one), asked at once."""
        return await self._confinement.escaping(clean_path(caller.base), paths)

    async def real_place(self, path: str, across_aliases: bool = True) -> RealPlace:
        """Where ``path`` really is: its storage, and its place there with links followed,
        through Aliases. Two paths with the same place are one folder reached twice
        (see ``Confinement.real_place``)."""
        return await self._confinement.real_place(path, across_aliases)

    def links_confine(self, caller: Caller) -> bool:
        """Whether links can take a path out of the caller's base path (see ``escaping``):
        a base path inside a storage, or at the root of one (an Alias's target)."""
        base = clean_path(caller.base)
        return base != "/" and self.tree.find(base) is not None

    async def check_access(self, caller: Caller, path: str, password: str) -> Meta | None:
        """The nearest meta of ``path``, once the caller may enter it; a wrong folder
        password counts against the caller's address (``guessing``), and an address
        with too many is refused every guess, right or wrong, for a while."""
        meta = self._metas.nearest(path)
        if access.can_access(caller.user, meta, path, ""):
            return meta
        async with guessing(self.guesses if password else None, caller.client):
            if not access.can_access(caller.user, meta, path, password):
                raise PasswordRequired()
        return meta

    async def list(
        self,
        caller: Caller,
        path: str,
        password: str,
        page: int,
        per_page: int,
        refresh: bool = False,
    ) -> Listing:
        full = self.resolve(caller, path)
        meta = await self.check_access(caller, full, password)
        await self.confine(caller, full)
        write = access.can_write(caller.user, meta, full)
        if refresh and not write:
            raise Forbidden("Refresh without permission")
        objs, provider = await self.list_path(full, refresh)
        hidden = access.hides(meta, full, caller.user)
        objs = self.visible(objs, full, hidden)
        start, stop = _page_bounds(len(objs), page, per_page)
        return Listing(
            entries=objs,
            start=start,
            stop=stop,
            readme=access.readme_for(meta, full),
            header=access.header_for(meta, full),
            write=write,
            provider=provider,
            path=full,
            signed=self.needs_sign(full, meta),
            meta=meta,
            hidden=hidden,
            direct_upload_tools=self.direct_upload_tools(full) if write else [],
        )

    def direct_upload_tools(self, folder: str) -> builtins.list[str]:
        """How a browser may upload into ``folder`` straight to its storage (OpenList's
        ``direct_upload_tools``); none in a virtual folder or a storage not working."""
        place = self.tree.find(folder)
        try:
            return [] if place is None else place.ops.direct_upload_tools()
        except ManifoldError:
            return []

    async def list_path(self, path: str, refresh: bool = False) -> tuple[builtins.list[Obj], str]:
        """Entries of a virtual folder, unchecked (see ``FileTree.listing``)."""
        return await self.tree.listing(path, refresh)

    def visible(
        self, objs: builtins.list[Obj], folder: str, hidden: access.Hides
    ) -> builtins.list[Obj]:
        """``objs`` of ``folder`` without the ``hidden`` names, worked out once per listing."""
        if not hidden:
            return objs
        return self._views.derive(
            ("visible", folder, hidden),
            objs,
            lambda: [o for o in objs if not access.is_hidden(o.name, hidden)],
            len,
        )

    async def get(self, caller: Caller, path: str, password: str) -> Found:
        full = self.resolve(caller, path)
        meta = await self.check_access(caller, full, password)
        await self.confine(caller, full)
        obj, provider = await self.get_path(full)
        return Found(
            obj,
            full,
            provider,
            access.readme_for(meta, full),
            access.header_for(meta, full),
            meta,
            self.needs_sign(full, meta),
            await self._related(caller, full, obj.name),
            await self._space(caller, full),
        )

    async def _space(self, caller: Caller, path: str) -> DiskUsage | None:
        """The space of the storage mounted at ``path``, for anyone but the guest (as
        AList shows it); None elsewhere, or where the back end does not tell it
        within ``USAGE_SECONDS`` (the object is answered all the same)."""
        place = self.tree.find(path)
        if caller.user.is_guest or place is None or not place.is_root:
            return None
        try:
            async with asyncio.timeout(USAGE_SECONDS):
                return await place.ops.space()
        except (ManifoldError, TimeoutError):
            return None

    async def stat(self, caller: Caller, path: str, password: str) -> tuple[Obj, str]:
        """The object at ``path`` and its full path, after the checks ``get`` makes.

        Unlike ``get`` no sibling is looked for, so a storage whose driver has ``get``
        is asked for this one object and its folder is never listed: a protocol server
        asks this on every request.
        """
        full = self.resolve(caller, path)
        await self.check_access(caller, full, password)
        await self.confine(caller, full)
        return (await self.get_path(full))[0], full

    async def _related(self, caller: Caller, path: str, name: str) -> Related | None:
        """AList's rule: siblings whose name starts with this name minus its extension."""
        folder, own = split_path(path)
        if not own:
            return None  # the root has no parent to share
        stem = name[: name.rfind(".")] if "." in name else name
        try:
            siblings, _ = await self.list_path(folder)
        except ManifoldError:
            return None
        meta = self._metas.nearest(folder)
        hidden = access.hides(meta, folder, caller.user)
        shown = self.visible(siblings, folder, hidden)
        # The folder's names sorted once per listing: a get finds the names starting
        # with its stem by bisection instead of testing every sibling.
        names, order = self._names.derive(
            ("names", folder, hidden), shown, lambda: _sorted_names(shown), lambda v: len(v[0])
        )
        start = bisect.bisect_left(names, stem)
        end = start
        while end < len(names) and names[end].startswith(stem):
            end += 1
        places = sorted(order[i] for i in range(start, end) if names[i] != name)
        related = [shown[i] for i in places]  # in the listing's order, as AList
        if not related:
            return None
        return Related(related, folder, self.needs_sign(folder, meta))

    async def get_path(self, path: str) -> tuple[Obj, str]:
        """The object at a virtual path, unchecked (see ``FileTree.lookup``)."""
        return await self.tree.lookup(path)

    async def dirs(
        self, caller: Caller, path: str, password: str, force_root: bool
    ) -> builtins.list[Obj]:
        if force_root:
            if not caller.user.is_admin:
                raise Forbidden("Permission denied")
            full = clean_path(path)
        else:
            full = self.resolve(caller, path)
            await self.confine(caller, full)
        meta = await self.check_access(caller, full, password)
        objs, _ = await self.list_path(full)
        objs = self.visible(objs, full, access.hides(meta, full, caller.user))
        return [o for o in objs if o.is_dir]

    async def other(self, caller: Caller, path: str, password: str, method: str, data: Any) -> Any:
        """A driver-specific operation (``/api/fs/other``); most drivers have none."""
        full = self.resolve(caller, path)
        await self.check_access(caller, full, password)
        await self.confine(caller, full)
        return await self.tree.other(full, method, data)

    async def link(self, path: str, args: LinkArgs) -> tuple[Obj, Link, str]:
        """The bytes of a file at an already-authorised virtual path.

        Whoever asks, a link out of an alias target is refused here, as a link out of
        a Local root is by its driver: a signed ``/d`` URL names the alias path.
        """
        if await self._confinement.escaping("/", (path,)):
            raise PermissionDenied()
        return await self.tree.link(path, args)

    async def storage_place(self, path: str) -> Place:
        """The storage holding an already-authorised virtual path, refused as ``link``
        refuses it when links take it out of an alias target."""
        if await self._confinement.escaping("/", (path,)):
            raise PermissionDenied()
        return self.tree.place(path)

    async def link_at(self, place: Place, args: LinkArgs) -> tuple[Obj, Link]:
        """``link`` for a path already resolved to ``place`` (``/d`` resolves it once)."""
        if await self._confinement.escaping("/", (place.path,)):
            raise PermissionDenied()
        return await place.ops.link(place.sub_path, args)

    def needs_sign(self, path: str, meta: Meta | None, place: Place | None = None) -> bool:
        """Whether objects under ``path`` carry a sign: storage signing or a password.
        ``place`` spares finding the storage again where the caller has it."""
        place = place or self.tree.find(path)
        storage_signs = place is not None and place.mounted.storage.enable_sign
        return storage_signs or access.password_applies(meta, path)


def _page_bounds(total: int, page: int, per_page: int) -> tuple[int, int]:
    """AList's pagination: ``page`` below 1 is 1, ``per_page`` below 1 is everything."""
    if per_page < 1:
        return 0, total
    start = min((max(page, 1) - 1) * per_page, total)
    return start, min(start + per_page, total)


def _sorted_names(objs: Sequence[Obj]) -> tuple[builtins.list[str], builtins.list[int]]:
    """The names in code point order, and where each one is in ``objs``."""
    order = sorted(range(len(objs)), key=lambda i: objs[i].name)
    return [objs[i].name for i in order], order
