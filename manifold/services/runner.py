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
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import secrets
import socket
import string
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
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

__all__ = [
    "TASK_KINDS",
    "Recheck",
    "Task",
    "TaskContext",
    "TaskRunner",
    "TaskService",
    "TaskState",
]

log = logging.getLogger("manifold.tasks")

# Every kind the API serves; a kind without a runner answers empty lists.
TASK_KINDS = (
    "upload",
    "copy",
    "offline_download",
    "offline_download_transfer",
    "decompress",
    "decompress_upload",
    "move",  # OpenList's: moves into another storage, and S3 folders
)
ID_ALPHABET = string.ascii_letters + string.digits + "_-"
ID_LENGTH = 21
DEFAULT_THREADS = 5
STOP_GRACE_SECONDS = 10.0
# An owner renews its leases every HEARTBEAT_SECONDS; a task whose lease is LEASE_SECONDS
# old is taken over. Instances look for unheld tasks every POLL_SECONDS.
LEASE_SECONDS = 30.0
HEARTBEAT_SECONDS = 5.0
POLL_SECONDS = 1.0
FLUSH_SECONDS = 0.5
# How long the server's shutdown lets running tasks finish before it lets go of them.
FINISH_SECONDS = 5.0
# Ids of claimable tasks one poll reads at most.
POLL_BATCH = 50
# A spool or work file no task names is removed at start once unchanged this long;
# a newer one may belong to another process sharing the data folder.
LEFTOVER_SECONDS = 3600.0
CANCELED_ERROR = "context canceled"
QUEUED = frozenset({TaskState.PENDING, TaskState.WAITING_RETRY})
RETRYABLE = frozenset({TaskState.FAILED, TaskState.CANCELED})
# The creator id of a task whose creator was deleted: no user has it, so the task is
# shown to admins only and a retry fails as the creator's would.
DELETED_CREATOR = -1


def new_task_id() -> str:
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH))


def clean_percent(percent: float) -> float:
    """A progress value for the API: NaN (an unknown total) shows as done, as in AList."""
    if math.isnan(percent):
        return 100.0
    return min(100.0, max(0.0, percent))


def default_instance() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True, eq=False)
class _Live:
    """A task with what only this process knows: its creator, its run, its lock.

    ``active``: this process holds the row and runs (or is about to run) the task;
    ``lost``: the row was taken from it (deleted, or claimed after its lease ran out).
    """

    task: Task
    creator: User | None = None
    job: asyncio.Task[Any] | None = None
    active: bool = False
    lost: bool = False
    done_bytes: int = 0
    dirty: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TaskContext:
    """What a runner sees of its task."""

    def __init__(self, service: TaskService, live: _Live) -> None:
        self._service = service
        self._live = live
        self.task_id = live.task.id
        self.creator = live.creator

    def set_status(self, status: str) -> None:
        self._live.task.status = status
        self._live.dirty = True

    def set_progress(self, percent: float) -> None:
        self._live.task.progress = clean_percent(percent)
        self._live.dirty = True

    def set_total(self, total_bytes: int) -> None:
        self._live.task.total_bytes = max(0, total_bytes)
        if self._live.done_bytes:
            self._progress_from_bytes()
        self._live.dirty = True

    def add_done(self, nbytes: int) -> None:
        self._live.done_bytes += nbytes
        self._progress_from_bytes()

    def _progress_from_bytes(self) -> None:
        total = self._live.task.total_bytes
        if total > 0:
            self.set_progress(self._live.done_bytes * 100 / total)

    @property
    def last_attempt(self) -> bool:
        """Whether a failure now ends the task (no retry is left)."""
        task = self._live.task
        return task.retry >= self._service._spec(task.kind).max_retry

    @property
    def shutting_down(self) -> bool:
        """Whether a cancel now is the server stopping (the task resumes after a
        restart), not someone cancelling the task."""
        return self._service._stopping

    async def save_payload(self, **values: Any) -> None:
        """Remember ``values`` in the task's payload, stored at once: what a retry,
        after a restart too, needs to pick up where this run was (a tool's id)."""
        self._live.task.payload.update(values)
        await self._service._persist(self._live)

    async def spawn(
        self, kind: str, name: str, payload: dict[str, Any], total_bytes: int = 0
    ) -> Task:
        """A new task with this task's creator."""
        return await self._service.submit(kind, name, self.creator, payload, total_bytes)


TaskRunner = Callable[[TaskContext, dict[str, Any]], Awaitable[None]]
# Whether the user may still do what the payload does: the checks a direct request
# passes, raising the same ``ManifoldError`` it would answer.
Recheck = Callable[[User, dict[str, Any]], Awaitable[None]]


