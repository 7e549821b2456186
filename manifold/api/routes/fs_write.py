"""The file tree, write side: mkdir, rename, move, copy, remove, uploads, link."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import quote, unquote_to_bytes

from fastapi import Request
from pydantic import Field
from starlette.responses import Response

from manifold.api.client_gone import until_gone
from manifold.api.deps import CallerDep, ServicesDep
from manifold.api.envelope import ok, ok_message
from manifold.api.multipart import file_part
from manifold.api.openapi import BINARY, raw_body
from manifold.api.routes.fs import api_url
from manifold.api.routes.tasks import task_json
from manifold.api.schemas import Int64, RequestBody
from manifold.container import Services
from manifold.errors import BadRequest
from manifold.models import LinkArgs, Task
from manifold.paths import clean_path
from manifold.services.auth.service import Caller


class PathBody(RequestBody):
    path: str = ""
    password: str = ""


class RenameBody(RequestBody):
    path: str = ""
    name: str = ""
    overwrite: bool = False
    password: str = ""


class PairsBody(RequestBody):
    src_dir: str = ""
    dst_dir: str = ""
    names: list[str] = Field(default_factory=list)
    overwrite: bool = False
    password: str = ""


class RecursiveMoveBody(RequestBody):
    src_dir: str = ""
    dst_dir: str = ""
    conflict_policy: str = ""
    password: str = ""


class DirectUploadBody(RequestBody):
    path: str = ""
    file_name: str = ""
    file_size: Int64 = 0
    tool: str = ""


class RemoveBody(RequestBody):
    dir: str = ""
    names: list[str] = Field(default_factory=list)
    password: str = ""


class SrcDirBody(RequestBody):
    src_dir: str = ""
    password: str = ""


class RenameObject(RequestBody):
    src_name: str = ""
    new_name: str = ""


class BatchRenameBody(RequestBody):
    src_dir: str = ""
    rename_objects: list[RenameObject] = Field(default_factory=list)
    password: str = ""


class RegexRenameBody(RequestBody):
    src_dir: str = ""
    src_name_regex: str = ""
    new_name_regex: str = ""
    password: str = ""


def _password(request: Request, body_password: str) -> str:
    return body_password or header_password(request)


def header_password(request: Request) -> str:
    """The ``Password`` header as AList's clients send it: UTF-8 bytes as they are (a
    header decodes as Latin-1; a value that is not UTF-8 is taken as Latin-1 text)."""
    raw = request.headers.get("password", "")
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


async def mkdir(
    body: PathBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    await services.writer.mkdir(caller, body.path, _password(request, body.password))
    return ok()


async def rename(
    body: RenameBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    await services.writer.rename(
        caller, body.path, body.name, body.overwrite, _password(request, body.password)
    )
    return ok()


async def batch_rename(
    body: BatchRenameBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    pairs = [(o.src_name, o.new_name) for o in body.rename_objects]
    await services.writer.batch_rename(
        caller, body.src_dir, pairs, _password(request, body.password)
    )
    return ok()


async def regex_rename(
    body: RegexRenameBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    await services.writer.regex_rename(
        caller,
        body.src_dir,
        body.src_name_regex,
        body.new_name_regex,
        _password(request, body.password),
    )
    return ok()


async def move(
    body: PairsBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    tasks = await services.writer.move(
        caller,
        body.src_dir,
        body.dst_dir,
        body.names,
        body.overwrite,
        _password(request, body.password),
    )
    return _move_tasks(tasks)


async def recursive_move(
    body: RecursiveMoveBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    moved, tasks = await until_gone(
        request,
        services.writer.recursive_move(
            caller,
            body.src_dir,
            body.dst_dir,
            body.conflict_policy,
            _password(request, body.password),
        ),
    )
    if tasks:
        return _move_tasks(tasks)
    noun = "file" if moved == 1 else "files"
    return ok_message(f"Successfully moved {moved} {noun}")


def _move_tasks(tasks: list[Task]) -> Response:
    """AList's empty answer when everything moved at once; OpenList's with the tasks
    made otherwise."""
    if not tasks:
        return ok()
    message = f"Successfully created {len(tasks)} move task(s)"
    return ok({"message": message, "tasks": [task_json(t) for t in tasks]})


async def copy(
    body: PairsBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    tasks = await services.writer.copy(
        caller,
        body.src_dir,
        body.dst_dir,
        body.names,
        body.overwrite,
        _password(request, body.password),
    )
    return ok({"tasks": [task_json(t) for t in tasks]})


async def remove(
    body: RemoveBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    await services.writer.remove(caller, body.dir, body.names, _password(request, body.password))
    return ok()


async def remove_empty_directory(
    body: SrcDirBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    await until_gone(
        request,
        services.writer.remove_empty_directory(
            caller, body.src_dir, _password(request, body.password)
        ),
    )
    return ok()


async def link(body: PathBody, request: Request, services: ServicesDep) -> Response:
    """The link a driver gives for a raw full path (admins only, as AList).

    A link to a file on this machine becomes a signed ``/p`` URL, as AList answers
    for ``only_local`` drivers: a server path means nothing to a client.
    """
    path = clean_path(body.path)
    client = request.client.host if request.client is not None else ""
    _, found, _ = await services.reader.link(path, LinkArgs(ip=client))
    if found.file_path:
        url = f"{api_url(request, services)}/p{quote(path)}?d&sign={services.signer.sign(path)}"
        return ok(
            {"url": url, "header": None, "Expiration": None, "concurrency": 0, "part_size": 0}
        )
    expiration = None if found.expires_in is None else int(found.expires_in * 1_000_000_000)
    return ok(
        {
            "url": found.url,
            "header": {k: [v] for k, v in found.headers.items()} or None,
            "Expiration": expiration,
            "concurrency": 0,
            "part_size": 0,
        }
    )


# --- uploads ----------------------------------------------------------------------

_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})(.{0,2})")


def file_path(request: Request) -> str:
    """The ``File-Path`` header, URL-unescaped as Go's PathUnescape (``+`` stays ``+``).

    Clients may send the path escaped or as raw UTF-8; header bytes arrive decoded as
    Latin-1, so they are taken back to bytes and the whole decoded as UTF-8.
    """
    raw = request.headers.get("file-path", "")
    bad = _BAD_ESCAPE.search(raw)
    if bad is not None:
        raise BadRequest(f'invalid URL escape "%{bad.group(1)}"')
    try:
        return unquote_to_bytes(raw.encode("latin-1")).decode()
    except UnicodeDecodeError as exc:
        raise BadRequest("File-Path is not valid UTF-8 once unescaped") from exc


def content_length(request: Request) -> int | None:
    """The body's size: ``Content-Length``, else the ``X-File-Size`` a streaming client
    declares, else unknown until the body ends (chunked, as OpenList v4 accepts it;
    AList v3.45 refuses it)."""
    value = request.headers.get("content-length")
    if value is None:
        value = request.headers.get("x-file-size")
        if value is None:
            return None
    if not value.isdigit():
        raise BadRequest(f'strconv.ParseInt: parsing "{value}": invalid syntax')
    return int(value)


def last_modified(request: Request) -> datetime | None:
    value = request.headers.get("last-modified", "")
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None


_HASH_HEADERS = {"x-file-md5": "md5", "x-file-sha1": "sha1", "x-file-sha256": "sha256"}
_UPLOAD_HEADERS = {
    "File-Path": True,
    "Password": False,
    "Overwrite": False,
    "As-Task": False,
    "Last-Modified": False,
    **{name.title(): False for name in _HASH_HEADERS},
}
PUT_INPUT = raw_body(
    "application/octet-stream",
    BINARY,
    {**_UPLOAD_HEADERS, "Content-Length": False, "X-File-Size": False},
)
FORM_INPUT = raw_body(
    "multipart/form-data",
    {"type": "object", "properties": {"file": BINARY}, "required": ["file"]},
    _UPLOAD_HEADERS,
)


def expected_hashes(request: Request) -> dict[str, str]:
    """The ``X-File-Md5``/``-Sha1``/``-Sha256`` headers the client sent, by algorithm."""
    return {algo: request.headers.get(header, "") for header, algo in _HASH_HEADERS.items()}


async def get_direct_upload_info(
    body: DirectUploadBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    """OpenList's direct upload: the signed request that sends a file from the
    browser straight to the storage; ``path`` is the folder (percent-encoded)."""
    folder = unquote_to_bytes(body.path).decode("utf-8", "replace")
    path = f"{folder.rstrip('/')}/{body.file_name}"
    if not body.file_name or "/" in body.file_name:
        raise BadRequest("file name must be one path segment")
    overwrite = request.headers.get("overwrite", "") != "false"
    info = await services.writer.direct_upload(
        caller, path, header_password(request), body.file_size, overwrite
    )
    return ok(info)


async def put(request: Request, caller: CallerDep, services: ServicesDep) -> Response:
    path = file_path(request)
    size = content_length(request)
    return await _upload(request, caller, services, path, _body_chunks(request), size)


async def form(request: Request, caller: CallerDep, services: ServicesDep) -> Response:
    """A multipart upload; the ``file`` part streams straight to its temporary name."""
    path = file_path(request)
    part = file_part(_body_chunks(request), request.headers.get("content-type", ""))
    return await _upload(request, caller, services, path, part, None)


async def _upload(
    request: Request,
    caller: Caller,
    services: Services,
    path: str,
    stream: AsyncIterator[bytes],
    size: int | None,
) -> Response:
    task = await services.uploads.receive(
        caller,
        path,
        stream,
        size,
        password=header_password(request),
        modified=last_modified(request),
        overwrite=request.headers.get("overwrite", "") != "false",
        as_task=request.headers.get("as-task", "") == "true",
        expected=expected_hashes(request),
    )
    return ok() if task is None else ok({"task": task_json(task)})


async def _body_chunks(request: Request) -> AsyncIterator[bytes]:
    async for data in request.stream():
        if data:
            yield data
