"""OpenList's torrent helpers: read a .torrent (sent as base64 or as a form upload),
make one for a file or folder of the tree, and the rapid upload of one cloud, which
no storage here offers."""

from __future__ import annotations

import base64
import binascii

from fastapi import Request
from starlette.responses import Response

from manifold.api.deps import CallerDep, ServicesDep
from manifold.api.envelope import ok
from manifold.api.multipart import file_part
from manifold.api.openapi import BINARY, raw_body
from manifold.api.routes.fs_write import header_password
from manifold.api.schemas import RequestBody
from manifold.errors import BadRequest, NotSupported
from manifold.services.fs import torrent_make
from manifold.services.fs.torrents import MAX_TORRENT_BYTES, parse

# Base64 of the largest .torrent read, with room for line breaks.
_MAX_BASE64 = MAX_TORRENT_BYTES * 4 // 3 + 4096

UPLOAD_INPUT = raw_body(
    "multipart/form-data",
    {"type": "object", "properties": {"torrent": BINARY}, "required": ["torrent"]},
    {},
)


class TorrentBody(RequestBody):
    torrent_data: str = ""
    path: str = ""


class GenerateBody(RequestBody):
    path: str = ""
    with_cas: bool = False


def _decoded(text: str) -> bytes:
    if len(text) > _MAX_BASE64:
        raise BadRequest("torrent is too big (at most 10 MiB)")
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        raise BadRequest("torrent_data is not base64") from None


async def parse_torrent(body: TorrentBody, caller: CallerDep) -> Response:
    return ok(parse(_decoded(body.torrent_data)))


async def upload_parse(request: Request, caller: CallerDep) -> Response:
    """A .torrent sent as the ``torrent`` field of a form, read up to the cap."""
    part = file_part(request.stream(), request.headers.get("content-type", ""), "torrent")
    data = bytearray()
    async for chunk in part:
        data += chunk
        if len(data) > MAX_TORRENT_BYTES:
            raise BadRequest("torrent is too big (at most 10 MiB)")
    raw = bytes(data)
    return ok({"info": parse(raw), "torrent_data": base64.b64encode(raw).decode()})


async def rapid_upload(body: TorrentBody, caller: CallerDep, services: ServicesDep) -> Response:
    """OpenList's rapid upload works only with one Chinese cloud's content hashes."""
    raise NotSupported("rapid upload is not supported by any storage here")


async def generate(
    body: GenerateBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    """A .torrent for a file or a folder the caller may read."""
    if body.with_cas:
        raise BadRequest("the CAS extension is for one cloud's storages, none here")
    made = await torrent_make.generate(services.reader, caller, body.path, header_password(request))
    return ok(made)
