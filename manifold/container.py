"""Builds every service from the configuration, and starts and stops them together."""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from manifold.config import Config
from manifold.db import repos
from manifold.db.engine import dispose, migrate, open_engine
from manifold.db.multipart_repo import MultipartRepo
from manifold.db.parking_repo import ParkingRepo
from manifold.db.passkey_repo import ChallengeRepo, PasskeyRepo
from manifold.db.props_repo import DavPropRepo
from manifold.db.search_repo import SearchRepo
from manifold.db.share_repo import ShareRepo
from manifold.db.stats import task_counts
from manifold.db.task_repo import TaskRepo
from manifold.drivers.registry import DriverRegistry, builtin_registry
from manifold.metrics import Metrics
from manifold.services.admin.metas import MetaService
from manifold.services.admin.settings import SettingsService
from manifold.services.admin.storages import StorageService
from manifold.services.archive.service import ArchiveService
from manifold.services.auth.changes import UserChanges
from manifold.services.auth.credentials import Credentials
from manifold.services.auth.limiter import (
    GuessLimiter,
    LoginLimiter,
    MemoryGuessLimiter,
    MemoryLoginLimiter,
)
from manifold.services.auth.oidc import OidcClient
from manifold.services.auth.passkeys import PasskeyService
from manifold.services.auth.service import AuthService
from manifold.services.auth.sign import Signer
from manifold.services.auth.sshkeys import SshKeyService
from manifold.services.auth.sso import SsoService
from manifold.services.auth.tokens import DatabaseRevocationStore, TokenService
from manifold.services.auth.users import UserService
from manifold.services.fs.downloads import DownloadService
from manifold.services.fs.events import TreeEvents
from manifold.services.fs.moves import Moves
from manifold.services.fs.multipart import (
    Limits,
    MultipartUploads,
    NativeStore,
    StagingStore,
    keep_swept,
)
from manifold.services.fs.notes import ObjectNotes
from manifold.services.fs.ops import GuardedOps
from manifold.services.fs.parking import ParkingJournal
from manifold.services.fs.parking_recovery import Recovery
from manifold.services.fs.props import DeadProps
from manifold.services.fs.read import GuardedReader
from manifold.services.fs.redirects import SETTING as REDIRECT_SETTING
from manifold.services.fs.redirects import LinkClient
from manifold.services.fs.scan import ScanService
from manifold.services.fs.streams import http_client
from manifold.services.fs.transfers import Transfers
from manifold.services.fs.tree import FileTree
from manifold.services.fs.uploads import Uploads
from manifold.services.fs.write import GuardedWriter
from manifold.services.offline.service import OfflineService
from manifold.services.runner import TaskService
from manifold.services.search.service import SearchService
from manifold.services.shares import ShareService
from manifold.services.task_owners import OwnerMarks
from manifold.sharing import listen
from manifold.state import State, open_state
from manifold.vfs.storage_ops import MemoryListCache

ADMIN_PASSWORD_ENV = "MANIFOLD_ADMIN_PASSWORD"  # noqa: S105 - a variable name


