"""OpenList's resumable multipart uploads: ``/api/fs/multipart/init``, ``chunk``,
``status``, ``complete`` and ``abort``. Headers in, ``services.multipart`` called,
its snapshot out; every rule is the service's."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import Request
from starlette.responses import Response

from manifold.api.deps import CallerDep, ServicesDep
from manifold.api.envelope import ok
from manifold.api.openapi import BINARY, no_body, raw_body
from manifold.api.routes.fs_write import (
    expected_hashes,
    file_path,
    header_password,
    last_modified,
)
from manifold.errors import BadRequest
from manifold.services.fs.multipart import InitRequest

INIT_INPUT = no_body(
    "File-Path",
    "X-File-Size",
    "X-Chunk-Size",
    "Overwrite",
    "Last-Modified",
    "Password",
    "X-File-Md5",
    "X-File-Sha1",
    "X-File-Sha256",
)
CHUNK_INPUT = raw_body(
    "application/octet-stream", BINARY, {"X-Upload-Id": True, "X-Chunk-Index": True}
)
ID_INPUT = no_body("X-Upload-Id")
_DRAIN_SLACK = 64 << 10


async def init(request: Request, caller: CallerDep, services: ServicesDep) -> Response:
    wanted = InitRequest(
        path=file_path(request),
        size=_integer(request, "x-file-size", "a valid X-File-Size header"),
        chunk_size=_integer(request, "x-chunk-size", "a valid X-Chunk-Size header", 0),
        password=header_password(request),
        overwrite=request.headers.get("overwrite", "") != "false",
        modified=last_modified(request),
        hashes=expected_hashes(request),
    )
    shot, resumed = await services.multipart.init(caller, wanted)
    return ok({**shot.json(), "resumed": resumed})


async def chunk(request: Request, caller: CallerDep, services: ServicesDep) -> Response:
    """One chunk. The body is read to its end on every outcome before the answer: a
    browser told "no" while still sending takes it as a network error."""
    body = _body(request)
    try:
        index = _integer(request, "x-chunk-index", "a valid X-Chunk-Index header")
        upload_id = request.headers.get("x-upload-id", "")
        shot = await services.multipart.chunk(caller, upload_id, index, body)
    finally:
        await _drain(body, services.multipart.limits.chunk_size(0) + _DRAIN_SLACK)
    return ok(shot.json())


async def status(
    caller: CallerDep, services: ServicesDep, upload_id: str = "", path: str = "", size: str = ""
) -> Response:
    """By ``upload_id``, or by ``path`` and ``size`` for a client that lost the id."""
    if upload_id:
        return ok((await services.multipart.status(caller, upload_id)).json())
    if not size.isdigit():
        raise BadRequest("status lookup requires upload_id, or path and size")
    return ok((await services.multipart.find(caller, path, int(size))).json())


async def complete(request: Request, caller: CallerDep, services: ServicesDep) -> Response:
    upload_id = request.headers.get("x-upload-id", "")
    return ok((await services.multipart.complete(caller, upload_id)).json())


async def abort(request: Request, caller: CallerDep, services: ServicesDep) -> Response:
    await services.multipart.abort(caller, request.headers.get("x-upload-id", ""))
    return ok()


def _integer(request: Request, header: str, what: str, default: int | None = None) -> int:
    value = request.headers.get(header, "").strip()
    if not value and default is not None:
        return default
    if not value.isdigit():
        raise BadRequest(f"multipart upload requires {what}")
    return int(value)


async def _body(request: Request) -> AsyncIterator[bytes]:
    async for data in request.stream():
        if data:
            yield data


async def _drain(body: AsyncIterator[bytes], limit: int) -> None:
    """Read what is left of ``body`` (at most ``limit`` bytes), then let it go."""
    seen = 0
    try:
        async for data in body:
            seen += len(data)
            if seen > limit:
                break
    except Exception:  # noqa: S110 - a body cut off has nothing more to read
        pass
