"""The task kinds: their names, the registry entry of each (runner, retries, worker
setting, queue), the constants of scheduling and leases, and small helpers on rows."""

from __future__ import annotations

import os
import secrets
import socket
import string
from collections import deque
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from manifold.models import Task, TaskState, User
from manifold.services.task_context import Recheck, TaskRunner

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
# The payload keys that name virtual paths, in every kind: a run first waits for the
# storages holding them to have started (a task resumed at start, before its storage).
PATH_KEYS = ("src", "dst_dir", "path")
# The creator id of a task whose creator was deleted: no user has it, so the task is
# shown to admins only and a retry fails as the creator's would.
DELETED_CREATOR = -1


def new_task_id() -> str:
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(ID_LENGTH))


def default_instance() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True)
class Kind:
    runner: TaskRunner
    max_retry: int
    threads_setting: str
    recheck: Recheck | None = None
    queue: deque[str] = field(default_factory=deque)
    running: int = 0


def copy_into(kept: Task, fresh: Task) -> None:
    """Update ``kept`` (the object callers hold) to the row's values."""
    if kept is not fresh:
        for item in fields(Task):
            setattr(kept, item.name, getattr(fresh, item.name))


def new_task(
    kind: str, name: str, creator: User | None, payload: dict[str, Any], total_bytes: int = 0
) -> Task:
    return Task(
        id=new_task_id(),
        kind=kind,
        name=name,
        created=utc_now(),
        creator=creator.username if creator else "",
        creator_id=creator.id if creator else 0,
        creator_role=creator.role if creator else -1,
        total_bytes=max(0, total_bytes),
        payload=payload,
    )


def may_see(user: User, task: Task) -> bool:
    return user.is_admin or (task.creator_id != 0 and task.creator_id == user.id)


def utc_now() -> datetime:
    return datetime.now(UTC)
