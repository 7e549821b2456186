"""The ``{code, message, data}`` envelope every ``/api`` answer is wrapped in.

AList answers HTTP 200 for success and error alike and puts the real status in
``code``; clients depend on that, so the API does the same.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel
from starlette.responses import Response

JSON = "application/json; charset=utf-8"
_OK_HEAD = b'{"code":200,"message":"success","data":'


def ok(data: Any = None) -> Response:
    """A success envelope; ``data`` is a pydantic model or anything orjson encodes."""
    if isinstance(data, BaseModel):
        return Response(_OK_HEAD + data.model_dump_json().encode() + b"}", media_type=JSON)
    return Response(_OK_HEAD + orjson.dumps(data) + b"}", media_type=JSON)


def ok_body(data: Any) -> bytes:
    """The encoded success envelope around ``data`` (anything orjson encodes)."""
    return _OK_HEAD + orjson.dumps(data) + b"}"


def raw(body: bytes) -> Response:
    """A pre-encoded envelope, for the hottest endpoints."""
    return Response(body, media_type=JSON)


def ok_message(message: str) -> Response:
    """A success envelope with no data and a message of its own (AList's ``SuccessWithMsgResp``)."""
    return Response(orjson.dumps({"code": 200, "message": message, "data": None}), media_type=JSON)


def ok_encoded(*data: bytes) -> Response:
    """A success envelope around ``data``, already JSON, given in pieces to concatenate."""
    return Response(b"".join((_OK_HEAD, *data, b"}")), media_type=JSON)


def error_body(code: int, message: str, data: Any = None) -> bytes:
    try:
        return orjson.dumps({"code": code, "message": message, "data": data})
    except orjson.JSONEncodeError:
        # A message quoting the request may hold a lone surrogate (JSON's "\ud800"),
        # which UTF-8 cannot carry: it is shown as U+FFFD instead.
        shown = message.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return orjson.dumps({"code": code, "message": shown, "data": data})


def error(code: int, message: str, data: Any = None, status: int = 200) -> Response:
    return Response(error_body(code, message, data), status_code=status, media_type=JSON)


def paged(content: list[Any], total: int) -> Response:
    return ok({"content": content, "total": total})
