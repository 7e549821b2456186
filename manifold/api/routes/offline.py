"""Offline downloads: ``/api/fs/add_offline_download`` and the tools' settings
(``/api/admin/setting/set_aria2``, ``set_qbit``, ``set_transmission``), in AList
v3.45's shapes (``server/handles/offline_download.go``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from manifold.api.binding import bind
from manifold.api.deps import ServicesDep, get_caller, get_services
from manifold.api.envelope import error, ok
from manifold.api.openapi import bound
from manifold.api.routes.tasks import task_json
from manifold.api.schemas import RequestBody
from manifold.container import Services
from manifold.errors import PermissionDenied
from manifold.models import Perm
from manifold.services.offline.tools import ToolError


class AddBody(RequestBody):
    urls: list[str] = []
    path: str = ""
    tool: str = ""
    delete_policy: str = ""


class Aria2Body(RequestBody):
    uri: str = ""
    secret: str = ""


class SeedBody(RequestBody):
    """qBittorrent's ``url`` or Transmission's ``uri``, and the minutes to seed (a
    string, as AList takes it)."""

    url: str = ""
    uri: str = ""
    seedtime: str = ""


ADD_INPUT = bound(AddBody)


async def add_offline_download(request: Request) -> Response:
    # As AList: the permission bit is checked before the body is read, so a user
    # without it gets 403 whatever they send.
    caller = await get_caller(request)
    if not caller.user.can(Perm.OFFLINE_DOWNLOAD):
        raise PermissionDenied()
    body = await bind(request, AddBody)
    services = get_services(request)
    tasks = await services.offline.add(caller, body.urls, body.path, body.tool, body.delete_policy)
    return ok({"tasks": [task_json(t) for t in tasks]})


async def set_aria2(body: Aria2Body, services: ServicesDep) -> Response:
    values = [("aria2_uri", body.uri), ("aria2_secret", body.secret)]
    return await _configure(services, "aria2", values)


async def set_qbit(body: SeedBody, services: ServicesDep) -> Response:
    values = [("qbittorrent_url", body.url), ("qbittorrent_seedtime", body.seedtime)]
    return await _configure(services, "qBittorrent", values, "ok")


async def set_transmission(body: SeedBody, services: ServicesDep) -> Response:
    values = [("transmission_uri", body.uri), ("transmission_seedtime", body.seedtime)]
    return await _configure(services, "Transmission", values, "ok")


async def _configure(
    services: Services, tool: str, values: list[tuple[str, str]], answer: str | None = None
) -> Response:
    """Save and test a tool's settings. The tool's error goes to the admin who typed
    the address without the privacy rules' masking (which would hide the host and
    port being tested); the tools keep passwords and secrets out of their texts."""
    try:
        found = await services.offline.configure(tool, values)
    except ToolError as exc:
        return error(exc.code, exc.message)
    return ok(found if answer is None else answer)
