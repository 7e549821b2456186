"""The manual scan of the Indexes page (OpenList's ``/api/admin/scan``): a walk that
lists every folder below a path afresh, so that cached listings and, through the
listing hook, the search index (when ``auto_update_index`` is on) catch up with
changes made behind the server's back.

One scan at a time, in a background task; its progress is the number of entries
listed so far. A folder that cannot be listed is logged and skipped. The walk keeps
its own stack (no recursion, so any depth works) and stops at ``MAX_DEPTH`` levels,
which only a tree that contains itself through an alias reaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from manifold.errors import BadRequest
from manifold.logs import error_text
from manifold.paths import child_path, clean_path
from manifold.services.fs.tree import FileTree

log = logging.getLogger("manifold.scan")

MAX_DEPTH = 1000
RUNNING = "manual scan is running, please try later"
NOT_RUNNING = "manual scan is not running"


@dataclass(frozen=True, slots=True)
class ScanProgress:
    obj_count: int
    is_done: bool


class ScanService:
    def __init__(self, tree: FileTree) -> None:
        self._tree = tree
        self._task: asyncio.Task[None] | None = None
        self._count = 0

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, path: str, limit: float) -> None:
        """Walk below ``path``; with ``limit`` > 0, at most that many listings a second."""
        if self.running:
            raise BadRequest(RUNNING)
        self._count = 0
        self._task = asyncio.create_task(self._walk(clean_path(path), limit))

    async def stop(self) -> None:
        """Stop the running scan (``manual scan is not running`` when none is)."""
        if not self.running:
            raise BadRequest(NOT_RUNNING)
        await self.close()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def progress(self) -> ScanProgress:
        return ScanProgress(obj_count=self._count, is_done=not self.running)

    async def _walk(self, root: str, limit: float) -> None:
        pause = 1 / limit if limit > 0 else 0.0
        folders = [(root, 0)]
        while folders:
            path, depth = folders.pop()
            try:
                objs, _driver = await self._tree.listing(path, refresh=True)
            except Exception as exc:  # one folder's failure, whatever it is, ends only it
                log.warning("manual scan: cannot list %s: %s", path, error_text(exc))
                continue
            self._count += len(objs)
            if depth < MAX_DEPTH:
                below = [child_path(path, o.name) for o in reversed(objs) if o.is_dir]
                folders += [(folder, depth + 1) for folder in below]
            if pause:
                await asyncio.sleep(pause)
