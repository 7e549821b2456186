"""Background tasks with AList's states, a bounded worker pool per kind, shared by
every instance on one database.

A kind (``upload``, ``copy``) is registered with a runner: a coroutine that gets a
``TaskContext`` (to report progress and spawn child tasks) and the task's JSON payload.
It returns on success and raises on failure; cancelling a task cancels the asyncio task
running it. The payload is all a run needs, so a retry, even after a restart or on
another instance, runs again.

    submit ─> PENDING ─> RUNNING ─┬─> SUCCEEDED
                 ^                ├─> WAITING_RETRY ─> (queued again)   an error, retries left
                 │                └─> FAILED                            an error, none left
    cancel:  queued ─> CANCELED at once;  RUNNING ─> CANCELING ─> CANCELED
    retry:   FAILED or CANCELED ─> WAITING_RETRY, error and counter reset, once the
             kind's re-check passes for the creator as they are now

The row is the task. An instance runs a task only after claiming its row (one
conditional update: nobody holds it, or the holder's lease has run out), renews the
lease of what it runs every ``heartbeat_seconds``, and writes a run's changes only
while it still holds the row. Besides its own submissions, each instance polls the
table every ``poll_seconds`` for unheld tasks: queued ones, ones another instance let
go of when it stopped, and ones whose owner died (its lease ran out); such a task
runs again from its payload. A cancel asked on another instance is a flag in the row
that the owner sees at its next heartbeat; a deleted row is a cancel too.

This process keeps the tasks it submitted or ran in memory, a cache of their rows
that is fresher than the row while it runs them (progress is written at most once
per ``flush_interval``, and with the final state). Writes for one task are
serialised, each writing the task as it is when it runs.

Beside this module: ``task_context`` (what a runner sees), ``task_kinds`` (the kinds'
registry entries, constants and row helpers) and ``task_leases`` (the background loop
of progress, heartbeats and polls).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable
from contextlib import suppress
from typing import Any

from manifold.db.repos import UserRepo
from manifold.db.task_repo import TaskRepo
from manifold.errors import (
    BadRequest,
    ManifoldError,
    NotFound,
    NotSupported,
    PermissionDenied,
    ServerError,
    TaskNotFound,
)
from manifold.logs import detail_text
from manifold.models import Task, TaskState, User
from manifold.services.admin.settings import SettingsService
from manifold.services.task_context import Live, Recheck, TaskContext, TaskRunner, clean_percent
from manifold.services.task_kinds import (
    CANCELED_ERROR,
    DEFAULT_THREADS,
    DELETED_CREATOR,
    FINISH_SECONDS,
    FLUSH_SECONDS,
    HEARTBEAT_SECONDS,
    ID_LENGTH,
    LEASE_SECONDS,
    LEFTOVER_SECONDS,
    PATH_KEYS,
    POLL_SECONDS,
    QUEUED,
    RETRYABLE,
    STOP_GRACE_SECONDS,
    TASK_KINDS,
    Kind,
    copy_into,
    default_instance,
    may_see,
    new_task,
    new_task_id,
    utc_now,
)
from manifold.services.task_leases import LeaseLoop
from manifold.services.task_owners import OwnerMarks

__all__ = [
    "CANCELED_ERROR",
    "FINISH_SECONDS",
    "ID_LENGTH",
    "LEFTOVER_SECONDS",
    "TASK_KINDS",
    "Recheck",
    "Task",
    "TaskContext",
    "TaskRunner",
    "TaskService",
    "TaskState",
    "clean_percent",
    "new_task_id",
]

log = logging.getLogger("manifold.tasks")


class TaskService(LeaseLoop):
    """Tasks for this process's API and runners; see the module's docstring.

    ``lease_seconds``, ``heartbeat_seconds``, ``poll_seconds`` and ``flush_interval``
    are the module's constants, kept as attributes for tests.
    """

    def __init__(
        self,
        repo: TaskRepo,
        settings: SettingsService,
        users: UserRepo,
        flush_interval: float = FLUSH_SECONDS,
        instance: str = "",
        marks: OwnerMarks | None = None,
    ) -> None:
        self._repo = repo
        self._marks = marks
        self._marked = False
        self._settings = settings
        self._users = users
        # Unique per service, so two in one process (or a restart) never share rows.
        self.owner = f"{instance or default_instance()}/{secrets.token_hex(4)}"
        self.flush_interval = flush_interval
        self.lease_seconds = LEASE_SECONDS
        self.heartbeat_seconds = HEARTBEAT_SECONDS
        self.poll_seconds = POLL_SECONDS
        self._kinds: dict[str, Kind] = {}
        self._tasks: dict[str, Live] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        self._tender: asyncio.Task[None] | None = None
        self._closing = False  # no more claims
        self._stopping = False  # runs are being cancelled
        self._ended = asyncio.Event()
        # Waits while the storage holding a path is starting (set by the container).
        self.path_ready: Callable[[str], Awaitable[None]] | None = None

    def set_lease(self, seconds: float) -> None:
        """A lease of ``seconds`` (at least one), renewed every sixth of it."""
        self.lease_seconds = max(1.0, float(seconds))
        self.heartbeat_seconds = min(HEARTBEAT_SECONDS, self.lease_seconds / 6)

    def register(
        self,
        kind: str,
        runner: TaskRunner,
        *,
        max_retry: int,
        threads_setting: str,
        recheck: Recheck | None = None,
    ) -> None:
        """``recheck`` runs before every retry, with the creator as they are then: a
        task runs again only while its creator may still do what it does."""
        self._kinds[kind] = Kind(runner, max_retry, threads_setting, recheck)

    async def start(self) -> None:
        """Begin claiming: unheld tasks in the table (a stopped instance's, or a dead
        one's once its lease has run out) are found by the first poll. A task another
        instance holds is left alone, unless that instance shared this data folder
        and is gone (``task_owners``): its tasks are let go of at once."""
        self._closing = self._stopping = False
        if self._marks is not None:
            if not self._marked:
                await self.mark()
            for dead in self._marks.dead:
                log.info("tasks of %s, which ended without letting go, run again", dead)
                await self._repo.release(dead)
            await self._marks.started()
        self._tender = asyncio.create_task(self._tend())

    def dead_owners(self) -> list[str]:
        """The owners the start found dead on this data folder (``task_owners``): what
        they held, they will never let go of."""
        return list(self._marks.dead) if self._marks is not None else []

    async def mark(self) -> bool:
        """Mark this service as alive on the data folder, taking the start's turn
        until ``start``; whether it is alone there (``task_owners``): then the
        services' temporary areas hold nothing in progress. False without marks."""
        if self._marks is None:
            return False
        self._marked = True
        return await self._marks.start(self.owner)

    async def stop(self, finish_within: float = 0.0, *, release: bool = True) -> None:
        """Stop claiming, let running tasks end within ``finish_within`` seconds, cancel
        the rest and let go of their rows, for another instance (or the next start) to
        run them again. ``release=False`` leaves the rows held, as a process that died
        would: they are taken over once their leases run out.

        A run already writing its final state is let finish, so that state is kept.
        """
        self._closing = True
        running = [live.job for live in self._tasks.values() if live.active and live.job]
        if running and finish_within > 0:
            await asyncio.wait(running, timeout=finish_within)
        self._stopping = True
        if self._tender is not None:
            self._tender.cancel()
            await asyncio.wait([self._tender])
            self._tender = None
        finishing = {live.job for live in self._tasks.values() if live.task.done}
        jobs = [job for job in self._jobs if job not in finishing]
        for job in jobs:
            job.cancel()
        if self._jobs:
            await asyncio.wait(self._jobs, timeout=STOP_GRACE_SECONDS)
        if release:
            with suppress(Exception):
                await self._flush()
                await self._repo.release(self.owner)
        if self._marks is not None:
            await self._marks.stop(let_go=release)

    # -- the interface for code that creates tasks ------------------------------------

    async def submit(
        self,
        kind: str,
        name: str,
        creator: User | None,
        payload: dict[str, Any],
        total_bytes: int = 0,
    ) -> Task:
        spec = self._spec(kind)
        task = new_task(kind, name, creator, payload, total_bytes)
        await self._repo.insert(task)
        self._tasks[task.id] = Live(task, creator)
        self._enqueue(spec, task.id)
        return task

    async def submit_many(
        self, kind: str, creator: User | None, named_payloads: Iterable[tuple[str, dict[str, Any]]]
    ) -> list[Task]:
        """Several tasks of one kind, stored in one database write, not one each."""
        spec = self._spec(kind)
        tasks = [new_task(kind, name, creator, payload) for name, payload in named_payloads]
        await self._repo.insert_many(tasks)
        for task in tasks:
            self._tasks[task.id] = Live(task, creator)
            self._enqueue(spec, task.id)
        return tasks

    def get(self, task_id: str) -> Task:
        """A task this process submitted or ran, as it last saw it."""
        live = self._tasks.get(task_id)
        if live is None:
            raise TaskNotFound()
        return live.task

    async def load(self, task_id: str) -> Task:
        """A task as it is now, wherever it runs."""
        live = self._tasks.get(task_id)
        if live is not None and live.active:
            return live.task
        task = await self._repo.get(task_id)
        if task is None:
            raise TaskNotFound()
        return self._cached(task)

    async def wait_done(self, task_id: str) -> Task:
        """Wait until the task has finished and its run has let go of it.

        Raises ``TaskNotFound`` if the task is (or gets) deleted.
        """
        while True:
            ended = self._ended
            live = self._tasks.get(task_id)
            # A run lets go after writing the final row and starting the next queued task.
            if live is not None and live.active:
                await ended.wait()
                continue
            if live is not None and live.task.done:
                return live.task
            task = await self.load(task_id)
            if task.done:
                return task
            # Run elsewhere, or queued: its end shows here, or in the row at the latest.
            with suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), self.poll_seconds)

    async def of_kinds(self, kinds: Iterable[str]) -> list[Task]:
        """Every task of ``kinds``, whoever made it and wherever it runs: for a service
        that keeps files for its tasks and must know which of them may still need them."""
        return self._fresh(await self._repo.of_kinds(kinds))

    async def files_in_use(self, kind: str, key: str) -> set[str]:
        """The paths in ``payload[key]`` of unfinished ``kind`` tasks, on any instance."""
        tasks = await self._repo.of_kinds([kind], done=False)
        return {str(task.payload[key]) for task in tasks if task.payload.get(key)}

    # -- the interface for the API: one kind, seen by one user ------------------------

    async def undone(self, kind: str, user: User) -> list[Task]:
        return await self._visible(kind, user, done=False)

    async def done(self, kind: str, user: User) -> list[Task]:
        return await self._visible(kind, user, done=True)

    async def find(self, kind: str, user: User, task_id: str) -> Task:
        self._check_kind(kind)
        task = await self._repo.get(task_id)
        # Someone else's task answers as a missing one, so ids cannot be probed.
        if task is None or task.kind != kind or not may_see(user, task):
            raise TaskNotFound()
        return self._fresh([task])[0]

    async def cancel(self, kind: str, user: User, task_id: str) -> None:
        await self._cancel(await self.find(kind, user, task_id))

    async def delete(self, kind: str, user: User, task_id: str) -> None:
        await self._delete([await self.find(kind, user, task_id)])

    async def retry(self, kind: str, user: User, task_id: str) -> None:
        await self._retry(await self.find(kind, user, task_id))

    async def cancel_some(self, kind: str, user: User, ids: Iterable[str]) -> dict[str, str]:
        return await self._each(self.cancel, kind, user, ids)

    async def delete_some(self, kind: str, user: User, ids: Iterable[str]) -> dict[str, str]:
        return await self._each(self.delete, kind, user, ids)

    async def retry_some(self, kind: str, user: User, ids: Iterable[str]) -> dict[str, str]:
        return await self._each(self.retry, kind, user, ids)

    async def disown(self, user_id: int) -> None:
        """Detach a deleted user's tasks from the id, which the next user made may get."""
        await self._repo.disown(user_id, DELETED_CREATOR)
        for live in self._tasks.values():
            if live.task.creator_id == user_id:
                live.task.creator_id = DELETED_CREATOR
                live.creator = None

    async def clear_done(self, kind: str, user: User) -> None:
        await self._delete(await self.done(kind, user))

    async def clear_succeeded(self, kind: str, user: User) -> None:
        done = await self.done(kind, user)
        await self._delete([task for task in done if task.state == TaskState.SUCCEEDED])

    async def retry_failed(self, kind: str, user: User) -> None:
        """Retry every failed task; one its creator may no longer run stays failed, and
        the first such refusal is raised once the others are retried."""
        refused: ManifoldError | None = None
        for task in await self.done(kind, user):
            if task.state == TaskState.FAILED:
                try:
                    await self._retry(task)
                except ManifoldError as exc:
                    refused = refused or exc
        if refused is not None:
            raise refused

    async def _visible(self, kind: str, user: User, done: bool) -> list[Task]:
        self._check_kind(kind)
        tasks = await self._repo.of_kinds([kind], done=done)
        return self._fresh([task for task in tasks if may_see(user, task)])

    def _fresh(self, tasks: list[Task]) -> list[Task]:
        """The rows, with this process's own view of what it runs (fresher progress)."""
        return [self._cached(task) for task in tasks]

    def _cached(self, task: Task) -> Task:
        live = self._tasks.get(task.id)
        if live is None:
            return task
        if not live.active:
            copy_into(live.task, task)
        return live.task

    def _check_kind(self, kind: str) -> None:
        if kind not in TASK_KINDS and kind not in self._kinds:
            raise NotFound()

    @staticmethod
    async def _each(
        action: Callable[[str, User, str], Awaitable[None]],
        kind: str,
        user: User,
        ids: Iterable[str],
    ) -> dict[str, str]:
        failed: dict[str, str] = {}
        for task_id in ids:
            try:
                await action(kind, user, task_id)
            except ManifoldError as exc:
                failed[task_id] = exc.message
        return failed

    # -- state changes asked through the API ---------------------------------------------

    async def _cancel(self, task: Task) -> None:
        live = self._tasks.get(task.id)
        if live is not None and live.active:
            await self._cancel_here(live)
        elif not task.done:
            now = utc_now()
            if await self._repo.cancel_unheld(task.id, CANCELED_ERROR, now):
                self._dequeue(task.id)
                task.state, task.error, task.end_time = TaskState.CANCELED, CANCELED_ERROR, now
                self._cached(task)
                self._announce()
            elif await self._repo.flag_cancel(task.id):
                # Held elsewhere (its owner sees the flag), or claimed here meanwhile.
                live = self._tasks.get(task.id)
                if live is not None and live.active:
                    await self._cancel_here(live)

    async def _cancel_here(self, live: Live) -> None:
        if live.task.state == TaskState.RUNNING and live.job is not None:
            live.task.state = TaskState.CANCELING
            live.job.cancel()
            await self.persist(live)

    async def _delete(self, tasks: list[Task]) -> None:
        """Forget tasks; a running one is cancelled first rather than left running unseen
        (on another instance, its owner cancels it when it sees the row gone)."""
        for task in tasks:
            if not task.done:
                await self._cancel(task)
            self._dequeue(task.id)
            self._tasks.pop(task.id, None)
        await self._repo.delete(task.id for task in tasks)

    async def _retry(self, task: Task) -> None:
        if task.state not in RETRYABLE:
            raise BadRequest("only a failed or canceled task can be retried")
        if task.kind not in self._kinds:
            raise NotSupported(f"{task.kind} tasks can not run on this server")
        spec = self._kinds[task.kind]
        creator = await self._recheck(task, spec)
        task.state, task.error, task.retry = TaskState.WAITING_RETRY, "", 0
        if not await self._repo.requeue(task, RETRYABLE):
            raise BadRequest("only a failed or canceled task can be retried")
        live = self._tasks.setdefault(task.id, Live(task))
        copy_into(live.task, task)
        live.creator = creator or live.creator
        self._enqueue(spec, task.id)

    async def _recheck(self, task: Task, spec: Kind) -> User | None:
        """Run the kind's re-check with the creator reloaded, who then runs the task."""
        if spec.recheck is None or not task.creator_id:
            return None
        user = await self._users.get(task.creator_id)
        if user is None or user.disabled:
            raise PermissionDenied()
        await spec.recheck(user, task.payload)
        return user

    # -- writes of a run -------------------------------------------------------------------

    async def _end(self, live: Live, state: TaskState, error: str) -> None:
        task = live.task
        task.state, task.error, task.end_time = state, error, utc_now()
        if state == TaskState.SUCCEEDED:
            task.progress = 100.0
        try:
            await self._let_go(live)
        finally:
            self._announce()

    async def _let_go(self, live: Live) -> None:
        """Write the outcome of a run (an end, or queued again) and give up the row."""
        async with live.lock:
            live.dirty = False
            await self._repo.finish(live.task, self.owner)

    @property
    def stopping(self) -> bool:
        """Whether the service is cancelling its runs to stop."""
        return self._stopping

    def max_retry(self, kind: str) -> int:
        return self._spec(kind).max_retry

    async def persist(self, live: Live) -> None:
        """Write a run's task as it is now."""
        async with live.lock:
            live.dirty = False
            await self._repo.save(live.task, self.owner)

    # -- scheduling --------------------------------------------------------------------

    def _spec(self, kind: str) -> Kind:
        spec = self._kinds.get(kind)
        if spec is None:
            raise NotSupported(f"{kind} tasks can not run on this server")
        return spec

    def _enqueue(self, spec: Kind, task_id: str) -> None:
        if task_id not in spec.queue:
            spec.queue.append(task_id)
        self._pump(spec)

    def _dequeue(self, task_id: str) -> None:
        for spec in self._kinds.values():
            with suppress(ValueError):
                spec.queue.remove(task_id)

    def _limit(self, spec: Kind) -> int:
        return max(1, self._settings.get_int(spec.threads_setting, DEFAULT_THREADS))

    def _pump(self, spec: Kind) -> None:
        """Start queued tasks while the kind has free workers (a setting, read each time)."""
        if self._closing:
            return
        while spec.running < self._limit(spec) and spec.queue:
            task_id = spec.queue.popleft()
            live = self._tasks.get(task_id)
            # An active task is re-queued by its own run when that run ends.
            if live is not None and live.active:
                continue
            spec.running += 1
            job = asyncio.create_task(self._run(task_id, spec))
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)

    async def _claim(self, task_id: str) -> tuple[Live, bool] | None:
        now = utc_now()
        claimed = await self._repo.claim(task_id, self.owner, now, self._lease_end(now))
        if claimed is None:
            return None
        task, cancel = claimed
        live = self._tasks.get(task_id)
        if live is None:
            live = self._tasks[task_id] = Live(task)
        else:
            copy_into(live.task, task)
        live.active, live.lost, live.job = True, False, asyncio.current_task()
        return live, cancel or task.state == TaskState.CANCELING

    async def _run(self, task_id: str, spec: Kind) -> None:
        live: Live | None = None
        try:
            claimed = await self._claim(task_id)
            if claimed is None:
                return  # run elsewhere, cancelled, or deleted meanwhile
            live, cancel = claimed
            if cancel:
                await self._end(live, TaskState.CANCELED, CANCELED_ERROR)
            else:
                await self._attempt(live, spec)
        except Exception as exc:
            log.error("task %s could not record its outcome: %s", task_id, type(exc).__name__)
        finally:
            spec.running -= 1
            if live is not None:
                live.active = False
            again = live is not None and not live.lost and live.task.state in QUEUED
            if again and task_id in self._tasks:
                self._enqueue(spec, task_id)
            else:
                self._pump(spec)
            self._announce()

    def _announce(self) -> None:
        self._ended.set()
        self._ended = asyncio.Event()

    async def _attempt(self, live: Live, spec: Kind) -> None:
        task = live.task
        task.state, task.start_time, task.end_time = TaskState.RUNNING, utc_now(), None
        task.progress, live.done_bytes = 0.0, 0
        try:
            await self.persist(live)
            await self._storages_ready(task.payload)
            if task.retry > 0:
                live.creator = await self._recheck(task, spec) or live.creator
            if live.creator is None and task.creator_id:
                live.creator = await self._creator(task.creator_id)
            await spec.runner(TaskContext(self, live), task.payload)
        except asyncio.CancelledError:
            if self._stopping or live.lost:
                raise
            await self._end(live, TaskState.CANCELED, CANCELED_ERROR)
        except Exception as exc:
            if not self._stopping and not live.lost:
                # Shown to users and stored: a database error appears as its class alone.
                await self._failed(live, spec, detail_text(exc))
        else:
            await self._end(live, TaskState.SUCCEEDED, "")

    async def _storages_ready(self, payload: dict[str, Any]) -> None:
        """Wait for the storages the task's paths lie on, should they still be starting
        (a task resumed at start): only those, not every storage."""
        if self.path_ready is None:
            return
        for key in PATH_KEYS:
            path = payload.get(key)
            if isinstance(path, str) and path.startswith("/"):
                await self.path_ready(path)

    async def _failed(self, live: Live, spec: Kind, error: str) -> None:
        task = live.task
        if task.state == TaskState.CANCELING:
            await self._end(live, TaskState.CANCELED, CANCELED_ERROR)
        elif task.retry < spec.max_retry:
            task.retry += 1
            task.state, task.error, task.end_time = TaskState.WAITING_RETRY, error, utc_now()
            await self._let_go(live)
        else:
            await self._end(live, TaskState.FAILED, error)

    async def _creator(self, user_id: int) -> User:
        user = await self._users.get(user_id)
        if user is None:
            raise ServerError("the user who created this task no longer exists")
        return user
