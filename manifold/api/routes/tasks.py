"""Tasks of one kind, under ``/api/admin/task/<kind>/`` (admins) and ``/api/task/<kind>/``.

Both mounts share these handlers. On the user mount anyone logged in but the guest
may call them; a non-admin sees and acts on the tasks it created only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request
from starlette.responses import Response

from manifold.api.deps import CallerDep, ServicesDep
from manifold.api.envelope import ok
from manifold.api.fs_time import iso_time
from manifold.api.openapi import json_body
from manifold.errors import BadRequest, Forbidden
from manifold.models import Task
from manifold.services.auth.service import Caller

INVALID_FORMAT = "invalid request format"
# The ``*_some`` routes read a bare JSON list of task ids.
IDS_INPUT = json_body(list[str])


def task_json(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "name": task.name,
        "creator": task.creator,
        "creator_role": task.creator_role,
        "state": int(task.state),
        "status": task.status,
        "progress": _number(task.progress),
        "start_time": _time(task.start_time),
        "end_time": _time(task.end_time),
        "total_bytes": task.total_bytes,
        "error": task.error,
    }


def _number(value: float) -> float | int:
    # Go prints a whole float64 without a fraction: 50, not 50.0.
    return int(value) if value.is_integer() else value


def _time(when: datetime | None) -> str | None:
    return iso_time(when) if when is not None else None


async def task_caller(caller: CallerDep) -> Caller:
    """Anyone but the guest; the admin mount is admins only by its route table flag."""
    if caller.user.is_guest:
        raise Forbidden("You are a guest")
    return caller


TaskCallerDep = Annotated[Caller, Depends(task_caller)]


async def _task_ids(request: Request) -> list[str]:
    try:
        ids = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        raise BadRequest(INVALID_FORMAT) from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise BadRequest(INVALID_FORMAT)
    return ids


async def undone(kind: str, caller: TaskCallerDep, services: ServicesDep) -> Response:
    return ok([task_json(t) for t in await services.tasks.undone(kind, caller.user)])


async def done(kind: str, caller: TaskCallerDep, services: ServicesDep) -> Response:
    return ok([task_json(t) for t in await services.tasks.done(kind, caller.user)])


async def info(kind: str, caller: TaskCallerDep, services: ServicesDep, tid: str = "") -> Response:
    return ok(task_json(await services.tasks.find(kind, caller.user, tid)))


async def cancel(
    kind: str, caller: TaskCallerDep, services: ServicesDep, tid: str = ""
) -> Response:
    await services.tasks.cancel(kind, caller.user, tid)
    return ok()


async def delete(
    kind: str, caller: TaskCallerDep, services: ServicesDep, tid: str = ""
) -> Response:
    await services.tasks.delete(kind, caller.user, tid)
    return ok()


async def retry(kind: str, caller: TaskCallerDep, services: ServicesDep, tid: str = "") -> Response:
    await services.tasks.retry(kind, caller.user, tid)
    return ok()


async def cancel_some(
    kind: str, request: Request, caller: TaskCallerDep, services: ServicesDep
) -> Response:
    ids = await _task_ids(request)
    return ok(await services.tasks.cancel_some(kind, caller.user, ids))


async def delete_some(
    kind: str, request: Request, caller: TaskCallerDep, services: ServicesDep
) -> Response:
    ids = await _task_ids(request)
    return ok(await services.tasks.delete_some(kind, caller.user, ids))


async def retry_some(
    kind: str, request: Request, caller: TaskCallerDep, services: ServicesDep
) -> Response:
    ids = await _task_ids(request)
    return ok(await services.tasks.retry_some(kind, caller.user, ids))


async def clear_done(kind: str, caller: TaskCallerDep, services: ServicesDep) -> Response:
    await services.tasks.clear_done(kind, caller.user)
    return ok()


async def clear_succeeded(kind: str, caller: TaskCallerDep, services: ServicesDep) -> Response:
    await services.tasks.clear_succeeded(kind, caller.user)
    return ok()


async def retry_failed(kind: str, caller: TaskCallerDep, services: ServicesDep) -> Response:
    await services.tasks.retry_failed(kind, caller.user)
    return ok()