@dataclass(slots=True)
class Services:
    config: Config
    engine: AsyncEngine
    registry: DriverRegistry
    settings: SettingsService
    users: UserService
    auth: AuthService
    # Single sign-on through an OAuth 2 platform or an OpenID Connect provider.
    sso: SsoService
    passkeys: PasskeyService
    # The one credential check of the protocol servers (WebDAV, FTP, SFTP).
    credentials: Credentials
    metas: MetaService
    sshkeys: SshKeyService
    revocations: DatabaseRevocationStore
    storages: StorageService
    reader: GuardedReader
    signer: Signer
    events: TreeEvents
    tree: FileTree
    # One pooled HTTP client for every link fetched and download relayed.
    http: LinkClient
    writer: GuardedWriter
    ops: GuardedOps
    # WebDAV's dead properties (PROPPATCH), kept with their paths.
    dav_props: DeadProps
    notes: ObjectNotes
    transfers: Transfers
    archives: ArchiveService
    archive_signer: Signer
    offline: OfflineService
    uploads: Uploads
    # Resumable multipart uploads (OpenList's ``/api/fs/multipart/*``).
    multipart: MultipartUploads
    tasks: TaskService
    search: SearchService
    scan: ScanService
    # Share links (OpenList v4's ``/api/share``, ``/@s``, ``/sd``).
    shares: ShareService
    # What this process shares with the others (``manifold.state``): the change bus,
    # run-once locks and login counters; in memory when it runs alone.
    state: State
    created_admin_password: str | None = None
    # ``/metrics``' counters, when the config turns them on.
    metrics: Metrics | None = None
    metrics_sync: asyncio.Task[None] | None = None
    multipart_sweep: asyncio.Task[None] | None = None
    # False in a worker of ``--workers N``: the parent migrated before starting it.
    migrate_on_start: bool = True

    @classmethod
    def build(cls, config: Config, shared: bool = False) -> Services:
        """Every service of ``config``; ``shared``: other processes use the same
        database (state on the database at least, see ``manifold.state``)."""
        engine = open_engine(config.effective_database_url)
        state = open_state(config, engine, shared)
        bus = state.bus
        settings = SettingsService(repos.SettingRepo(engine), bus)
        changes = UserChanges(config.data_dir)
        passkeys = PasskeyRepo(engine)
        users = UserService(
            repos.UserRepo(engine), repos.SshKeyRepo(engine), changes, bus, passkeys
        )
        revocations = DatabaseRevocationStore(repos.RevocationRepo(engine), bus)
        tokens = TokenService(config.jwt_secret, config.token_expires_in, revocations)
        limiter = _login_limiter(config, state, "login")
        setup_limiter = _login_limiter(config, state, "setup")
        registry = builtin_registry()
        list_cache = MemoryListCache()
        storages = StorageService(repos.StorageRepo(engine), registry, list_cache, bus, state.locks)
        storages.resources.max_listing_entries = config.max_listing_entries
        storages.resources.data_dir = config.data_dir
        metrics = Metrics() if config.metrics else None
        if metrics is not None:
            storages.call_recorder = metrics.storage_call
            metrics.watch_list_cache(lambda: (list_cache.hits, list_cache.misses))
        metas = MetaService(repos.MetaRepo(engine), bus)
        events = TreeEvents()
        # Links follow redirects to other public hosts only with the admin's consent.
        http = http_client(elsewhere=lambda: settings.get_bool(REDIRECT_SETTING))
        tree = FileTree(storages, events, http)
        # Drivers that serve other mounts (Alias) get the tree at mount time; the tree
        # resolves through the storages, so this one link is made after both exist.
        storages.tree = tree
        fs = GuardedReader(tree, metas, _guess_limiter(config, state))
        search = SearchService(SearchRepo(engine), settings, storages, fs, metas, state.locks, bus)
        events.subscribe(search)
        storages.on_listed = search.listed
        tasks = TaskService(
            TaskRepo(engine),
            settings,
            repos.UserRepo(engine),
            instance=config.instance_id,
            marks=OwnerMarks(config.data_dir / "owners"),
        )
        tasks.set_lease(config.task_lease_seconds)
        tasks.path_ready = tree.ready
        tree.parkings = _parkings(ParkingRepo(engine), tasks, storages, events)
        writer = GuardedWriter(fs, metas, tasks)
        transfers = Transfers(writer, config.data_dir / "temp")
        transfers.register(tasks)
        Moves(writer, transfers).register(tasks)
        archives = ArchiveService(fs, metas, writer, config.data_dir / "temp", settings=settings)
        archives.register(tasks)
        offline = OfflineService(settings, writer, config.data_dir / "temp")
        offline.register(tasks)
        sshkeys = SshKeyService(repos.SshKeyRepo(engine))
        signer = Signer(settings)
        downloads = DownloadService(fs, metas, settings, signer)
        # Drivers that write this server's own /d links (Strm) sign them as /d checks.
        storages.resources.site_url = config.site_url
        storages.resources.download_sign = downloads.sign_for
        storages.resources.links = http
        ops = GuardedOps(fs, writer, downloads)
        props = DavPropRepo(engine)
        uploads = Uploads(writer, transfers, tasks)
        multipart = MultipartUploads(
            MultipartRepo(engine),
            StagingStore(config.multipart_staging),
            writer,
            Limits(settings),
            NativeStore(writer),
        )
        built = cls(
            config=config,
            state=state,
            engine=engine,
            registry=registry,
            settings=settings,
            users=users,
            auth=AuthService(users, tokens, settings, limiter, setup_limiter),
            sso=SsoService(
                settings,
                users,
                tokens,
                OidcClient(http),
                repos.SsoFlowRepo(engine),
                config.jwt_secret,
                config.site_url,
            ),
            passkeys=PasskeyService(
                passkeys, ChallengeRepo(engine), users, tokens, settings, config.jwt_secret
            ),
            credentials=Credentials(users, limiter, settings, sshkeys),
            metas=metas,
            sshkeys=sshkeys,
            revocations=revocations,
            storages=storages,
            reader=fs,
            signer=signer,
            archive_signer=Signer(settings, "-archive"),
            archives=archives,
            offline=offline,
            tasks=tasks,
            search=search,
            scan=ScanService(tree),
            shares=ShareService(
                ShareRepo(engine), users, fs, _guess_limiter(config, state, "share")
            ),
            events=events,
            tree=tree,
            http=http,
            writer=writer,
            ops=ops,
            dav_props=DeadProps(props),
            notes=ObjectNotes(fs, ops, props),
            transfers=transfers,
            uploads=uploads,
            multipart=multipart,
            metrics=metrics,
        )
        listen(bus, built)
        return built

    async def start(self, admin_password: str | None = None) -> None:
        """Migrate, load caches, create the default users, start the storages (in the
        background: see ``StorageService.start``), the tasks and the search index.

        The first admin's password is ``admin_password``, else the environment's
        ``MANIFOLD_ADMIN_PASSWORD``, else random (kept in ``created_admin_password``, to be
        shown once).
        """
        await self.open_records(admin_password)
        await self.metas.start()
        await self.revocations.load()
        await self.storages.start()
        # Alone on the data folder (a start after a crash, say), nothing left in its
        # temporary areas can be in progress: what no task needs goes, however young.
        alone = await self.tasks.mark()
        await self.transfers.start(self.tasks, alone)
        await self.archives.start(self.tasks, alone)
        await self.offline.start(self.tasks)
        # Last: a task taken over at start finds its kind's service ready.
        await self.tasks.start()
        # What dead owners left parked is put back as each storage becomes ready.
        await self.tree.parkings.start(self.tasks.dead_owners())
        await self.search.start()
        # Sessions idle past the setting (a stop of days, say) go at once, then now and then.
        await self.multipart.sweep()
        self.multipart_sweep = asyncio.create_task(keep_swept(self.multipart))
        self.state.bus.handlers.open()
        if self.metrics is not None:
            self.metrics_sync = asyncio.create_task(_sync_metrics(self.metrics))

    async def open_records(self, admin_password: str | None = None) -> None:
        """The database migrated, the settings and the default users, and nothing more:
        what the command line's admin commands need. No storage is started, no driver
        built, no task taken over, so a locked-out admin's recovery never waits on a
        back end. ``close_records`` ends it; ``start`` goes on from here."""
        if self.migrate_on_start:
            await migrate(self.engine)
        # Before the caches load: a change another process makes meanwhile is applied
        # after them.
        await self.state.start()
        await self.settings.start()
        password = admin_password or os.environ.get(ADMIN_PASSWORD_ENV) or None
        created = await self.users.ensure_defaults(password)
        # Only a generated password is shown (once); one the operator chose is a secret
        # that has no business in the log.
        self.created_admin_password = created if password is None else None

    async def close_records(self) -> None:
        """End what ``open_records`` began."""
        await self.state.stop()
        await self.http.aclose()
        await self.close_engine()

    async def close_engine(self) -> None:
        await dispose(self.engine)

    async def prepare(self) -> str | None:
        """What must happen once before several workers start: migrations, default
        settings and users. Returns the generated admin password, if one was made."""
        await migrate(self.engine)
        await self.settings.start()
        password = os.environ.get(ADMIN_PASSWORD_ENV) or None
        created = await self.users.ensure_defaults(password)
        return created if password is None else None

    async def task_counts(self) -> list[tuple[str, int, int]]:
        """(kind, state, how many) of the tasks in the database, for ``/metrics``."""
        return await task_counts(self.engine)

    async def stop(self, task_deadline: float = 0.0) -> None:
        """Stop everything; running tasks get ``task_deadline`` seconds to end before
        they are let go of, for another instance or the next start to run again."""
        for chore in (self.metrics_sync, self.multipart_sweep):
            if chore is not None:
                chore.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await chore
        await self.scan.close()
        await self.search.stop()
        await self.tasks.stop(task_deadline)
        await self.tree.parkings.stop()
        await self.offline.stop()
        await self.storages.stop()
        await self.close_records()


async def _sync_metrics(metrics: Metrics, every: float = 5.0) -> None:
    """Copy plain counts into the metrics now and then, so each worker reports its own."""
    while True:
        await asyncio.sleep(every)
        metrics.sync()


def _parkings(
    repo: ParkingRepo, tasks: TaskService, storages: StorageService, events: TreeEvents
) -> ParkingJournal:
    """The journal of parked objects, under the task service's owner id: the owner
    the data folder's marks name, and whose lease rule holds across machines."""
    journal = ParkingJournal(repo, tasks.owner)
    journal.set_lease(tasks.lease_seconds)
    journal.recovery = Recovery(repo, storages, journal, events)
    return journal


def _login_limiter(config: Config, state: State, scope: str) -> LoginLimiter:
    shared = state.login_limiter(scope, config.max_login_failures, config.login_lockout_seconds)
    if shared is not None:
        return shared
    return MemoryLoginLimiter(config.max_login_failures, config.login_lockout_seconds)


def _guess_limiter(config: Config, state: State, scope: str = "folder") -> GuessLimiter:
    limits = (config.max_login_failures, config.login_lockout_seconds)
    return state.guess_limiter(scope, *limits) or MemoryGuessLimiter(*limits)
