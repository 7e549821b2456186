"""The file tree, read side: list, get, dirs, other.

These are AList's ANY routes: each reads its own fields from a JSON body, a form
body or the query string (``api.binding``) and answers pre-encoded JSON, with no
per-request dependency machinery on the way.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson
from fastapi import Request
from pydantic import JsonValue
from starlette.responses import Response

from manifold.api import envelope
from manifold.api.binding import bind
from manifold.api.deps import from_trusted_proxy, get_caller, get_services
from manifold.api.fs_render import FolderStyle, ListingRenderer, file_type, related_entries
from manifold.api.fs_time import ORJSON_TIME, json_time
from manifold.api.openapi import bound
from manifold.api.routes.storages import mount_details
from manifold.api.schemas import PageNumber, RequestBody
from manifold.container import Services
from manifold.paths import split_path
from manifold.services.auth.service import Caller
from manifold.services.fs.read import Found


class ListBody(RequestBody):
    path: str = "/"
    password: str = ""
    page: PageNumber = 1
    per_page: PageNumber = 0
    refresh: bool = False


# AList's list request has no form name for ``refresh``; Go binds it as ``Refresh``.
LIST_FORM_ALIASES = {"Refresh": "refresh"}
LIST_INPUT = bound(ListBody, LIST_FORM_ALIASES)


class GetBody(RequestBody):
    path: str = "/"
    password: str = ""


GET_INPUT = bound(GetBody)


class DirsBody(RequestBody):
    path: str = "/"
    password: str = ""
    force_root: bool = False


DIRS_INPUT = bound(DirsBody)


class OtherBody(RequestBody):
    path: str = "/"
    password: str = ""
    method: str = ""
    data: JsonValue = None


OTHER_INPUT = bound(OtherBody)


async def list_fs(request: Request) -> Response:
    caller = await get_caller(request)
    return await list_as(request, caller, await bind(request, ListBody, LIST_FORM_ALIASES))


async def list_as(request: Request, caller: Caller, body: ListBody) -> Response:
    services = get_services(request)
    listing = await services.reader.list(
        caller, body.path, body.password, body.page, body.per_page, body.refresh
    )
    return envelope.ok_encoded(*await _renderer(request, services).body(listing))


def _renderer(request: Request, services: Services) -> ListingRenderer:
    """The app's renderer, which keeps encoded entries between requests."""
    state = request.app.state
    renderer: ListingRenderer | None = getattr(state, "fs_renderer", None)
    if renderer is None:
        renderer = state.fs_renderer = ListingRenderer(services)
    return renderer


def api_url(request: Request, services: Services) -> str:
    """The site's own URL for links: ``site_url`` when it is one, else this request's.

    ``X-Forwarded-Host`` and ``-Proto`` count only from a trusted proxy; from anyone
    else they would let a client put any host into the links it is given.
    """
    site = services.config.site_url.rstrip("/")
    if site.startswith("http"):
        return site
    scheme, host = request.url.scheme, request.headers.get("host", "")
    if from_trusted_proxy(request, services.config.trusted_proxies):
        scheme = request.headers.get("x-forwarded-proto") or scheme
        host = request.headers.get("x-forwarded-host") or host
    return f"{scheme}://{host}{site}"


def raw_url(request: Request, services: Services, found: Found) -> str:
    if found.obj.is_dir:
        return ""
    url = f"{api_url(request, services)}/d{quote(found.path)}"
    if services.signer.needed(found.signed):
        url += "?sign=" + services.signer.sign(found.path)
    return url


async def get_fs(request: Request) -> Response:
    caller = await get_caller(request)
    return await get_as(request, caller, await bind(request, GetBody))


async def get_as(request: Request, caller: Caller, body: GetBody) -> Response:
    services = get_services(request)
    found = await services.reader.get(caller, body.path, body.password)
    parent, _ = split_path(found.path)
    # AList types the object itself by its extension alone, even a folder.
    type_code = file_type(services, found.obj.name, False)
    data: dict[str, Any] = FolderStyle(services, parent, found.signed).entry(found.obj, type_code)
    data["raw_url"] = raw_url(request, services, found)
    data["readme"] = found.readme
    data["header"] = found.header
    data["provider"] = found.provider
    data["related"] = related_entries(services, found.related)
    if found.space is not None:
        data["mount_details"] = mount_details(found.space)
    return envelope.ok_encoded(orjson.dumps(data, option=ORJSON_TIME))


async def dirs_fs(request: Request) -> Response:
    services = get_services(request)
    caller = await get_caller(request)
    body = await bind(request, DirsBody)
    objs = await services.reader.dirs(caller, body.path, body.password, body.force_root)
    dirs = [{"name": o.name, "modified": json_time(o.modified)} for o in objs]
    return envelope.ok_encoded(orjson.dumps(dirs or None, option=ORJSON_TIME))


async def other_fs(request: Request) -> Response:
    services = get_services(request)
    caller = await get_caller(request)
    body = await bind(request, OtherBody)
    result = await services.reader.other(caller, body.path, body.password, body.method, body.data)
    return envelope.ok(result)
