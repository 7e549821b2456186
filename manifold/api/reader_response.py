"""A file from a driver's range reader, served with ``Range`` support.

For back ends whose links are neither a local file nor a URL (see ``Link.reader``):
one byte range is asked of the reader and streamed as it arrives. A single range
answers 206, an unsatisfiable one 416; several ranges are answered with the whole
file (a server may ignore ``Range``), which keeps the back end to one read.

The range is opened and its first bytes read before the response exists
(``ReaderResponse.open``), so a file that went away or a back end that is down
answers an error with its own status, never a 200 cut short.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from manifold.api.file_response import ByteRange, NotSatisfiable, content_type, parse_ranges
from manifold.models import Link, Obj
from manifold.services.fs.streams import open_range
from manifold.splice import EXTENSION, SPLICED, ClientGone, Sink


class ReaderResponse(Response):
    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        first: bytes,
        rest: AsyncGenerator[bytes, None] | None,
        sink: Sink | None = None,
    ) -> None:
        super().__init__()
        self._status = status
        self._answer = dict(headers)
        self._first = first
        self._rest = rest
        self._sink = sink

    @classmethod
    async def open(
        cls,
        link: Link,
        obj: Obj,
        headers: Mapping[str, str],
        request: Headers,
        method: str,
        scope: Scope | None = None,
    ) -> Response:
        """The answer to ``request``'s range of ``obj``; the reader's errors (a missing
        file, a back end down) raise from here, before anything is sent. ``scope``: the
        request's, whose client socket the reader may splice into (``manifold.splice``)."""
        size = obj.size
        answer = {
            "content-type": content_type(obj.name),
            "accept-ranges": "bytes",
            **{k.lower(): v for k, v in headers.items()},
        }
        try:
            wanted = _range(request.get("range", ""), size)
        except NotSatisfiable as exc:
            return _unsatisfiable(str(exc), size)
        status = 200 if wanted is None else 206
        start, length = (0, size) if wanted is None else (wanted.start, wanted.length)
        if wanted is not None:
            answer["content-range"] = wanted.content_range(size)
        answer["content-length"] = str(length)
        if method == "HEAD":
            return cls(status, answer, b"", None)
        sink = _sink(scope)
        body = open_range(link, start, length, sink=sink)
        try:
            first = await anext(body, b"")
        except BaseException:
            await body.aclose()
            if sink is not None:
                sink.close()
            raise
        return cls(status, answer, first, body, sink)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self._status}
        try:
            await send({**start, "headers": _raw(self._answer)})
            if self._first:
                await send({"type": "http.response.body", "body": self._first, "more_body": True})
            if self._rest is not None:
                await self._relay(self._rest, send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except ClientGone:
            return  # the connection is dropped; nobody is there to answer
        finally:
            if self._rest is not None:
                await self._rest.aclose()
            if self._sink is not None:
                self._sink.close()

    async def _relay(self, rest: AsyncGenerator[bytes, None], send: Send) -> None:
        async for data in rest:
            await self._report(send)
            if data:
                await send({"type": "http.response.body", "body": data, "more_body": True})
        await self._report(send)

    async def _report(self, send: Send) -> None:
        """Spliced bytes go out beside the body messages: they are all in the client's
        socket first (waiting for the client here, between the reader's pieces, as a
        send waits, rather than inside the reader, where the storage's idle limit would
        count it), then an empty message reports them, so that whoever counts a
        response's bytes counts them too."""
        if self._sink is None:
            return
        await self._sink.flush()
        spliced = self._sink.take_moved()
        if spliced:
            await send(
                {"type": "http.response.body", "body": b"", "more_body": True, SPLICED: spliced}
            )


def _sink(scope: Scope | None) -> Sink | None:
    """A sink into the client's socket, where the server offers one (plain HTTP)."""
    client = None if scope is None else scope.get("extensions", {}).get(EXTENSION)
    return None if client is None else Sink(client)


def _range(header: str, size: int) -> ByteRange | None:
    if not header:
        return None
    ranges = parse_ranges(header, size)
    return ranges[0] if len(ranges) == 1 else None


def _unsatisfiable(message: str, size: int) -> Response:
    headers = {"content-range": f"bytes */{size}"}
    return Response(f"{message}\n", 416, headers, media_type="text/plain")


def _raw(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
