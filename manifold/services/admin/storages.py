"""Storages: saved mounts, their live drivers, and the mount table built from them.

A storage whose driver fails to start stays mounted in a failed state: paths under
it answer its error at once and never fall through to a parent mount, and a later
call starts it again in the background, waiting longer after each failure (1 s
doubling to 5 minutes), so a server that was down at start is mounted once it is
back, without an edit or ``load_all``. Storages start concurrently in the background,
each within its driver's ``init_timeout``: the server answers at once, each storage
serves as soon as its own driver is up (until then its paths answer ``storage not
init: loading``), and a slow or failing one never holds the server nor the others.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from manifold.db.repos import StorageRepo
from manifold.drivers.base import Driver, DriverConfig, Resources, VirtualTree
from manifold.drivers.registry import DriverRegistry
from manifold.errors import BadRequest, ManifoldError, ServerError, TemporaryFailure
from manifold.logs import error_text
from manifold.models import DiskUsage, Obj, Storage
from manifold.paths import clean_path, is_sub_path
from manifold.services.admin.masking import masked, unmasked
from manifold.state.bus import Bus, MemoryBus
from manifold.state.locks import Locks, MemoryLocks
from manifold.vfs.health import Health, HealthLayer
from manifold.vfs.layers import CallRecorder, wrap
from manifold.vfs.mounts import MountTable, Resolved, actual_mount_path
from manifold.vfs.storage_ops import ListCache, StorageOps

log = logging.getLogger("manifold.storages")

WORK = "work"
DISABLED = "disabled"
LOADING = "loading"
# How long the storages table waits for a back end's usage (OpenList's wait).
USAGE_SECONDS = 3.0
# Seconds before a storage that failed to start is tried again, doubled per failure.
FIRST_RETRY = 1.0
LONGEST_RETRY = 300.0
# A storage's driver starts in one process at a time (a back end that hands out a new
# refresh token at each login must not see two at once): the lease, and how long
# another process waits for it before it starts its own anyway.
INIT_LEASE = 60.0
INIT_WAIT = 30.0
# A driver's save of options it renewed (a refreshed token) reads, merges and writes
# them in one process at a time, waiting at most this long for another's.
SAVE_LEASE = 30.0
SAVE_WAIT = 15.0


@dataclass(slots=True)
class Mounted:
    storage: Storage
    ops: StorageOps | None
    # The driver's static config, looked up once at mount time (None: unknown driver).
    config: DriverConfig | None = None
    # A failed storage: when it may be started again, how long it waited last, and
    # what starts it (set by the service; None while loading or when it cannot be).
    retry_at: float = 0.0
    wait: float = 0.0
    revive: Callable[[Mounted], None] | None = None
    # A loading placeholder's: set once what replaces it is published (see ``ready``).
    settled: asyncio.Event | None = None

    def settle(self) -> None:
        """Let go of who waits on this placeholder (``StorageService.ready``)."""
        if self.settled is not None:
            self.settled.set()

    def require_ops(self) -> StorageOps:
        if self.ops is None:
            if self.revive is not None:
                self.revive(self)
            raise ServerError.not_init(self.storage.status)
        return self.ops


class StorageService:
    def __init__(
        self,
        repo: StorageRepo,
        registry: DriverRegistry,
        cache: ListCache,
        bus: Bus | None = None,
        locks: Locks | None = None,
    ) -> None:
        self._repo = repo
        self._registry = registry
        self._cache = cache
        # Other processes hear of every storage changed here and of every listing
        # patched or dropped, and apply them (``apply_change``, ``dropped``).
        self._bus: Bus = bus or MemoryBus()
        self._locks: Locks = locks or MemoryLocks()
        self._mounted: dict[int, Mounted] = {}
        self._table: MountTable[Mounted] = MountTable()
        self.tree: VirtualTree | None = None
        # Told (in the background) of every listing fetched fresh from a back end, in
        # virtual paths: the search index's auto-update listens here.
        self.on_listed: Callable[[str, list[Obj]], Awaitable[None]] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._revivals: set[asyncio.Task[None]] = set()
        # The starts that ``start`` (and so ``load_all``) left running in the background.
        self._starts: set[asyncio.Task[None]] = set()
        # What every driver shares (HTTP pools); closed when the storages stop.
        self.resources = Resources()
        # Told of every driver call (``/metrics``); set before the storages start.
        self.call_recorder: CallRecorder | None = None
        # The first path segments the server answers itself (``manifold.app`` derives
        # them from its routes and sets them here): no storage is mounted there.
        self.reserved: tuple[str, ...] = ()

    @property
    def registry(self) -> DriverRegistry:
        """The drivers this server knows (one table per server, never a global)."""
        return self._registry

    async def start(self) -> None:
        """Mount every enabled storage; returns once each is published as loading, its
        driver starting in the background. Each serves as soon as its own driver is up;
        until then its paths answer ``storage not init: loading`` (never a parent mount).

        A storage mounted already (``load_all``) is replaced the same way, storage by
        storage: its old driver is dropped, then its new one started.
        """
        stored = [s for s in await self._repo.all() if not s.disabled]
        for storage in stored:
            self._warn_if_reserved(storage)
        old, self._mounted = self._mounted, {s.id: _loading(s) for s in stored}
        self._rebuild()
        for storage in stored:
            previous, placeholder = old.pop(storage.id, None), self._mounted[storage.id]
            self._in_background(self._restart(storage, previous, placeholder))
        for gone in old.values():  # no longer stored, or disabled
            self._in_background(self._unmount(gone))

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._starts.add(task)
        task.add_done_callback(self._starts.discard)

    async def _restart(
        self, storage: Storage, previous: Mounted | None, placeholder: Mounted
    ) -> None:
        try:
            if previous is not None:
                await self._unmount(previous)
            await self._mount(storage, before=placeholder)
        finally:
            placeholder.settle()  # also when stopped before the start began

    async def started(self) -> None:
        """Wait for the starts ``start`` left running (tests, and code that needs every
        storage at once; what needs one storage waits with ``ready``)."""
        while self._starts:
            await asyncio.gather(*list(self._starts), return_exceptions=True)

    async def ready(self, path: str) -> None:
        """Wait while the storage holding ``path`` is loading: background work (a task
        resumed at start, an index walk) waits for the storage it needs, where a request
        is answered ``storage not init: loading`` at once."""
        while True:
            resolved = self._table.resolve(path)
            settled = resolved.target.settled if resolved is not None else None
            if settled is None or settled.is_set():
                return
            await settled.wait()

    async def ready_storage(self, storage_id: int) -> Mounted | None:
        """``ready`` for one storage by its id (a path may lead to a balanced sibling):
        the storage once it is no longer loading, None when it is not mounted."""
        while True:
            mounted = self._mounted.get(storage_id)
            if mounted is None or mounted.settled is None or mounted.settled.is_set():
                return mounted
            await mounted.settled.wait()

    async def stop(self) -> None:
        running = [*self._revivals, *self._starts]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await asyncio.gather(*(self._unmount(m) for m in list(self._mounted.values())))
        self._mounted.clear()
        self._rebuild()
        await self.resources.aclose()

    def resolve(self, path: str) -> Resolved[Mounted] | None:
        return self._table.resolve(path)

    def virtual_children(self, path: str) -> list[str]:
        return self._table.virtual_children(path)

    def has_storages(self) -> bool:
        return len(self._table) > 0

    def modified_below(self, path: str) -> datetime | None:
        """The modified time of the first storage mounted at or below ``path`` (in
        AList's storage order): what a virtual folder made by mounts shows."""
        below = [
            m.storage
            for m in self._mounted.values()
            if is_sub_path(path, actual_mount_path(m.storage.mount_path))
        ]
        if not below:
            return None
        return min(below, key=lambda s: (s.order, s.mount_path)).modified

    async def page(self, page: int, per_page: int) -> tuple[list[Storage], int]:
        storages, total = await self._repo.page(page, per_page)
        return [self._live(s) for s in storages], total

    async def get(self, storage_id: int) -> Storage:
        storage = await self._repo.get(storage_id)
        if storage is None:
            raise ServerError("failed get storage: record not found")
        return self._live(storage)

    def shown(self, storage: Storage) -> Storage:
        """``storage`` as the admin API shows it: its secret options masked."""
        return masked(self._registry, storage)

    async def usage(self, storages: list[Storage]) -> dict[int, DiskUsage]:
        """The space of those ``storages`` whose running driver knows it, asked of all
        at once; one that fails or takes longer than ``USAGE_SECONDS`` is left out."""
        asked = {
            s.id: m.ops.driver
            for s in storages
            if (m := self._mounted.get(s.id)) is not None
            and m.ops is not None
            and "details" in m.ops.driver.capabilities()
        }
        found = await asyncio.gather(*(_usage(d) for d in asked.values()))
        return {sid: u for sid, u in zip(asked, found, strict=True) if u is not None}

    def _live(self, storage: Storage) -> Storage:
        if storage.disabled:
            return replace(storage, status=DISABLED)
        mounted = self._mounted.get(storage.id)
        return replace(storage, status=mounted.storage.status) if mounted else storage

    async def create(self, storage: Storage) -> Storage:
        storage = self._checked(storage)
        storage.modified = datetime.now(UTC)
        created = await self._repo.create(storage)
        await self._mount(created)
        self._rebuild()
        mounted = self._mounted[created.id].storage
        await self._repo.save(mounted)
        await self._bus.publish("storage", {"id": created.id})
        if mounted.status != WORK:
            raise ServerError(
                f"failed init storage but storage is already created: {mounted.status}",
                data={"id": mounted.id},
            )
        return mounted

    async def update(self, storage: Storage) -> Storage:
        old = await self.get(storage.id)
        storage = unmasked(self._registry, storage, old)
        storage = self._checked(replace(storage, disabled=old.disabled))
        storage.modified = datetime.now(UTC)
        await self._repo.save(storage)
        await self._remount(storage)
        await self._bus.publish("storage", {"id": storage.id})
        now = self._mounted.get(storage.id)
        if storage.disabled or now is None:  # disabled, or deleted meanwhile
            return storage
        mounted = now.storage
        if mounted.status != WORK:
            raise ServerError(f"failed init storage: {mounted.status}")
        return mounted

    async def delete(self, storage_id: int) -> None:
        await self.get(storage_id)
        mounted = self._mounted.pop(storage_id, None)
        self._rebuild()  # unpublished before its driver is dropped
        if mounted is not None:
            await self._unmount(mounted)
        await self._repo.delete(storage_id)
        await self._bus.publish("storage", {"id": storage_id})

    async def set_disabled(self, storage_id: int, disabled: bool) -> None:
        storage = await self.get(storage_id)
        if storage.disabled == disabled:
            raise ServerError(f"this storage have {'disabled' if disabled else 'enabled'}")
        storage.disabled = disabled
        if disabled:
            storage.status = DISABLED
        await self._repo.save(storage)
        await self._remount(storage)
        await self._bus.publish("storage", {"id": storage_id})

    async def apply_change(self, storage_id: int) -> None:
        """Bring ``storage_id`` in line with the database: another process created,
        edited, disabled or deleted it (its status is that process's to save)."""
        stored = await self._repo.get(storage_id)
        if stored is None or stored.disabled:
            mounted = self._mounted.pop(storage_id, None)
            self._rebuild()
            if mounted is not None:
                await self._unmount(mounted)
            return
        mounted = self._mounted.get(storage_id)
        if mounted is not None and mounted.storage.modified == stored.modified:
            # As mounted here (told twice, or a resync), but for options a driver
            # renewed and saved since, which this one takes without a restart.
            await self._take_options(mounted, stored.addition)
            return
        await self._remount(stored, save=False)

    async def _take_options(self, mounted: Mounted, addition: str) -> None:
        if mounted.ops is None or mounted.storage.addition == addition:
            return
        mounted.storage = replace(mounted.storage, addition=addition)
        await mounted.ops.driver.options_saved(addition)

    async def apply_all(self) -> None:
        """``apply_change`` for every storage, known here or stored (a resync)."""
        stored = {s.id for s in await self._repo.all()}
        for storage_id in sorted(stored | set(self._mounted)):
            await self.apply_change(storage_id)

    def dropped(self, storage_id: int, path: str, below: bool) -> None:
        """Another process changed ``path`` of ``storage_id``: drop its listing here."""
        mounted = self._mounted.get(storage_id)
        if mounted is not None and mounted.ops is not None:
            mounted.ops.dropped(path, below)

    def drop_listings(self) -> None:
        """Drop every listing kept (a resync)."""
        for mounted in list(self._mounted.values()):
            if mounted.ops is not None:
                mounted.ops.dropped("/", True)

    async def load_all(self) -> None:
        """Drop and start every storage again, in the background as at start (AList
        answers at once too); each answers ``loading`` until its new driver is up."""
        await self.start()

    def _checked(self, storage: Storage) -> Storage:
        storage = replace(storage, mount_path=clean_path(storage.mount_path))
        if reserved_by(storage.mount_path, self.reserved) is not None:
            raise BadRequest(
                f"mount path {storage.mount_path} is answered by the server itself: "
                f"choose one outside {', '.join(self.reserved)}"
            )
        self._registry.build(storage)  # validates driver name and addition
        return storage

    def _warn_if_reserved(self, storage: Storage) -> None:
        # Saved before such paths were refused: kept mounted (the API and the protocols
        # reach it), but the page's address of it reaches the server's own answer.
        prefix = reserved_by(storage.mount_path, self.reserved)
        if prefix is not None:
            log.warning(
                "storage %s is mounted where the server answers itself (%s): the web "
                "page cannot open it; edit its mount path",
                storage.mount_path,
                prefix,
            )

    async def _remount(self, storage: Storage, save: bool = True) -> None:
        """Replace a storage's driver. The old one is unpublished before it is dropped:
        until the new one is up the path answers ``storage not init: loading``, as at
        start, never through a dropped driver or a parent mount."""
        mounted = self._mounted.pop(storage.id, None)
        placeholder = None if storage.disabled else _loading(storage)
        if placeholder is not None:
            self._mounted[storage.id] = placeholder
        self._rebuild()
        if mounted is not None:
            await self._unmount(mounted)
        if placeholder is not None:
            await self._mount(storage, before=placeholder)
            now = self._mounted.get(storage.id)
            if save and now is not None:
                await self._repo.save(now.storage)
        self._rebuild()

    async def _mount(self, storage: Storage, before: Mounted | None = None) -> None:
        """Start ``storage``'s driver and publish it in place of ``before`` (its loading
        placeholder, or the failed mount a revival replaces): nothing is published if
        ``before`` was replaced meanwhile. Who waits on ``before`` goes on once the
        outcome is published, or the start cancelled."""
        try:
            mounted = await self._started(storage, before)
            if before is not None and self._mounted.get(storage.id) is not before:
                # Edited, disabled, deleted or reloaded while this start ran: not wanted.
                await self._unmount(mounted)
                return
            self._mounted[storage.id] = mounted
            self._rebuild()
        finally:
            if before is not None:
                before.settle()

    async def _started(self, storage: Storage, before: Mounted | None) -> Mounted:
        """``storage`` with its driver started, or failed with the reason; whatever goes
        wrong, the driver built is dropped (a network driver's session must not stay
        open behind a storage that never started), a cancelled start's too."""
        driver: Driver[Any] | None = None
        config: DriverConfig | None = None
        try:
            config = self._registry.get(storage.driver).config
            driver = self._built(storage, config)
            await self._init_within(storage, driver, config)
            return self._working(storage, driver, config)
        except Exception as exc:
            if driver is not None:
                await driver.drop()
            return self._failed(storage, config, exc, before)
        except asyncio.CancelledError:
            # Stopped while starting: the driver goes, then the cancel goes on.
            if driver is not None:
                await driver.drop()
            raise

    def _built(self, storage: Storage, config: DriverConfig) -> Driver[Any]:
        built = self._registry.build(storage)
        built.tree = self.tree
        built.resources = self.resources
        built.options_saver = self._saver(storage.id, built)
        built.options_loader = self._loader(storage.id)
        driver = wrap(built, config, self.call_recorder)
        if config.call_timeout > 0 or config.check_status:
            health = Health(config.check_status, self._status_setter(storage.id))
            driver = HealthLayer(driver, health)
        return driver

    async def _init_within(
        self, storage: Storage, driver: Driver[Any], config: DriverConfig
    ) -> None:
        try:
            await self._init_once(storage, driver, config.init_timeout)
        except TimeoutError as exc:
            raise ServerError(
                f"no answer from the back end within {config.init_timeout:g}s"
            ) from exc

    def _working(self, storage: Storage, driver: Driver[Any], config: DriverConfig) -> Mounted:
        storage = replace(storage, status=WORK, addition=driver.addition())
        ops = StorageOps(
            storage,
            driver,
            self._cache,
            no_cache=config.no_cache,
            on_listed=self._notifier(storage),
            on_changed=self._teller(storage.id),
        )
        return Mounted(storage, ops, config)

    def _failed(
        self, storage: Storage, config: DriverConfig | None, exc: Exception, before: Mounted | None
    ) -> Mounted:
        status = exc.message if isinstance(exc, ManifoldError) else type(exc).__name__
        log.warning("storage %s failed to start: %s", storage.mount_path, status)
        if not isinstance(exc, ManifoldError):
            status = f"failed init storage: {status}"
        # A loading placeholder waited nothing: its first retry waits FIRST_RETRY.
        wait = min(max(before.wait * 2, FIRST_RETRY), LONGEST_RETRY) if before else FIRST_RETRY
        return Mounted(
            replace(storage, status=status),
            None,
            config,
            retry_at=time.monotonic() + wait,
            wait=wait,
            # Only a back end that did not answer is tried again by itself: a refused
            # login or a wrong option stays failed until the storage is edited (a
            # password tried again and again can lock the account).
            revive=self._revive if config is not None and _passing(exc) else None,
        )

    async def _init_once(self, storage: Storage, driver: Driver[Any], seconds: float) -> None:
        """Start ``driver``, in one process at a time (see ``INIT_LEASE``)."""
        async with self._locks.hold(f"storage-init:{storage.id}", INIT_LEASE, INIT_WAIT):
            async with asyncio.timeout(seconds or None):
                await driver.init()

    def _teller(self, storage_id: int) -> Callable[[str, bool], None]:
        def tell(path: str, below: bool) -> None:
            self._bus.post("listing", {"id": storage_id, "path": path, "below": below})

        return tell

    def _revive(self, failed: Mounted) -> None:
        """Start a failed storage again in the background once its wait is over; the
        call that noticed is answered at once."""
        if failed.revive is None or time.monotonic() < failed.retry_at:
            return
        failed.revive = None  # one revival at a time; the next mount sets its own
        task = asyncio.create_task(self._revived(failed))
        self._revivals.add(task)
        task.add_done_callback(self._revivals.discard)

    async def _revived(self, failed: Mounted) -> None:
        try:
            storage = await self._repo.get(failed.storage.id)
            if storage is None or storage.disabled or self._mounted.get(storage.id) is not failed:
                return
            await self._mount(storage, before=failed)
            self._rebuild()
        except Exception as exc:  # never an unhandled error in a background task
            log.warning("storage %s failed to restart: %s", failed.storage.mount_path, exc)
            failed.revive = self._revive

    async def revived(self) -> None:
        """Wait for the revivals started so far (tests)."""
        while self._revivals:
            await asyncio.gather(*list(self._revivals), return_exceptions=True)

    def _status_setter(self, storage_id: int) -> Callable[[str], None]:
        def set_status(status: str) -> None:
            mounted = self._mounted.get(storage_id)
            if mounted is not None and mounted.ops is not None:
                mounted.storage = replace(mounted.storage, status=status)
                log.warning("storage %s: %s", mounted.storage.mount_path, status)

        return set_status

    def _saver(self, storage_id: int, driver: Driver[Any]) -> Callable[[str], Awaitable[None]]:
        """Saves what ``driver`` renewed, merged with what another process may have
        saved meanwhile (``Driver.options_to_save``), and tells the other processes,
        whose drivers take it (``apply_change``)."""

        async def save(addition: str) -> None:
            async with self._locks.hold(f"storage-options:{storage_id}", SAVE_LEASE, SAVE_WAIT):
                saved = await self._save_merged(storage_id, driver, addition)
            if saved is None:
                return
            if saved != addition:
                await driver.options_saved(saved)
            await self._bus.publish("storage", {"id": storage_id})

        return save

    async def _save_merged(self, storage_id: int, driver: Driver[Any], addition: str) -> str | None:
        stored = await self._repo.get(storage_id)
        if stored is None:
            return None
        addition = driver.options_to_save(stored.addition, addition)
        mounted = self._mounted.get(storage_id)
        status = mounted.storage.status if mounted is not None else stored.status
        await self._repo.save(replace(stored, addition=addition, status=status))
        if mounted is not None:
            mounted.storage = replace(mounted.storage, addition=addition)
        return addition

    def _loader(self, storage_id: int) -> Callable[[], Awaitable[str | None]]:
        async def load() -> str | None:
            stored = await self._repo.get(storage_id)
            return None if stored is None else stored.addition

        return load

    def _notifier(self, storage: Storage) -> Callable[[str, list[Obj]], None]:
        mount_path = actual_mount_path(storage.mount_path)

        def notify(sub_path: str, objs: list[Obj]) -> None:
            if self.on_listed is None:
                return
            path = clean_path(f"{mount_path}/{sub_path}")
            task = asyncio.create_task(self._tell_listed(self.on_listed, path, objs))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        return notify

    @staticmethod
    async def _tell_listed(
        listener: Callable[[str, list[Obj]], Awaitable[None]], path: str, objs: list[Obj]
    ) -> None:
        try:
            await listener(path, objs)
        except Exception as exc:
            log.warning("listing listener failed on %s: %s", path, error_text(exc))

    async def settled(self) -> None:
        """Wait for the listing notifications sent so far."""
        while self._background:
            await asyncio.gather(*list(self._background))

    async def _unmount(self, mounted: Mounted) -> None:
        if mounted.ops is not None:
            mounted.ops.forget("/", tell=False)
            await mounted.ops.driver.drop()

    def _rebuild(self) -> None:
        self._table = MountTable((m.storage.mount_path, m) for m in self._mounted.values())


def reserved_by(mount_path: str, reserved: tuple[str, ...]) -> str | None:
    """Which of ``reserved`` (first segments, ``/x``, or ``/x*`` for any segment that
    starts with ``x``) holds ``mount_path``, compared as the router compares: by case."""
    first = "/" + actual_mount_path(mount_path).split("/")[1]
    for prefix in reserved:
        if first == prefix or (prefix.endswith("*") and first.startswith(prefix[:-1])):
            return prefix
    return None


def _loading(storage: Storage) -> Mounted:
    """The placeholder a storage is published as while its driver starts."""
    return Mounted(replace(storage, status=LOADING), None, settled=asyncio.Event())


def _passing(exc: Exception) -> bool:
    """Whether a failed start may pass by itself: an unreachable or silent back end."""
    return isinstance(exc, TemporaryFailure) or isinstance(exc.__cause__, TimeoutError)


async def _usage(driver: Driver[Any]) -> DiskUsage | None:
    try:
        async with asyncio.timeout(USAGE_SECONDS):
            return await driver.details()
    except Exception as exc:  # the storages table must show, whatever one back end does
        log.debug("usage of %s unknown: %s", driver.storage.mount_path, error_text(exc))
        return None
