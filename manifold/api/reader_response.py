"""A file from a driver's range reader, served with ``Range`` support.

For back ends whose links are neither a local file nor a URL (see ``Link.reader``):
one byte range is asked of the reader and streamed as it arrives. A single range
answers 206, an unsatisfiable one 416; several ranges are answered with the whole
file (a server may ignore ``Range``), which keeps the back end to one read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from manifold.api.file_response import ByteRange, NotSatisfiable, content_type, parse_ranges
from manifold.models import Link, Obj
from manifold.services.fs.streams import open_range


class ReaderResponse(Response):
    def __init__(self, link: Link, obj: Obj, headers: Mapping[str, str]) -> None:
        super().__init__()
        self._link = link
        self._obj = obj
        self._extra = dict(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        size = self._obj.size
        headers = {
            "content-type": content_type(self._obj.name),
            "accept-ranges": "bytes",
            **{k.lower(): v for k, v in self._extra.items()},
        }
        try:
            wanted = self._range(scope, size)
        except NotSatisfiable as exc:
            await _unsatisfiable(send, str(exc), size)
            return
        status = 200 if wanted is None else 206
        start, length = (0, size) if wanted is None else (wanted.start, wanted.length)
        if wanted is not None:
            headers["content-range"] = wanted.content_range(size)
        headers["content-length"] = str(length)
        await send({"type": "http.response.start", "status": status, "headers": _raw(headers)})
        if scope["method"] != "HEAD":
            await _relay(send, open_range(self._link, start, length))
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    def _range(scope: Scope, size: int) -> ByteRange | None:
        header = next((v for k, v in scope["headers"] if k == b"range"), b"").decode("latin-1")
        if not header:
            return None
        ranges = parse_ranges(header, size)
        return ranges[0] if len(ranges) == 1 else None


async def _relay(send: Send, body: AsyncIterator[bytes]) -> None:
    async for data in body:
        await send({"type": "http.response.body", "body": data, "more_body": True})


async def _unsatisfiable(send: Send, message: str, size: int) -> None:
    body = f"{message}\n".encode()
    headers = {
        "content-type": "text/plain; charset=utf-8",
        "content-length": str(len(body)),
        "content-range": f"bytes */{size}",
    }
    await send({"type": "http.response.start", "status": 416, "headers": _raw(headers)})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _raw(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
