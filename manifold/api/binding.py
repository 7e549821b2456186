"""Request fields bound as AList binds them (gin's ``ShouldBind``), for ANY routes.

A GET binds the query string. Any other method binds a JSON body when the content
type says JSON; otherwise the form fields of a url-encoded or multipart body, then
the query string (the first value of a field wins, as in Go's ``url.Values``).

A JSON body is validated strictly (a string is not a number). Form and query
values are text, so they are converted: ``"2"`` is a number, ``"true"`` a bool, and
an empty value leaves a non-text field at its default. Whatever cannot be converted
is refused the way FastAPI refuses a bad body: ``RequestValidationError``, which the
app answers with code 400 naming each field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

B = TypeVar("B", bound=BaseModel)

_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
_NOT_AN_OBJECT = "Input should be a valid dictionary or object to extract fields from"


async def bind(request: Request, model: type[B], aliases: Mapping[str, str] | None = None) -> B:
    """The request's fields as ``model``; ``aliases`` maps extra form keys onto fields."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if request.method != "GET" and media_type == "application/json":
        return _validated(model, _json_object(await request.body()), "body", strict=True)
    fields: dict[str, Any] = {}
    if request.method != "GET" and media_type in _FORM_TYPES:
        async with request.form() as form:
            _collect(fields, form.multi_items(), model, aliases or {})
    _collect(fields, request.query_params.multi_items(), model, aliases or {})
    return _validated(model, fields, "query", strict=False)


def _json_object(body: bytes) -> Any:
    if not body:
        raise RequestValidationError([_problem("missing", ("body",), "Field required")])
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        problem = _problem("json_invalid", ("body", exc.pos), "JSON decode error")
        raise RequestValidationError([{**problem, "ctx": {"error": exc.msg}}]) from None
    if data is None:
        return {}  # Go decodes null into a struct as "nothing set"
    if not isinstance(data, dict):
        raise RequestValidationError([_problem("model_attributes_type", ("body",), _NOT_AN_OBJECT)])
    return data


def _collect(
    fields: dict[str, Any],
    items: list[tuple[str, Any]],
    model: type[BaseModel],
    aliases: Mapping[str, str],
) -> None:
    """Keep the first text value of each of ``model``'s fields found in ``items``."""
    for key, value in items:
        name = aliases.get(key, key)
        info = model.model_fields.get(name)
        if info is None or name in fields or not isinstance(value, str):
            continue
        if value == "" and info.annotation is not str:
            continue
        fields[name] = value


def _validated(model: type[B], data: Any, where: str, strict: bool) -> B:
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as exc:
        problems = [{**p, "loc": (where, *p["loc"])} for p in exc.errors(include_url=False)]
        raise RequestValidationError(problems) from None


def _problem(kind: str, loc: tuple[Any, ...], msg: str) -> dict[str, Any]:
    return {"type": kind, "loc": loc, "msg": msg, "input": None}
