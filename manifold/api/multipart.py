"""Stream one file part out of a multipart body, without storing the body first.

``/api/fs/form`` uploads can be gigabytes; the bytes of the part named ``file`` are
handed on as they arrive, so an upload is written once, to its temporary name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from manifold.errors import BadRequest, ServerError

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks


MALFORMED = "multipart body is malformed"


def boundary_of(content_type: str) -> bytes:
    kind, options = parse_options_header(content_type)
    boundary = options.get(b"boundary", b"")
    if kind != b"multipart/form-data" or not boundary:
        raise BadRequest("request Content-Type isn't multipart/form-data")
    return boundary


async def file_part(
    body: AsyncIterator[bytes], content_type: str, field: str = "file"
) -> AsyncIterator[bytes]:
    """The bytes of the first part named ``field``; AList's error when there is none."""
    reader = _PartReader(field.encode())
    # The parser refuses a boundary past 256 bytes, a part header past its limit and
    # malformed lines by raising: a client's mistake, not the server's.
    try:
        parser = MultipartParser(boundary_of(content_type), reader.callbacks())
        async for chunk in body:
            parser.write(chunk)
            if reader.ready:
                data = b"".join(reader.ready)
                reader.ready.clear()
                yield data
        parser.finalize()
    except FormParserError:
        raise BadRequest(MALFORMED) from None
    if reader.ready:
        yield b"".join(reader.ready)
    if not reader.found:
        raise ServerError("http: no such file")
    if not reader.complete:
        raise BadRequest("multipart body ended inside the file part")


class _PartReader:
    """Parser callbacks that keep the data of the wanted part, for the caller to take."""

    def __init__(self, field: bytes) -> None:
        self.field = field
        self.ready: list[bytes] = []
        self.found = False
        self.complete = False
        self._wanted = False
        self._header = b""
        self._value = b""
        self._disposition = b""

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._begin,
            "on_header_field": self._on_field,
            "on_header_value": self._on_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_done,
            "on_part_data": self._data,
            "on_part_end": self._end,
        }

    def _begin(self) -> None:
        self._disposition = b""
        self._wanted = False

    def _on_field(self, data: bytes, start: int, end: int) -> None:
        self._header += data[start:end]

    def _on_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def _header_end(self) -> None:
        if self._header.lower() == b"content-disposition":
            self._disposition = self._value
        self._header = self._value = b""

    def _headers_done(self) -> None:
        _, options = parse_options_header(self._disposition)
        self._wanted = not self.found and options.get(b"name") == self.field
        self.found = self.found or self._wanted

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self._wanted:
            self.ready.append(data[start:end])

    def _end(self) -> None:
        if self._wanted:
            self.complete = True
        self._wanted = False
