"""Background tasks with AList's states, a bounded worker pool per kind, and a database copy.

A kind (``upload``, ``copy``) is registered with a runner: a coroutine that gets a
``TaskContext`` (to report progress and spawn child tasks) and the task's JSON payload.
It returns on success and raises on failure; cancelling a task cancels the asyncio task
running it. The payload is all a run needs, so a retry, even after a restart, runs again.

    submit ─> PENDING ─> RUNNING ─┬─> SUCCEEDED
                 ^                ├─> WAITING_RETRY ─> (queued again)   an error, retries left
                 │                └─> FAILED                            an error, none left
    cancel:  queued ─> CANCELED at once;  RUNNING ─> CANCELING ─> CANCELED
    retry:   FAILED or CANCELED ─> WAITING_RETRY, error and counter reset, once the
             kind's re-check passes for the creator as they are now
    restart: every task not finished ─> FAILED "interrupted by a restart"

The map in memory is authoritative in this process. Every state change is written at
once; progress at most once per ``flush_interval`` per task, and with the final state.
Writes for one task are serialised, each writing the task as it is when it runs, so the
row always ends equal to the task in memory.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import string
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
RESTART_ERROR = "interrupted by a restart"
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


@dataclass(slots=True, eq=False)
class _Live:
    """A task with what only this process knows: its creator, its run, its lock."""

    task: Task
    creator: User | None = None
    job: asyncio.Task[None] | None = None
    active: bool = False
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
    def __init__(
        self,
        repo: TaskRepo,
        settings: SettingsService,
        users: UserRepo,
        flush_interval: float = 1.0,
    ) -> None:
        self._repo = repo
        self._settings = settings
        self._users = users
        self.flush_interval = flush_interval
        self._kinds: dict[str, _Kind] = {}
        self._tasks: dict[str, _Live] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        self._flusher: asyncio.Task[None] | None = None
        self._stopping = False
        self._ended = asyncio.Event()

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
        """Load every task; those a stop or crash interrupted come back failed."""
        await self._repo.fail_undone(RESTART_ERROR)
        self._tasks = {task.id: _Live(task) for task in await self._repo.all()}
        self._stopping = False
        self._flusher = asyncio.create_task(self._flush_loop())

    async def stop(self) -> None:
        """Cancel every run; their rows stay unfinished, so the next start fails them.

        A run already writing its final state is let finish, so that state is kept.
        """
        self._stopping = True
        finishing = {live.job for live in self._tasks.values() if live.task.done}
        jobs = [*self._jobs, *([self._flusher] if self._flusher else [])]
        for job in jobs:
            if job not in finishing:
                job.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=STOP_GRACE_SECONDS)
        self._flusher = None
        with suppress(Exception):
            await self._flush()

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
        live = self._tasks.get(task_id)
        if live is None:
            raise TaskNotFound()
        return live.task

    async def wait_done(self, task_id: str) -> Task:
        """Wait until the task has finished and its run has let go of it.

        Raises ``TaskNotFound`` if the task is (or gets) deleted.
        """
        while True:
            ended = self._ended
            task = self.get(task_id)
            # A run lets go after writing the final row and starting the next queued task.
            if task.done and not self._tasks[task_id].active:
                return task
            await ended.wait()

    # -- the interface for the API: one kind, seen by one user ------------------------

    def undone(self, kind: str, user: User) -> list[Task]:
        return [task for task in self._visible(kind, user) if not task.done]

    def unfinished(self, kinds: Iterable[str]) -> bool:
        """Whether any task of ``kinds`` has not succeeded or been cancelled: one that
        is waiting, running or may still be retried."""
        wanted = set(kinds)
        ended = (TaskState.SUCCEEDED, TaskState.CANCELED)
        return any(
            live.task.kind in wanted and live.task.state not in ended
            for live in self._tasks.values()
        )

    def of_kinds(self, kinds: Iterable[str]) -> list[Task]:
        """Every task of ``kinds``, whoever made it: for a service that keeps files
        for its tasks and must know which of them may still need them."""
        wanted = set(kinds)
        return [live.task for live in self._tasks.values() if live.task.kind in wanted]

    def done(self, kind: str, user: User) -> list[Task]:
        return [task for task in self._visible(kind, user) if task.done]

    def find(self, kind: str, user: User, task_id: str) -> Task:
        return self._find(kind, user, task_id).task

    async def cancel(self, kind: str, user: User, task_id: str) -> None:
        await self._cancel(self._find(kind, user, task_id))

    async def delete(self, kind: str, user: User, task_id: str) -> None:
        await self._delete([self._find(kind, user, task_id)])

    async def retry(self, kind: str, user: User, task_id: str) -> None:
        await self._retry(self._find(kind, user, task_id))

    async def cancel_some(self, kind: str, user: User, ids: Iterable[str]) -> dict[str, str]:
        return await self._each(self.cancel, kind, user, ids)

    async def delete_some(self, kind: str, user: User, ids: Iterable[str]) -> dict[str, str]:
        return await self._each(self.delete, kind, user, ids)

    async def retry_some(self, kind: str, user: User, ids: Iterable[str]) -> dict[str, str]:
        return await self._each(self.retry, kind, user, ids)

    async def disown(self, user_id: int) -> None:
        """Detach a deleted user's tasks from the id, which the next user made may get."""
        for live in list(self._tasks.values()):
            if live.task.creator_id == user_id:
                live.task.creator_id = DELETED_CREATOR
                live.creator = None
                await self._persist(live)

    async def clear_done(self, kind: str, user: User) -> None:
        await self._delete([self._tasks[t.id] for t in self.done(kind, user)])

    async def clear_succeeded(self, kind: str, user: User) -> None:
        succeeded = [t for t in self._visible(kind, user) if t.state == TaskState.SUCCEEDED]
        await self._delete([self._tasks[t.id] for t in succeeded])

    async def retry_failed(self, kind: str, user: User) -> None:
        """Retry every failed task; one its creator may no longer run stays failed, and
        the first such refusal is raised once the others are retried."""
        refused: ManifoldError | None = None
        for task in self._visible(kind, user):
            if task.state == TaskState.FAILED:
                try:
                    await self._retry(self._tasks[task.id])
                except ManifoldError as exc:
                    refused = refused or exc
        if refused is not None:
            raise refused

    def _visible(self, kind: str, user: User) -> list[Task]:
        self._check_kind(kind)
        tasks = (live.task for live in self._tasks.values())
        return [task for task in tasks if task.kind == kind and _may_see(user, task)]

    def _find(self, kind: str, user: User, task_id: str) -> _Live:
        self._check_kind(kind)
        live = self._tasks.get(task_id)
        # Someone else's task answers as a missing one, so ids cannot be probed.
        if live is None or live.task.kind != kind or not _may_see(user, live.task):
            raise TaskNotFound()
        return live

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

    # -- state changes -----------------------------------------------------------------

    async def _cancel(self, live: _Live) -> None:
        task = live.task
        if task.state in QUEUED:
            self._dequeue(live)
            await self._end(live, TaskState.CANCELED, CANCELED_ERROR)
        elif task.state == TaskState.RUNNING and live.job is not None:
            task.state = TaskState.CANCELING
            live.job.cancel()
            await self._persist(live)

    async def _delete(self, lives: list[_Live]) -> None:
        """Forget tasks; a running one is cancelled first rather than left running unseen."""
        for live in lives:
            if not live.task.done:
                await self._cancel(live)
            self._dequeue(live)
            self._tasks.pop(live.task.id, None)
        await self._repo.delete(live.task.id for live in lives)

    async def _retry(self, live: _Live) -> None:
        task = live.task
        if task.state not in RETRYABLE:
            raise BadRequest("only a failed or canceled task can be retried")
        if task.kind not in self._kinds:
            raise NotSupported(f"{task.kind} tasks can not run on this server")
        await self._recheck(live, self._kinds[task.kind])
        task.state, task.error, task.retry = TaskState.WAITING_RETRY, "", 0
        self._enqueue(self._kinds[task.kind], task.id)
        await self._persist(live)

    async def _recheck(self, live: _Live, spec: _Kind) -> None:
        """Run the kind's re-check with the creator reloaded, who then runs the task."""
        task = live.task
        if spec.recheck is None or not task.creator_id:
            return
        user = await self._users.get(task.creator_id)
        if user is None or user.disabled:
            raise PermissionDenied()
        await spec.recheck(user, task.payload)
        live.creator = user

    async def _end(self, live: _Live, state: TaskState, error: str) -> None:
        task = live.task
        task.state, task.error, task.end_time = state, error, _now()
        if state == TaskState.SUCCEEDED:
            task.progress = 100.0
        try:
            await self._persist(live)
        finally:
            self._announce()

    async def _persist(self, live: _Live) -> None:
        async with live.lock:
            live.dirty = False
            await self._repo.save(live.task)

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

    def _dequeue(self, live: _Live) -> None:
        spec = self._kinds.get(live.task.kind)
        if spec is not None:
            with suppress(ValueError):
                spec.queue.remove(live.task.id)

    def _pump(self, spec: _Kind) -> None:
        """Start queued tasks while the kind has free workers (a setting, read each time)."""
        if self._stopping:
            return
        limit = max(1, self._settings.get_int(spec.threads_setting, DEFAULT_THREADS))
        while spec.running < limit and spec.queue:
            live = self._tasks.get(spec.queue.popleft())
            # An active task is re-queued by its own run when that run ends.
            if live is None or live.active or live.task.state not in QUEUED:
                continue
            spec.running += 1
            live.active = True
            live.job = asyncio.create_task(self._run(live, spec))
            self._jobs.add(live.job)
            live.job.add_done_callback(self._jobs.discard)

    async def _run(self, live: _Live, spec: _Kind) -> None:
        try:
            # A cancel between the queue and this first step leaves nothing to run.
            if live.task.state in QUEUED:
                await self._attempt(live, spec)
        except Exception as exc:
            log.error("task %s could not record its outcome: %s", live.task.id, type(exc).__name__)
        finally:
            spec.running -= 1
            live.active = False
            if live.task.state in QUEUED and live.task.id in self._tasks:
                self._enqueue(spec, live.task.id)
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
                await self._recheck(live, spec)  # an automatic retry, maybe much later
            if live.creator is None and task.creator_id:
                live.creator = await self._creator(task.creator_id)
            await spec.runner(TaskContext(self, live), task.payload)
        except asyncio.CancelledError:
            if self._stopping:
                raise
            await self._end(live, TaskState.CANCELED, CANCELED_ERROR)
        except Exception as exc:
            if not self._stopping:
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
            await self._persist(live)
        else:
            await self._end(live, TaskState.FAILED, error)

    async def _creator(self, user_id: int) -> User:
        user = await self._users.get(user_id)
        if user is None:
            raise ServerError("the user who created this task no longer exists")
        return user

    # -- progress ----------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            try:
                await self._flush()
            except Exception as exc:
                log.warning("could not save task progress: %s", type(exc).__name__)
            # A larger worker setting takes effect without waiting for a task to end.
            for spec in self._kinds.values():
                self._pump(spec)

    async def _flush(self) -> None:
        for live in [live for live in self._tasks.values() if live.dirty]:
            async with live.lock:
                live.dirty = False
                await self._repo.save_progress(live.task)


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
