"""WebDAV dead properties: what clients store on a path with PROPPATCH.

Kept in the database and mirrored in memory (the table is small: a few properties
on the files a client marked), so a listing finds each entry's properties by one
dict lookup. They follow their object: moved, copied and removed with it, below
folders too. ``generation`` changes with every change, for whoever caches
renderings. Other processes on the same database reload them when the change bus
tells them of a change made here.
"""

from __future__ import annotations

from collections.abc import Mapping

from manifold.db.props_repo import DavPropRepo
from manifold.errors import PermissionDenied
from manifold.models import Perm
from manifold.paths import is_sub_path
from manifold.services.auth.service import Caller
from manifold.state.bus import Bus, MemoryBus

_NONE: Mapping[str, str] = {}


class DeadProps:
    def __init__(self, repo: DavPropRepo, bus: Bus | None = None) -> None:
        self._repo = repo
        # Other processes reload on every change made here.
        self._bus: Bus = bus or MemoryBus()
        self._by_path: dict[str, dict[str, str]] = {}
        self.generation = 0

    async def start(self) -> None:
        """Load every property (again: another process changed some)."""
        loaded: dict[str, dict[str, str]] = {}
        for path, name, value in await self._repo.all():
            loaded.setdefault(path, {})[name] = value
        self._by_path = loaded
        self.generation += 1

    def of(self, path: str) -> Mapping[str, str]:
        return self._by_path.get(path, _NONE)

    @staticmethod
    def require_manage(caller: Caller) -> None:
        """Setting properties, and locking, is managing: WebDAV's manage bit (9), as
        for every other WebDAV write."""
        if not caller.user.is_admin and not caller.user.can(Perm.WEBDAV_MANAGE):
            raise PermissionDenied()

    async def change(
        self, caller: Caller, path: str, changes: list[tuple[str, str | None]]
    ) -> None:
        """Set (value) or remove (None) each named property of ``path``, in order."""
        self.require_manage(caller)
        current = dict(self._by_path.get(path, {}))
        for name, value in changes:
            if value is None:
                current.pop(name, None)
            else:
                current[name] = value
        names = {name for name, _ in changes}
        added = [(path, n, current[n]) for n in names if n in current]
        await self._repo.replace([(path, n) for n in names], added)
        self._store(path, current)
        self._bus.post("dav-props", {})

    async def move(self, src: str, dst: str) -> None:
        moved = self._below(src)
        if not moved:
            return
        await self.remove(dst)
        rows = [(dst + p[len(src) :], n, v) for p, props in moved for n, v in props.items()]
        gone = [(p, n) for p, props in moved for n in props]
        await self._repo.replace(gone, rows)
        for path, _ in moved:
            self._by_path.pop(path, None)
        self._load(rows)
        self._bus.post("dav-props", {})

    async def copy(self, src: str, dst: str, deep: bool = True) -> None:
        """Give ``dst`` (and with ``deep`` what is below it) the properties of ``src``."""
        await self.remove(dst)
        copied = self._below(src) if deep else [(src, dict(self.of(src)))]
        rows = [(dst + p[len(src) :], n, v) for p, props in copied for n, v in props.items()]
        if rows:
            await self._repo.replace([], rows)
            self._load(rows)
            self._bus.post("dav-props", {})

    async def remove(self, path: str) -> None:
        """Forget the properties of ``path`` and of everything below it."""
        gone = self._below(path)
        if not gone:
            return
        await self._repo.replace([(p, n) for p, props in gone for n in props], [])
        for p, _ in gone:
            self._by_path.pop(p, None)
        self.generation += 1
        self._bus.post("dav-props", {})

    def _below(self, path: str) -> list[tuple[str, dict[str, str]]]:
        return [(p, dict(props)) for p, props in self._by_path.items() if is_sub_path(path, p)]

    def _store(self, path: str, props: dict[str, str]) -> None:
        if props:
            self._by_path[path] = props
        else:
            self._by_path.pop(path, None)
        self.generation += 1

    def _load(self, rows: list[tuple[str, str, str]]) -> None:
        for path, name, value in rows:
            self._by_path.setdefault(path, {})[name] = value
        self.generation += 1
