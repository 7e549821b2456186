"""OpenAPI descriptions of the inputs FastAPI does not bind itself.

Some handlers read their input by hand: the ANY routes through ``api.binding``
(a JSON or form body, or the query), the task routes a bare JSON list, the uploads
a raw stream and headers. The route table hands these descriptions to FastAPI as
``openapi_extra``, so ``app.openapi()`` describes every route's input. They cost
nothing per request: FastAPI reads them only when it builds the document, which
the app does not serve (AList serves none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter

BINARY = {"type": "string", "format": "binary"}
# The media types ``bind`` reads a body from; any other body is ignored for the query.
_LOCAL_DEFS = "#/$defs/"
BOUND_TYPES = ("application/json", "application/x-www-form-urlencoded", "multipart/form-data")


def bound(model: type[BaseModel], aliases: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What ``binding.bind(request, model, aliases)`` reads: a JSON or form body, or the query."""
    schema = model.model_json_schema()
    schema = _inlined(schema, schema.pop("$defs", {}))
    fields: dict[str, Any] = schema["properties"]
    keys = [*((name, name) for name in fields), *(aliases or {}).items()]
    parameters = [{"name": key, "in": "query", "schema": fields[name]} for key, name in keys]
    content = {media: {"schema": schema} for media in BOUND_TYPES}
    return {"parameters": parameters, "requestBody": {"content": content}}


def no_body(*headers: str) -> dict[str, Any]:
    """A handler given the request that reads no body, only these headers (the
    page-load handlers, which skip FastAPI's dependency machinery)."""
    schema = {"type": "string"}
    return {"parameters": [{"name": n, "in": "header", "schema": schema} for n in headers]}


def json_body(shape: Any) -> dict[str, Any]:
    """A JSON body of type ``shape`` that the handler decodes itself."""
    return raw_body("application/json", TypeAdapter(shape).json_schema())


def raw_body(
    media_type: str, schema: dict[str, Any], headers: Mapping[str, bool] | None = None
) -> dict[str, Any]:
    """A body of one media type, with the request ``headers`` (name: required) it reads."""
    parameters = [
        {"name": name, "in": "header", "required": required, "schema": {"type": "string"}}
        for name, required in (headers or {}).items()
    ]
    content = {media_type: {"schema": schema}}
    return {"parameters": parameters, "requestBody": {"required": True, "content": content}}


def _inlined(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with each local ``$defs`` reference replaced by its (non-recursive) definition.

    The description is pasted into the document's operations, where ``#/$defs/...``
    would point at nothing.
    """
    if isinstance(node, list):
        return [_inlined(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref", "")
    if ref.startswith(_LOCAL_DEFS):
        rest = {key: value for key, value in node.items() if key != "$ref"}
        return {**_inlined(defs[ref.removeprefix(_LOCAL_DEFS)], defs), **rest}
    return {key: _inlined(value, defs) for key, value in node.items()}
