"""The file tree, read side: list, get, dirs, other."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson
from fastapi import Request
from starlette.responses import Response

from manifold.api.deps import CallerDep, ServicesDep
from manifold.api.envelope import ok
from manifold.api.fs_time import iso_time
from manifold.api.schemas import RequestBody
from manifold.errors import NotSupported
from manifold.models import Obj
from manifold.services.fs import Found
from manifold.services.hub import Services
from manifold.vfs.paths import split_path


class ListBody(RequestBody):
    path: str = "/"
    password: str = ""
    page: int = 1
    per_page: int = 0
    refresh: bool = False


class GetBody(RequestBody):
    path: str = "/"
    password: str = ""


class DirsBody(RequestBody):
    path: str = "/"
    password: str = ""
    force_root: bool = False


def file_type(services: Services, name: str, is_dir: bool) -> int:
    if is_dir:
        return 1
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return services.settings.type_of_extension(ext)


class ObjRenderer:
    """Turns objects of one folder into API JSON; per-request work is done once here."""

    def __init__(self, services: Services, folder: str, signed: bool) -> None:
        self._services = services
        self._folder = folder.rstrip("/")
        self._sign = services.signer.batch() if signed or services.settings.get_bool(
            "sign_all"
        ) else None  # fmt: skip
        self._names = services.settings.name_table()

    def __call__(self, obj: Obj, type_code: int | None = None) -> dict[str, Any]:
        sign = ""
        if not obj.is_dir and self._sign is not None:
            sign = self._sign(f"{self._folder}/{obj.name}")
        modified = iso_time(obj.modified)
        hash_info = obj.hash_info
        return {
            "id": obj.id,
            "path": "",
            "name": obj.name.translate(self._names) if self._names else obj.name,
            "size": obj.size,
            "is_dir": obj.is_dir,
            "modified": modified,
            "created": modified if obj.created is None else iso_time(obj.created),
            "sign": sign,
            "thumb": obj.thumb,
            "type": file_type(self._services, obj.name, obj.is_dir)
            if type_code is None
            else type_code,
            "hashinfo": "null" if hash_info is None else orjson.dumps(hash_info).decode(),
            "hash_info": hash_info,
        }


async def list_fs(body: ListBody, caller: CallerDep, services: ServicesDep) -> Response:
    listing = await services.fs.list(
        caller, body.path, body.password, body.page, body.per_page, body.refresh
    )
    signed = services.fs.needs_sign(listing.path, listing.meta)
    render = ObjRenderer(services, listing.path, signed)
    content = [render(o) for o in listing.objs]
    return ok(
        {
            "content": content or None,
            "total": listing.total,
            "readme": listing.readme,
            "header": listing.header,
            "write": listing.write,
            "provider": listing.provider,
        }
    )


def api_url(request: Request, services: Services) -> str:
    site = services.config.site_url.rstrip("/")
    if site.startswith("http"):
        return site
    scheme = request.headers.get("x-forwarded-proto") or request.url.scheme
    host = request.headers.get("x-forwarded-host") or request.headers.get("host", "")
    return f"{scheme}://{host}{site}"


def raw_url(request: Request, services: Services, found: Found) -> str:
    if found.obj.is_dir:
        return ""
    url = f"{api_url(request, services)}/d{quote(found.path)}"
    if found.signed or services.settings.get_bool("sign_all"):
        url += "?sign=" + services.signer.sign(found.path)
    return url


async def get_fs(
    body: GetBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    found = await services.fs.get(caller, body.path, body.password)
    parent, _ = split_path(found.path)
    type_code = file_type(services, found.obj.name, False)
    data = ObjRenderer(services, parent, found.signed)(found.obj, type_code)
    data.update(
        {
            "raw_url": raw_url(request, services, found),
            "readme": found.readme,
            "header": found.header,
            "provider": found.provider,
            "related": None,
        }
    )
    return ok(data)


async def dirs_fs(body: DirsBody, caller: CallerDep, services: ServicesDep) -> Response:
    objs = await services.fs.dirs(caller, body.path, body.password, body.force_root)
    return ok([{"name": o.name, "modified": iso_time(o.modified)} for o in objs])


async def other_fs(body: GetBody, caller: CallerDep, services: ServicesDep) -> Response:
    await services.fs.get(caller, body.path, body.password)
    raise NotSupported()
