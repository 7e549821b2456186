"""Share links with OpenList v4's addresses and JSON: the owner's ``/api/share/*``,
the visitor's ``/api/fs/list`` and ``/api/fs/get`` under ``/@s/<id>``, and the
downloads ``/sd/<id>/<path>``.

The visitor's routes take no login: the share id and its password (``password`` in
the body, ``pwd`` on ``/sd``) are the key, whoever holds them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.responses import Response

from manifold.api import envelope
from manifold.api.binding import bind
from manifold.api.deps import ServicesDep, client_address, get_caller, get_services
from manifold.api.envelope import ok, paged
from manifold.api.fs_render import FolderStyle, file_type
from manifold.api.fs_time import ORJSON_TIME, iso_time
from manifold.api.routes import fs
from manifold.api.routes.fs import (
    LIST_FORM_ALIASES,
    GetBody,
    ListBody,
    api_url,
)
from manifold.api.routes.tasks import TaskCallerDep
from manifold.api.schemas import Int64, PageNumber, RequestBody
from manifold.container import Services
from manifold.errors import InvalidRequest
from manifold.models import Obj
from manifold.services.shares import ShareInput, ShareView, Visit

SHARE_PREFIX = "/@s"


class ShareBody(RequestBody):
    id: str = ""
    new_id: str = ""
    files: list[str] = []
    expires: str = ""
    pwd: str = ""
    accessed: Int64 = 0
    max_accessed: Int64 = 0
    disabled: bool = False
    remark: str = ""
    readme: str = ""
    header: str = ""
    order_by: str = ""
    order_direction: str = ""
    extract_folder: str = ""
    creator: str = ""
    # Off by default as a missing key must be: the page sends neither.
    no_preview: bool = False
    no_download: bool = False

    def as_input(self) -> ShareInput:
        return ShareInput(
            files=self.files,
            id=self.id,
            new_id=self.new_id,
            creator=self.creator,
            expires=_expires(self.expires),
            pwd=self.pwd,
            accessed=self.accessed,
            max_accessed=self.max_accessed,
            disabled=self.disabled,
            remark=self.remark,
            readme=self.readme,
            header=self.header,
            order_by=self.order_by,
            order_direction=self.order_direction,
            extract_folder=self.extract_folder,
            allow_preview=not self.no_preview,
            allow_download=not self.no_download,
        )


def _expires(text: str) -> float | None:
    """Seconds since the epoch of an RFC 3339 time; None for none (or Go's zero time)."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidRequest(f"expires: not a time: {text!r}") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return None if when.year <= 1 else when.timestamp()


def share_json(view: ShareView) -> dict[str, Any]:
    s, creator = view.share, view.creator
    expires = None if s.expires is None else iso_time(datetime.fromtimestamp(s.expires, UTC))
    return {
        "id": s.id,
        "files": s.files,
        "expires": expires,
        "pwd": s.pwd,
        "accessed": s.accessed,
        "max_accessed": s.max_accessed,
        "disabled": s.disabled,
        "remark": s.remark,
        "readme": s.readme,
        "header": s.header,
        "order_by": s.order_by,
        "order_direction": s.order_direction,
        "extract_folder": s.extract_folder,
        "no_preview": not s.allow_preview,
        "no_download": not s.allow_download,
        "creator": creator.username if creator else "",
        "creator_role": creator.role if creator else 0,
    }


# -- the owner's side ----------------------------------------------------------


async def share_list(
    caller: TaskCallerDep, services: ServicesDep, page: PageNumber = 1, per_page: PageNumber = 0
) -> Response:
    views, total = await services.shares.page(caller, page, per_page)
    return paged([share_json(v) for v in views], total)


async def share_get(caller: TaskCallerDep, services: ServicesDep, id: str = "") -> Response:
    return ok(share_json(await services.shares.get(caller, id)))


async def share_create(body: ShareBody, caller: TaskCallerDep, services: ServicesDep) -> Response:
    return ok(share_json(await services.shares.create(caller, body.as_input())))


async def share_update(body: ShareBody, caller: TaskCallerDep, services: ServicesDep) -> Response:
    return ok(share_json(await services.shares.update(caller, body.as_input())))


async def share_delete(caller: TaskCallerDep, services: ServicesDep, id: str = "") -> Response:
    await services.shares.delete(caller, id)
    return ok()


async def share_enable(caller: TaskCallerDep, services: ServicesDep, id: str = "") -> Response:
    await services.shares.set_disabled(caller, id, False)
    return ok()


async def share_disable(caller: TaskCallerDep, services: ServicesDep, id: str = "") -> Response:
    await services.shares.set_disabled(caller, id, True)
    return ok()


# -- the visitor's side --------------------------------------------------------


def is_share_path(path: str) -> bool:
    return path == SHARE_PREFIX or path.startswith(SHARE_PREFIX + "/")


async def list_fs(request: Request) -> Response:
    """``/api/fs/list``: a share's folder under ``/@s``, the file tree elsewhere."""
    try:
        body = await bind(request, ListBody, LIST_FORM_ALIASES)
    except RequestValidationError:
        return await fs.list_fs(request)  # the file tree's order: the caller, then the body
    if is_share_path(body.path):
        return await list_shared(request, body)
    return await fs.list_as(request, await get_caller(request), body)


async def get_fs(request: Request) -> Response:
    """``/api/fs/get``: a share's object under ``/@s``, the file tree elsewhere."""
    try:
        body = await bind(request, GetBody)
    except RequestValidationError:
        return await fs.get_fs(request)
    if is_share_path(body.path):
        return await get_shared(request, body)
    return await fs.get_as(request, await get_caller(request), body)


def _split(path: str) -> tuple[str, str]:
    """The share id and the path below it, of a path after ``/@s``."""
    share_id, _, below = path[len(SHARE_PREFIX) :].lstrip("/").partition("/")
    if not share_id:
        raise InvalidRequest("invalid share id")
    return share_id, "/" + below


async def _visit(request: Request, path: str, password: str, listing: bool) -> Visit:
    services = get_services(request)
    share_id, below = _split(path)
    client = client_address(request, services.config.trusted_proxies)
    return await services.shares.visit(share_id, below, password, client, listing)


def _entry(services: Services, style: FolderStyle, obj: Obj) -> dict[str, Any]:
    data = style.entry(obj)
    data["thumb"] = ""  # a thumbnail URL would name the real path
    data["sign"] = ""
    return data


async def list_shared(request: Request, body: ListBody) -> Response:
    services = get_services(request)
    visit = await _visit(request, body.path, body.password, listing=True)
    style = FolderStyle(services, "/", False)
    entries = visit.entries or []
    total = len(entries)
    if body.per_page > 0:
        start = (max(body.page, 1) - 1) * body.per_page
        entries = entries[start : start + body.per_page]
    data = {
        "content": [_entry(services, style, o) for o in entries],
        "total": total,
        "readme": visit.share.readme,
        "header": visit.share.header,
        "write": False,
        "provider": "unknown",
    }
    return envelope.ok_encoded(orjson.dumps(data, option=ORJSON_TIME))


async def get_shared(request: Request, body: GetBody) -> Response:
    services = get_services(request)
    visit = await _visit(request, body.path, body.password, listing=False)
    data = _entry(services, FolderStyle(services, "/", False), visit.obj)
    data["type"] = file_type(services, visit.obj.name, False)
    url = ""
    if not visit.obj.is_dir and visit.share.allow_download:
        share_id, below = _split(body.path)
        url = f"{api_url(request, services)}/sd/{quote(share_id)}{quote(below.rstrip('/'))}"
        if visit.share.pwd:
            url += "?pwd=" + quote(visit.share.pwd, safe="")
    data.update(raw_url=url, readme=visit.share.readme, header=visit.share.header)
    data.update(provider="unknown", related=None)
    return envelope.ok_encoded(orjson.dumps(data, option=ORJSON_TIME))
