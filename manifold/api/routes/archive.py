"""Archives: their contents (``/api/fs/archive/meta`` and ``list``), extraction
(``/api/fs/archive/decompress``) and one member's bytes (``/ae``, ``/ad``, ``/ap``).

The shapes are AList v3.45's (``server/handles/archive.go``): the meta answer has
the member tree, each entry an object answer without sign or thumbnail and with
``children`` (null for a file), no ``sort`` key, a ``raw_url`` to ``/ae`` and an
archive sign where the path's downloads are signed. A wrong or missing archive
password answers code 202, which the page takes as "ask for it".

A member tree deeper than ``TREE_DEPTH`` folders is not sent in the meta answer
(``content`` null, as AList answers for archives whose tool gives no tree); the page
then lists the archive folder by folder through ``archive/list``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson
from fastapi import Request
from pydantic import field_validator
from starlette.responses import Response

from manifold.api import envelope
from manifold.api.binding import bind
from manifold.api.deps import CallerDep, ServicesDep, get_caller, get_services
from manifold.api.envelope import error, ok
from manifold.api.fs_render import file_type
from manifold.api.fs_time import ORJSON_TIME, json_time
from manifold.api.openapi import bound
from manifold.api.reader_response import ReaderResponse
from manifold.api.routes.download import _NO_CACHE, _status, content_disposition
from manifold.api.routes.fs import api_url
from manifold.api.routes.tasks import task_json
from manifold.api.schemas import PageNumber, RequestBody
from manifold.container import Services
from manifold.errors import ManifoldError, WrongArchivePassword
from manifold.paths import clean_path
from manifold.services.archive.reader import Member


class ArchiveMetaBody(RequestBody):
    path: str = "/"
    password: str = ""
    refresh: bool = False
    archive_pass: str = ""


META_INPUT = bound(ArchiveMetaBody)


class ArchiveListBody(ArchiveMetaBody):
    page: PageNumber = 1
    per_page: PageNumber = 0
    inner_path: str = "/"


LIST_INPUT = bound(ArchiveListBody)
# The deepest member tree the meta answer holds (the JSON encoder nests 255 levels).
TREE_DEPTH = 100


class DecompressBody(RequestBody):
    src_dir: str = ""
    dst_dir: str = ""
    # AList takes one name as a string or several as an array.
    name: list[str] = []
    archive_pass: str = ""
    inner_path: str = "/"
    cache_full: bool = False
    put_into_new_dir: bool = False
    # OpenList's field: an existing file is replaced only when this is true.
    overwrite: bool = False
    # Manifold's: the password of folders in the destination (none unlocks without it).
    password: str = ""

    @field_validator("name", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def _entry(services: Services, member: Member, tree: bool) -> dict[str, Any]:
    modified = json_time(member.modified)
    entry: dict[str, Any] = {
        "id": "",
        "path": "",
        "name": member.name,
        "size": member.size,
        "is_dir": member.children is not None,
        "modified": modified,
        "created": modified,
        "sign": "",
        "thumb": "",
        "type": file_type(services, member.name, member.children is not None),
        "hashinfo": "null",
        "hash_info": None,
    }
    if tree:
        children = member.children
        entry["children"] = (
            [_entry(services, child, True) for child in children.values()] if children else None
        )
    return entry


def _tree(services: Services, root: Member) -> list[dict[str, Any]] | None:
    """The meta answer's member tree; None when it is deeper than ``TREE_DEPTH``."""
    if _deeper_than(root, TREE_DEPTH):
        return None
    return [_entry(services, m, True) for m in root.child_list()]


def _deeper_than(root: Member, depth: int) -> bool:
    level = [root]
    for _ in range(depth + 1):
        level = [child for node in level for child in node.child_list()]
        if not level:
            return False
    return True


async def archive_meta(request: Request) -> Response:
    services = get_services(request)
    caller = await get_caller(request)
    body = await bind(request, ArchiveMetaBody)
    opened = await services.archives.open(
        caller, body.path, body.password, body.archive_pass, body.refresh
    )
    signer = services.archive_signer
    data = {
        "comment": opened.catalog.comment,
        "encrypted": opened.catalog.encrypted,
        "content": _tree(services, opened.catalog.root) if opened.tree else None,
        "raw_url": f"{api_url(request, services)}/ae{quote(opened.path)}",
        "sign": signer.sign(opened.path) if signer.needed(opened.signed) else "",
    }
    return envelope.ok_encoded(orjson.dumps(data, option=ORJSON_TIME))


async def archive_list(request: Request) -> Response:
    services = get_services(request)
    caller = await get_caller(request)
    body = await bind(request, ArchiveListBody)
    opened = await services.archives.open(
        caller, body.path, body.password, body.archive_pass, body.refresh
    )
    members = await services.archives.listing(opened, body.inner_path)
    total = len(members)
    if body.per_page > 0:
        start = (max(body.page, 1) - 1) * body.per_page
        members = members[start : start + body.per_page]
    content = [_entry(services, m, False) for m in members]
    data = {"content": content, "total": total}
    return envelope.ok_encoded(orjson.dumps(data, option=ORJSON_TIME))


async def decompress(body: DecompressBody, caller: CallerDep, services: ServicesDep) -> Response:
    tasks = await services.archives.decompress(
        caller,
        body.src_dir,
        body.dst_dir,
        body.name,
        body.archive_pass,
        body.inner_path,
        body.put_into_new_dir,
        body.overwrite,
        body.password,
    )
    return ok({"task": [task_json(t) for t in tasks]})


async def member(path: str, request: Request, services: ServicesDep) -> Response:
    """``/ae/<archive>?inner=<member>&pass=<password>&sign=<archive sign>``."""
    try:
        raw = clean_path(path)
        query = request.query_params
        services.archives.check_sign(raw, query.get("sign", ""), services.archive_signer)
        inner, password = query.get("inner", ""), query.get("pass", "")
        obj, link = await services.archives.member(raw, inner, password)
        headers = {"Content-Disposition": content_disposition(obj.name), **_NO_CACHE}
        return await ReaderResponse.open(link, obj, headers, request.headers, request.method)
    except ManifoldError as exc:
        message = services.settings.mask_private(exc.message).split("; rawPath: ")[0]
        status = 403 if isinstance(exc, WrongArchivePassword) else _status(exc)
        return error(exc.code, message, status=status)
