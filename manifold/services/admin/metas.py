"""Meta records: per-path password, write, hide, readme and header rules.

All metas are held in memory (an installation has few), so the nearest-meta walk
on every file-tree request costs no database query.
"""

from __future__ import annotations

from dataclasses import replace

from manifold.concurrency import CPU_POOL, run_in
from manifold.db.repos import MetaRepo
from manifold.errors import BadRequest, ServerError
from manifold.models import Meta
from manifold.paths import clean_path
from manifold.policy import access
from manifold.state.bus import Bus, MemoryBus


class MetaService:
    def __init__(self, repo: MetaRepo, bus: Bus | None = None) -> None:
        self._repo = repo
        # Other processes reload their metas on every change made here.
        self._bus: Bus = bus or MemoryBus()
        self._by_path: dict[str, Meta] = {}
        self._lengths: frozenset[int] = frozenset()

    async def start(self) -> None:
        """Load every meta (again: another process changed one)."""
        self._by_path = {m.path: m for m in await self._repo.all()}
        self._reindex()

    def nearest(self, path: str) -> Meta | None:
        """The meta of ``path`` or of its closest ancestor; only that one applies.

        Only ancestors as long as some meta's path are cut out and looked up: cutting
        every ancestor costs the path's length once per segment, minutes of CPU for the
        million segments that fit in a request body.
        """
        path = clean_path(path)
        lengths = self._lengths
        end = len(path)
        while end > 1:
            if end in lengths and (meta := self._by_path.get(path[:end])) is not None:
                return meta
            end = path.rfind("/", 0, end)
        return self._by_path.get("/")

    def _reindex(self) -> None:
        """Note the lengths of the meta paths, for ``nearest``; after every change."""
        self._lengths = frozenset(len(p) for p in self._by_path)

    def all(self) -> list[Meta]:
        return list(self._by_path.values())

    async def page(self, page: int, per_page: int) -> tuple[list[Meta], int]:
        return await self._repo.page(page, per_page)

    async def get(self, meta_id: int) -> Meta:
        meta = await self._repo.get(meta_id)
        if meta is None:
            raise ServerError("failed get old meta: record not found")
        return meta

    async def create(self, meta: Meta) -> Meta:
        meta = await _validated(meta)
        created = await self._repo.create(meta)
        self._by_path[created.path] = created
        self._reindex()
        await self._bus.publish("metas", {})
        return created

    async def update(self, meta: Meta) -> None:
        old = await self.get(meta.id)
        meta = await _validated(meta)
        await self._repo.save(meta)
        self._by_path.pop(old.path, None)
        self._by_path[meta.path] = meta
        self._reindex()
        await self._bus.publish("metas", {})

    async def delete(self, meta_id: int) -> None:
        old = await self.get(meta_id)
        await self._repo.delete(meta_id)
        self._by_path.pop(old.path, None)
        self._reindex()
        await self._bus.publish("metas", {})


async def _validated(meta: Meta) -> Meta:
    # Compiling many long lines takes a while; a worker thread lets other requests run.
    _, complaint = await run_in(CPU_POOL, access.compile_hide, meta.hide)
    if complaint:
        raise BadRequest(complaint)
    return replace(meta, path=clean_path(meta.path))
