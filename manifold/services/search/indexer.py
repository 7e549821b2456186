"""Filling the search index: walking the tree as the admin, in batches, with progress.

One build or update runs at a time (``running``); changes told through the tree events
while it runs wait and are applied when it ends, so the walk cannot write a node twice.
A folder that appears through an event (a copy) is walked on its own in the background.

Changes are written by one background writer, never by the request that made them: an
upload's answer does not wait for the index. The writer takes every change waiting (up
to ``BATCH_SIZE``) and applies them in the order told as one transaction, so under
load a batch grows instead of the queue: uploads, folders made, renames and removals
share one commit. Whatever needs the tree besides (walking a new folder, indexing a
move whose source the index lacks) follows the commit. A batch the database
refuses because another writer holds it (after the repository's own quick retries) is
kept, with every later change behind it, and tried again with growing pauses until the
database takes it, so the index catches up instead of missing the file; the log gets one
line naming the error class (a database error's text holds SQL and parameters).
``settled`` waits until every change told so far is written.

Walk rules (AList's): the start node has depth ``max_depth`` and a folder is listed only
while its depth is not 0, its children getting one less (negative: no limit); the root is
never stored; a path under an ignored path (plain string prefix) or on a storage with
``disable_index`` is skipped with everything below it. A folder that fails to list is
skipped too; the first such failure becomes the progress ``error``. Folders are listed
afresh, not from the list cache, so the index shows the storages as they are now.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import orjson

from manifold.db.search_repo import (
    DeleteTree,
    IndexWrite,
    MoveTree,
    Node,
    Replace,
    is_contention,
)
from manifold.errors import IndexNotRunning, IndexRunning, LeaseLost
from manifold.logs import error_text
from manifold.models import Obj
from manifold.paths import child_path, split_path
from manifold.services.admin.settings import SettingsService
from manifold.services.fs.read import GuardedReader
from manifold.services.fs.walk import LoopGuard
from manifold.state.bus import Bus, MemoryBus
from manifold.state.locks import Locks, MemoryLocks

log = logging.getLogger("manifold.search")
# One build or update at a time over every process: the lock's name and lease (renewed
# while the walk runs, so only a dead process's lock runs out).
BUILD_LOCK = "index-build"
BUILD_LEASE = 60.0

PROGRESS_KEY = "index_progress"
BATCH_SIZE = 1000
FLUSH_SECONDS = 5.0
RETRY_FIRST = 0.5
RETRY_LONGEST = 60.0
CLOSE_WAIT = 5.0
MAX_PENDING = 50_000


class IndexSink(Protocol):
    """Where walked nodes go: the part of a searcher the indexer writes through."""

    async def index(self, batch: Sequence[Node]) -> None: ...

    async def apply(self, writes: Sequence[IndexWrite]) -> list[bool]:
        """Every write in order, in one transaction; for each, whether it changed what it
        names (a move whose source is not indexed changes nothing)."""
        ...

    async def replace(self, batch: Sequence[Node]) -> None:
        """Each node takes the place of whatever was at its path, and of everything
        below; the whole batch in one transaction."""
        ...

    async def remove(self, path: str) -> None: ...

    async def move(self, src: str, dst: str) -> bool: ...

    async def clear(self) -> None: ...


@dataclass(frozen=True, slots=True)
class WriterStats:
    """What the background writer has done: changes waiting, transactions written, and
    the changes they held. More changes per transaction means the writer kept up by
    writing bigger batches."""

    pending: int
    batches: int
    changes: int


@dataclass(slots=True)
class Progress:
    obj_count: int = 0
    is_done: bool = False
    last_done_time: str | None = None
    error: str = ""


def read_progress(settings: SettingsService) -> Progress:
    """The stored progress; whatever cannot be read counts as none (a setting admins edit)."""
    try:
        stored = orjson.loads(settings.get(PROGRESS_KEY) or "{}")
        return Progress(
            obj_count=int(stored.get("obj_count") or 0),
            is_done=bool(stored.get("is_done")),
            last_done_time=str(stored.get("last_done_time") or "") or None,
            error=str(stored.get("error") or ""),
        )
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return Progress()


async def write_progress(settings: SettingsService, progress: Progress) -> None:
    await settings.save([(PROGRESS_KEY, orjson.dumps(asdict(progress)).decode())])


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def level(path: str) -> int:
    """How far below the root ``path`` is: ``/a`` is 1."""
    return 0 if path == "/" else path.count("/")


class Walker:
    """One walk: lists folders depth first and hands nodes to the sink in batches."""

    def __init__(
        self,
        fs: GuardedReader,
        skipped: Callable[[str], bool],
        sink: IndexSink,
        on_flush: Callable[[int], Awaitable[None]] | None = None,
        replacing: bool = False,
    ) -> None:
        self._fs = fs
        self._skipped = skipped
        self._sink = sink
        self._on_flush = on_flush
        # A walk beside other changes replaces what it finds (a change written before
        # it may have indexed the same node); a build or update walks where it cleared.
        self._replacing = replacing
        self._queue: list[Node] = []
        self._flushed_at = time.monotonic()
        self.count = 0
        self.error = ""
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    async def walk(self, start: str, depth: int, with_start: bool) -> None:
        """Index what is below ``start`` (and ``start`` itself when asked and not the root)."""
        if with_start and start != "/":
            obj = await self._start(start)
            if obj is None:
                return
            self._queue.append(Node(*split_path(start), obj.is_dir, obj.size))
            if not obj.is_dir:
                return await self.flush()
        folders = [(start, depth)]
        loops = LoopGuard(self._fs)
        while folders and not self.stopped:
            folder, depth = folders.pop()
            # A folder reached again through a link is indexed, not entered again.
            if depth != 0 and await loops.first_time(folder):
                folders += await self._list(folder, depth - 1)
            if len(self._queue) >= BATCH_SIZE or self._flush_due():
                await self.flush()
        await self.flush()

    async def _start(self, path: str) -> Obj | None:
        if self._skipped(path):
            return None
        try:
            await self._fs.tree.ready(path)  # a storage still starting is waited for
            obj, _ = await self._fs.get_path(path)
        except Exception as exc:
            self._failed("get", path, exc)
            return None
        return obj

    async def _list(self, folder: str, depth: int) -> list[tuple[str, int]]:
        try:
            await self._fs.tree.ready(folder)  # a storage still starting is waited for
            objs, _ = await self._fs.list_path(folder, refresh=True)
        except Exception as exc:
            self._failed("list", folder, exc)
            return []
        below = []
        for obj in objs:
            path = child_path(folder, obj.name)
            if self._skipped(path):
                continue
            self._queue.append(Node(folder, obj.name, obj.is_dir, obj.size))
            if obj.is_dir:
                below.append((path, depth))
        return below

    def _failed(self, action: str, path: str, exc: Exception) -> None:
        # A walk goes on past a folder that fails; its error is kept for the progress.
        message = getattr(exc, "message", None) or type(exc).__name__
        log.warning("index: failed to %s %s: %s", action, path, message)
        self.error = self.error or f"failed to {action} {path}: {message}"

    def _flush_due(self) -> bool:
        return bool(self._queue) and time.monotonic() - self._flushed_at >= FLUSH_SECONDS

    async def flush(self) -> None:
        batch, self._queue = self._queue, []
        self._flushed_at = time.monotonic()
        if not batch:
            return
        if self._replacing:
            await self._sink.replace(batch)
        else:
            await self._sink.index(batch)
        self.count += len(batch)
        if self._on_flush is not None:
            await self._on_flush(self.count)


Event = Callable[[], Awaitable[None]]


@dataclass(slots=True)
class Change:
    """One tree event for the writer: ``created`` (with ``obj``), ``removed``, or
    ``moved`` (to ``dst``)."""

    kind: str
    sink: IndexSink
    path: str
    obj: Obj | None = None
    dst: str = ""


@dataclass(slots=True)
class BatchPlan:
    """One batch of changes turned into writes, and the work that follows its commit."""

    writes: list[IndexWrite] = field(default_factory=list)
    walks: dict[str, int] = field(default_factory=dict)  # new folders, with the depth left
    # Moves to index afresh after the commit, as (src, dst), when the ``MoveTree`` at
    # the index given (if any) finds no source.
    moves: list[tuple[int | None, str, str]] = field(default_factory=list)
    replacing: list[Node] | None = None  # the nodes of the open ``Replace``
    replaced: set[str] = field(default_factory=set)  # their paths and the folders above

    def write(self, write: IndexWrite) -> None:
        self.replacing = None
        self.writes.append(write)

    def replace(self, node: Node) -> None:
        """Add ``node`` to the open ``Replace``, or open a new one where the open one
        holds its path or something below it: a later node replaces those, so its
        delete must follow their inserts."""
        path = node.path
        if self.replacing is None or path in self.replaced:
            nodes: list[Node] = []
            self.write(Replace(nodes))
            self.replacing, self.replaced = nodes, set()
        self.replacing.append(node)
        while path not in self.replaced and path != "/":
            self.replaced.add(path)
            path = path.rsplit("/", 1)[0] or "/"

    def forget_walks(self, path: str) -> None:
        """A later change at or above a new folder makes its walk moot."""
        prefix = path.rstrip("/") + "/"
        for key in [k for k in self.walks if k == path or k.startswith(prefix)]:
            del self.walks[key]


class Indexer:
    """Builds and updates the index in the background, and applies tree events to it."""

    def __init__(
        self,
        settings: SettingsService,
        fs: GuardedReader,
        locks: Locks | None = None,
        bus: Bus | None = None,
    ) -> None:
        self._settings = settings
        self._fs = fs
        self._locks: Locks = locks or MemoryLocks()
        self._bus: Bus = bus or MemoryBus()
        self._task: asyncio.Task[None] | None = None
        self._walker: Walker | None = None
        self._waiting: list[Change] = []
        self._side: dict[str, tuple[Walker, asyncio.Task[None]]] = {}
        self._pending: deque[Change] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._room = asyncio.Event()  # set while the pending changes are within the limit
        self._room.set()
        self._batches = 0
        self._changes = 0

    def writer_stats(self) -> WriterStats:
        return WriterStats(len(self._pending), self._batches, self._changes)

    @property
    def running(self) -> bool:
        """A build or update runs here, or (by the stored progress) in another process."""
        return self._running_here or self._building_elsewhere()

    @property
    def _running_here(self) -> bool:
        return self._task is not None and not self._task.done()

    def _building_elsewhere(self) -> bool:
        return self._settings.get(PROGRESS_KEY, "{}") != "{}" and not self.progress().is_done

    async def start(self) -> None:
        # A build that no process holds the lock of was interrupted (by a restart).
        async with self._locks.hold(BUILD_LOCK, BUILD_LEASE) as free:
            progress = read_progress(self._settings)
            if free and self._building_elsewhere():
                progress.is_done = True
                progress.error = progress.error or "the index build was interrupted"
                await write_progress(self._settings, progress)

    async def close(self) -> None:
        if self._walker is not None:
            self._walker.stop()
        await self._stop_side("/")
        writer = self._writer
        if writer is not None and not writer.done():
            # The changes told so far get a moment to be written, not a wait on a
            # database that refuses them.
            _, pending = await asyncio.wait({writer}, timeout=CLOSE_WAIT)
            for task in pending:
                task.cancel()
        await self.settled()

    async def settled(self) -> None:
        """Wait until the build or update, the background walks and every change told
        so far have been written."""
        while self._running_here or self._side or self._writing:
            tasks = [task for _, task in self._side.values()]
            tasks += [task for task in (self._task, self._writer) if task is not None]
            await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def _writing(self) -> bool:
        return self._writer is not None and not self._writer.done()

    # -- admin -------------------------------------------------------------------

    def build(self, sink: IndexSink) -> None:
        self._refuse_if_running()
        walker = self._walker = Walker(self._fs, self.skipped(), sink, self._counting)
        self._task = asyncio.create_task(self._build(sink, walker))

    def update(self, sink: IndexSink, paths: list[str], max_depth: int) -> None:
        self._refuse_if_running()
        walker = self._walker = Walker(self._fs, self.skipped(), sink)
        self._task = asyncio.create_task(self._update(sink, walker, paths, max_depth))

    def stop(self) -> None:
        if self._walker is None:
            if not self._building_elsewhere():
                raise IndexNotRunning()
            self._bus.post("index-stop", {})
            return
        self._walker.stop()

    def stop_here(self) -> None:
        """Stop the build or update of this process, if one runs (another asked)."""
        if self._walker is not None:
            self._walker.stop()

    async def clear(self, sink: IndexSink) -> None:
        self._refuse_if_running()
        await self._stop_side("/")
        await sink.clear()
        await write_progress(self._settings, Progress(is_done=True))

    def progress(self) -> Progress:
        return read_progress(self._settings)

    def _refuse_if_running(self) -> None:
        if self.running:
            raise IndexRunning()

    async def _build(self, sink: IndexSink, walker: Walker) -> None:
        with _stopped_if_lost("index build"):
            async with self._locks.hold(BUILD_LOCK, BUILD_LEASE) as got:
                if got:
                    await self._build_held(sink, walker)
                else:
                    log.warning("an index build runs in another process; this one is not started")
                    await self._finish()

    async def _build_held(self, sink: IndexSink, walker: Walker) -> None:
        try:
            await self._stop_side("/")
            await write_progress(self._settings, Progress())
            await sink.clear()
            await walker.walk("/", self._settings.get_int("max_index_depth", 20), False)
        except Exception as exc:
            log.warning("index build failed: %s", error_text(exc))
            walker.error = walker.error or error_text(exc)
        finally:
            done = Progress(walker.count, True, _now(), walker.error)
            await self._quietly(lambda: write_progress(self._settings, done))
            await self._finish()

    async def _counting(self, count: int) -> None:
        await write_progress(self._settings, Progress(obj_count=count))

    async def _update(
        self, sink: IndexSink, walker: Walker, paths: list[str], max_depth: int
    ) -> None:
        with _stopped_if_lost("index update"):
            async with self._locks.hold(BUILD_LOCK, BUILD_LEASE) as got:
                if got:
                    await self._update_held(sink, walker, paths, max_depth)
                else:
                    log.warning("an index build runs in another process; the update waits")
                    await self._finish()

    async def _update_held(
        self, sink: IndexSink, walker: Walker, paths: list[str], max_depth: int
    ) -> None:
        try:
            for path in paths:
                await self._stop_side(path)
                await sink.remove(path)
            for path in paths:
                if not walker.stopped:
                    await walker.walk(path, max_depth, True)
        except Exception as exc:
            log.warning("index update failed: %s", error_text(exc))
        finally:
            await self._finish()

    async def _finish(self) -> None:
        self._walker = None
        waiting, self._waiting = self._waiting, []
        for change in waiting:
            self._tell(change)

    # -- tree events ---------------------------------------------------------------

    async def created(self, sink: IndexSink, path: str, obj: Obj) -> None:
        self._tell(Change("created", sink, path, obj))
        await self._keep_up()

    async def removed(self, sink: IndexSink, path: str) -> None:
        self._tell(Change("removed", sink, path))
        await self._keep_up()

    async def moved(self, sink: IndexSink, src: str, dst: str) -> None:
        self._tell(Change("moved", sink, src, dst=dst))
        await self._keep_up()

    async def _keep_up(self) -> None:
        """Memory stays bounded: past ``MAX_PENDING`` waiting changes (a database that
        refuses writes for long), the changes being made wait for the writer."""
        if len(self._pending) > MAX_PENDING and self._writing:
            await self._room.wait()

    def _tell(self, change: Change) -> None:
        if self._walker is not None:  # a build is walking: after it, or it writes twice
            self._waiting.append(change)
            return
        self._pending.append(change)
        if len(self._pending) > MAX_PENDING:
            self._room.clear()
        if not self._writing:
            self._writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        """Write the pending changes in order until none is left."""
        try:
            await self._write_pending()
        finally:
            self._room.set()

    async def _write_pending(self) -> None:
        pause = RETRY_FIRST
        while self._pending:
            batch = self._front()
            try:
                await self._apply(batch)
                self._batches += 1
                self._changes += len(batch)
            except Exception as exc:
                if is_contention(exc):
                    if pause == RETRY_FIRST:
                        log.warning("index: database busy (%s); changes kept for a retry",
                                    type(exc).__name__)  # fmt: skip
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, RETRY_LONGEST)
                    continue
                log.warning("index: failed to apply a change: %s", error_text(exc))
            pause = RETRY_FIRST
            for _ in batch:
                self._pending.popleft()
            if len(self._pending) <= MAX_PENDING:
                self._room.set()

    def _front(self) -> list[Change]:
        """The changes at the front for one sink, ``BATCH_SIZE`` at most."""
        first = self._pending[0]
        batch: list[Change] = []
        for change in self._pending:
            if change.sink is not first.sink or len(batch) >= BATCH_SIZE:
                break
            batch.append(change)
        return batch

    async def _apply(self, batch: list[Change]) -> None:
        plan = await self._plan(batch)
        sink = batch[0].sink
        done = await sink.apply(plan.writes)
        for index, src, dst in plan.moves:
            if index is None or not done[index]:
                await self._logged(self._moved_unindexed(sink, src, dst))
        for path, depth in plan.walks.items():
            self._walk_aside(sink, path, depth)

    async def _plan(self, batch: list[Change]) -> BatchPlan:
        plan = BatchPlan()
        max_depth = self._settings.get_int("max_index_depth", 20)
        skipped = self.skipped()
        for change in batch:
            await self._stop_side(change.path)
            plan.forget_walks(change.path)
            if change.kind == "created":
                assert change.obj is not None
                path, obj = change.path, change.obj
                if path == "/" or skipped(path) or 0 <= max_depth < level(path):
                    continue
                plan.replace(Node(*split_path(path), obj.is_dir, obj.size))
                remaining = max_depth - level(path) if max_depth >= 0 else -1
                if obj.is_dir and remaining != 0:
                    plan.walks[path] = remaining
            elif change.kind == "removed" or skipped(change.dst):
                plan.write(DeleteTree(change.path))
            elif skipped(change.path):
                plan.moves.append((None, change.path, change.dst))
            else:
                plan.moves.append((len(plan.writes), change.path, change.dst))
                plan.write(MoveTree(change.path, change.dst))
        return plan

    async def _moved_unindexed(self, sink: IndexSink, src: str, dst: str) -> None:
        """A move the index could not follow: drop ``src``, index ``dst`` afresh."""
        await sink.remove(src)
        obj, _ = await self._fs.get_path(dst)
        await self._created(sink, dst, obj)

    async def _logged(self, work: Awaitable[None]) -> None:
        try:
            await work
        except Exception as exc:
            log.warning("index: failed to apply a change: %s", error_text(exc))

    async def _quietly(self, work: Event) -> None:
        try:
            await work()
        except Exception as exc:
            log.warning("index: failed to update after a build: %s", error_text(exc))

    async def _created(self, sink: IndexSink, path: str, obj: Obj) -> None:
        max_depth = self._settings.get_int("max_index_depth", 20)
        if path == "/" or self.skipped()(path) or 0 <= max_depth < level(path):
            return
        await self._stop_side(path)
        await sink.replace([Node(*split_path(path), obj.is_dir, obj.size)])
        remaining = max_depth - level(path) if max_depth >= 0 else -1
        if obj.is_dir and remaining != 0:
            self._walk_aside(sink, path, remaining)

    def _walk_aside(self, sink: IndexSink, path: str, depth: int) -> None:
        walker = Walker(self._fs, self.skipped(), sink, replacing=True)
        task = asyncio.create_task(self._aside(walker, path, depth))
        self._side[path] = (walker, task)

    async def _aside(self, walker: Walker, path: str, depth: int) -> None:
        try:
            await walker.walk(path, depth, False)
        except Exception as exc:
            log.warning("index: failed to walk %s: %s", path, error_text(exc))
        finally:
            current = self._side.get(path)
            if current is not None and current[0] is walker:
                del self._side[path]

    async def _stop_side(self, path: str) -> None:
        """Stop the background walks at or below ``path`` and wait for them."""
        prefix = path.rstrip("/") + "/"
        stopping = [p for p in self._side if p == path or p.startswith(prefix)]
        tasks = []
        for key in stopping:
            walker, task = self._side.pop(key)
            walker.stop()
            tasks.append(task)
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- what is walked ---------------------------------------------------------------

    def skipped(self) -> Callable[[str], bool]:
        """A test for paths the index leaves out, from the settings and storages as now."""
        lines = self._settings.get("ignore_paths").splitlines()
        ignored = tuple(line.strip() for line in lines if line.strip())

        def skipped(path: str) -> bool:
            if path.startswith(ignored):
                return True
            place = self._fs.tree.find(path)
            if place is None:
                return False
            mounted = place.mounted
            never = mounted.config is not None and mounted.config.never_indexed
            return mounted.storage.disable_index or never

        return skipped


@contextlib.contextmanager
def _stopped_if_lost(work: str) -> Iterator[None]:
    """A build whose lock was lost has been stopped (another process may run one now):
    said in the log, not left as an error no one reads in a finished task."""
    try:
        yield
    except LeaseLost as exc:
        log.warning("%s stopped: %s", work, error_text(exc))
