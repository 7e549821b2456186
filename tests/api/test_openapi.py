"""The app's OpenAPI document describes every route's input, even those read by hand."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request

from manifold.app import ROUTES, Route, create_app
from manifold.config import load_config

API_ROUTES = [r for r in ROUTES if r.path.startswith("/api/")]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    return create_app(load_config(Path(tmp_path_factory.mktemp("openapi")), env={}))


@pytest.fixture(scope="module")
def schema(app: FastAPI) -> dict[str, Any]:
    with warnings.catch_warnings():
        # An ANY route's methods share one operation id; FastAPI warns, nothing else.
        warnings.filterwarnings("ignore", "Duplicate Operation ID", UserWarning)
        document: dict[str, Any] = app.openapi()
    return document


def reads_by_hand(route: Route) -> bool:
    """A handler given the raw request may read its body itself."""
    hints = inspect.signature(route.endpoint, eval_str=True).parameters.values()
    return any(p.annotation is Request for p in hints)


@pytest.mark.parametrize("route", API_ROUTES, ids=lambda r: r.path)
def test_a_route_reading_its_request_describes_its_body(
    route: Route, schema: dict[str, Any]
) -> None:
    if not reads_by_hand(route):
        return
    for method in route.methods:
        operation = schema["paths"][route.path][method.lower()]
        described = "requestBody" in operation or "parameters" in operation
        assert described, f"{method} {route.path}: describe it in ROUTES"


def test_a_bound_route_takes_json_form_or_query(schema: dict[str, Any]) -> None:
    operation = schema["paths"]["/api/fs/list"]["get"]
    assert sorted(operation["requestBody"]["content"]) == [
        "application/json",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ]
    query = {p["name"]: p["schema"]["type"] for p in operation["parameters"]}
    assert query == {
        "path": "string",
        "password": "string",
        "page": "integer",
        "per_page": "integer",
        "refresh": "boolean",
        "Refresh": "boolean",
    }


def test_a_nested_value_is_described_in_place(schema: dict[str, Any]) -> None:
    body = schema["paths"]["/api/fs/other"]["post"]["requestBody"]["content"]["application/json"]
    assert "$ref" not in str(body)


def test_uploads_describe_their_headers_and_stream(schema: dict[str, Any]) -> None:
    operation = schema["paths"]["/api/fs/put"]["put"]
    headers = {p["name"]: p["required"] for p in operation["parameters"] if p["in"] == "header"}
    assert headers["File-Path"] and not headers["As-Task"]
    assert not headers["Content-Length"] and not headers["X-File-Size"]  # chunked is fine
    assert list(operation["requestBody"]["content"]) == ["application/octet-stream"]


def test_task_id_lists_are_described(schema: dict[str, Any]) -> None:
    operation = schema["paths"]["/api/task/{kind}/cancel_some"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"type": "array", "items": {"type": "string"}}


def test_the_document_is_not_served(app: FastAPI) -> None:
    # AList serves none; the description is for the fuzz and for tools, not for clients.
    assert app.openapi_url is None and app.docs_url is None and app.redoc_url is None