@dataclass(slots=True)
class _Kind:
    runner: TaskRunner
    max_retry: int
    threads_setting: str
    recheck: Recheck | None = None
    queue: deque[str] = field(default_factory=deque)
    running: int = 0


class TaskService:
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
    ) -> None:
        self._repo = repo
        self._settings = settings
        self._users = users
        # Unique per service, so two in one process (or a restart) never share rows.
        self.owner = f"{instance or default_instance()}/{secrets.token_hex(4)}"
        self.flush_interval = flush_interval
        self.lease_seconds = LEASE_SECONDS
        self.heartbeat_seconds = HEARTBEAT_SECONDS
        self.poll_seconds = POLL_SECONDS
        self._kinds: dict[str, _Kind] = {}
        self._tasks: dict[str, _Live] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        self._tender: asyncio.Task[None] | None = None
        self._closing = False  # no more claims
        self._stopping = False  # runs are being cancelled
        self._ended = asyncio.Event()

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
        self._kinds[kind] = _Kind(runner, max_retry, threads_setting, recheck)

    async def start(self) -> None:
        """Begin claiming: unheld tasks in the table (a stopped instance's, or a dead
        one's once its lease has run out) are found by the first poll. A task another
        instance holds is left alone."""
        self._closing = self._stopping = False
        self._tender = asyncio.create_task(self._tend())

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
        task = _new_task(kind, name, creator, payload, total_bytes)
        await self._repo.insert(task)
        self._tasks[task.id] = _Live(task, creator)
        self._enqueue(spec, task.id)
        return task

    async def submit_many(
        self, kind: str, creator: User | None, named_payloads: Iterable[tuple[str, dict[str, Any]]]
    ) -> list[Task]:
        """Several tasks of one kind, stored in one database write, not one each."""
        spec = self._spec(kind)
        tasks = [_new_task(kind, name, creator, payload) for name, payload in named_payloads]
        await self._repo.insert_many(tasks)
        for task in tasks:
            self._tasks[task.id] = _Live(task, creator)
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
        if task is None or task.kind != kind or not _may_see(user, task):
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
        return self._fresh([task for task in tasks if _may_see(user, task)])

    def _fresh(self, tasks: list[Task]) -> list[Task]:
        """The rows, with this process's own view of what it runs (fresher progress)."""
        return [self._cached(task) for task in tasks]

    def _cached(self, task: Task) -> Task:
        live = self._tasks.get(task.id)
        if live is None:
            return task
        if not live.active:
            _copy_into(live.task, task)
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
            now = _now()
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

    async def _cancel_here(self, live: _Live) -> None:
        if live.task.state == TaskState.RUNNING and live.job is not None:
            live.task.state = TaskState.CANCELING
            live.job.cancel()
            await self._persist(live)

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
        live = self._tasks.setdefault(task.id, _Live(task))
        _copy_into(live.task, task)
        live.creator = creator or live.creator
        self._enqueue(spec, task.id)

    async def _recheck(self, task: Task, spec: _Kind) -> User | None:
        """Run the kind's re-check with the creator reloaded, who then runs the task."""
        if spec.recheck is None or not task.creator_id:
            return None
        user = await self._users.get(task.creator_id)
        if user is None or user.disabled:
            raise PermissionDenied()
        await spec.recheck(user, task.payload)
        return user

    # -- writes of a run -------------------------------------------------------------------

    async def _end(self, live: _Live, state: TaskState, error: str) -> None:
        task = live.task
        task.state, task.error, task.end_time = state, error, _now()
        if state == TaskState.SUCCEEDED:
            task.progress = 100.0
        try:
            await self._let_go(live)
        finally:
            self._announce()

    async def _let_go(self, live: _Live) -> None:
        """Write the outcome of a run (an end, or queued again) and give up the row."""
        async with live.lock:
            live.dirty = False
            await self._repo.finish(live.task, self.owner)

    async def _persist(self, live: _Live) -> None:
        async with live.lock:
            live.dirty = False
            await self._repo.save(live.task, self.owner)

    # -- scheduling --------------------------------------------------------------------

    def _spec(self, kind: str) -> _Kind:
        spec = self._kinds.get(kind)
        if spec is None:
            raise NotSupported(f"{kind} tasks can not run on this server")
        return spec

    def _enqueue(self, spec: _Kind, task_id: str) -> None:
        if task_id not in spec.queue:
            spec.queue.append(task_id)
        self._pump(spec)

    def _dequeue(self, task_id: str) -> None:
        for spec in self._kinds.values():
            with suppress(ValueError):
                spec.queue.remove(task_id)

    def _limit(self, spec: _Kind) -> int:
        return max(1, self._settings.get_int(spec.threads_setting, DEFAULT_THREADS))

    def _pump(self, spec: _Kind) -> None:
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

    async def _claim(self, task_id: str) -> tuple[_Live, bool] | None:
        now = _now()
        claimed = await self._repo.claim(task_id, self.owner, now, self._lease_end(now))
        if claimed is None:
            return None
        task, cancel = claimed
        live = self._tasks.get(task_id)
        if live is None:
            live = self._tasks[task_id] = _Live(task)
        else:
            _copy_into(live.task, task)
        live.active, live.lost, live.job = True, False, asyncio.current_task()
        return live, cancel or task.state == TaskState.CANCELING

    async def _run(self, task_id: str, spec: _Kind) -> None:
        live: _Live | None = None
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

    async def _attempt(self, live: _Live, spec: _Kind) -> None:
        task = live.task
        task.state, task.start_time, task.end_time = TaskState.RUNNING, _now(), None
        task.progress, live.done_bytes = 0.0, 0
        try:
            await self._persist(live)
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

    async def _failed(self, live: _Live, spec: _Kind, error: str) -> None:
        task = live.task
        if task.state == TaskState.CANCELING:
            await self._end(live, TaskState.CANCELED, CANCELED_ERROR)
        elif task.retry < spec.max_retry:
            task.retry += 1
            task.state, task.error, task.end_time = TaskState.WAITING_RETRY, error, _now()
            await self._let_go(live)
        else:
            await self._end(live, TaskState.FAILED, error)

    async def _creator(self, user_id: int) -> User:
        user = await self._users.get(user_id)
        if user is None:
            raise ServerError("the user who created this task no longer exists")
        return user

    # -- the background: progress, leases, and tasks nobody holds ----------------------------

    async def _tend(self) -> None:
        loop = asyncio.get_running_loop()
        beat = poll = loop.time()
        while True:
            await asyncio.sleep(min(self.flush_interval, self.poll_seconds, self.heartbeat_seconds))
            now = loop.time()
            try:
                await self._flush()
                if now >= beat:
                    beat = now + self.heartbeat_seconds
                    await self._beat()
                if now >= poll:
                    poll = now + self.poll_seconds
                    await self._poll()
            except Exception as exc:
                log.warning("could not keep the task table: %s", type(exc).__name__)
            # A larger worker setting takes effect without waiting for a task to end.
            for spec in self._kinds.values():
                self._pump(spec)

    async def _flush(self) -> None:
        for live in [live for live in self._tasks.values() if live.dirty and live.active]:
            async with live.lock:
                live.dirty = False
                await self._repo.save_progress(live.task, self.owner)

    async def _beat(self) -> None:
        """Renew the leases of what runs here; cancel what was cancelled or deleted
        elsewhere, and what another instance took over."""
        running = {
            live.task.id: live
            for live in self._tasks.values()
            if live.active and live.job is not None
        }
        now = _now()
        held = await self._repo.renew(running, self.owner, now, self._lease_end(now))
        for task_id, live in running.items():
            if task_id not in held:
                log.warning("task %s was taken from this instance; its run stops", task_id)
                live.lost = True
                assert live.job is not None
                live.job.cancel()
            elif held[task_id] and live.task.state == TaskState.RUNNING:
                await self._cancel_here(live)

    async def _poll(self) -> None:
        """Queue the unheld tasks of kinds that have free workers and nothing queued."""
        if self._closing:
            return
        idle = {kind: spec for kind, spec in self._kinds.items() if not spec.queue}
        free = sum(max(0, self._limit(spec) - spec.running) for spec in idle.values())
        if not free:
            return
        for task_id, kind in await self._repo.claimable(idle, _now(), min(free, POLL_BATCH)):
            live = self._tasks.get(task_id)
            if live is None or not live.active:
                self._enqueue(idle[kind], task_id)

    def _lease_end(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.lease_seconds)


def _copy_into(kept: Task, fresh: Task) -> None:
    """Update ``kept`` (the object callers hold) to the row's values."""
    if kept is not fresh:
        for item in fields(Task):
            setattr(kept, item.name, getattr(fresh, item.name))


def _new_task(
    kind: str, name: str, creator: User | None, payload: dict[str, Any], total_bytes: int = 0
) -> Task:
    return Task(
        id=new_task_id(),
        kind=kind,
        name=name,
        created=_now(),
        creator=creator.username if creator else "",
        creator_id=creator.id if creator else 0,
        creator_role=creator.role if creator else -1,
        total_bytes=max(0, total_bytes),
        payload=payload,
    )


def _may_see(user: User, task: Task) -> bool:
    return user.is_admin or (task.creator_id != 0 and task.creator_id == user.id)


def _now() -> datetime:
    return datetime.now(UTC)
