"""The page-load endpoints answered before routing: the same answers as their routes."""

from __future__ import annotations

import inspect

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.routing import Match, Route

from manifold.api.asgi import RouteTable
from tests.conftest import Api

ORIGIN = {"Origin": "http://elsewhere.example"}


@pytest.mark.parametrize("path", ["/api/me", "/api/public/settings"])
async def test_the_fast_answer_is_the_routed_answer(api: Api, path: str) -> None:
    token = await api.login()
    fast = await api.client.get(path, headers={"Authorization": token})
    routed = await api.client.get(path, headers={"Authorization": token, **ORIGIN})
    assert fast.status_code == routed.status_code == 200
    assert fast.json() == routed.json()
    assert fast.headers["x-content-type-options"] == "nosniff"
    assert fast.headers["content-type"] == routed.headers["content-type"]


async def test_me_errors_and_other_methods_take_the_route(api: Api) -> None:
    bad = await api.client.get("/api/me", headers={"Authorization": "not-a-token"})
    assert bad.json()["code"] == 401
    assert bad.json()["message"] == "token is invalidated"
    guest = await api.client.get("/api/me")
    assert guest.json()["code"] == 401  # the guest is disabled by default
    token = await api.login()
    posted = await api.client.post("/api/me", headers={"Authorization": token})
    assert posted.json()["code"] == 405 or posted.status_code == 405


async def test_a_logged_out_token_is_refused_on_the_fast_path(api: Api) -> None:
    token = await api.login(fresh=True)
    assert (await api.get("/api/me", token=token))["data"]["username"] == "admin"
    await api.get("/api/auth/logout", token=token)
    refused = await api.get("/api/me", token=token)
    assert refused["code"] == 401


def test_the_route_table_picks_what_the_ordered_scan_picks(api: Api) -> None:
    """Every route with a fixed path is found by one lookup, and it is the route
    Starlette's scan of the routes in order would have chosen."""
    app = api.app
    assert app is not None
    table = app.router.middleware_stack
    assert isinstance(table, RouteTable)
    fixed = [r for r in app.router.routes if isinstance(r, Route) and not r.param_convertors]
    assert fixed and len(table) == len(fixed)
    for route in fixed:
        for method in route.methods or {"GET"}:
            scope = {"type": "http", "path": route.path, "root_path": "", "method": method,
                     "headers": [], "query_string": b""}  # fmt: skip
            scanned = next(r for r in app.router.routes if r.matches(scope)[0] is Match.FULL)
            looked_up = next(
                r for r in table.routes_at(route.path) if r.matches(scope)[0] is Match.FULL
            )
            assert looked_up is scanned, (method, route.path)


async def test_paths_with_parameters_and_unknown_paths_still_route(api: Api) -> None:
    token = await api.login()
    tasks = await api.client.get("/api/admin/task/copy/done", headers={"Authorization": token})
    assert tasks.json() == {"code": 200, "message": "success", "data": []}
    missing = await api.client.get("/api/no/such/route")
    assert missing.status_code == 404 or missing.json()["code"] == 404
    wrong_method = await api.client.delete("/api/fs/mkdir", headers={"Authorization": token})
    assert wrong_method.status_code == 405 or wrong_method.json()["code"] == 405


def test_no_route_or_dependency_runs_in_the_thread_pool(api: Api) -> None:
    """FastAPI runs a plain ``def`` endpoint or dependency in its thread pool: one more
    trip off the event loop for every request, which waits its turn under load."""
    assert api.app is not None
    routes = [r for r in api.app.router.routes if isinstance(r, APIRoute)]
    assert len(routes) > 50

    def sync_calls(dependant: Dependant) -> list[str]:
        found = [] if dependant.call is None or is_async(dependant.call) else [repr(dependant.call)]
        for sub in dependant.dependencies:
            found += sync_calls(sub)
        return found

    threaded = {route.path: sync_calls(route.dependant) for route in routes}
    assert {path: calls for path, calls in threaded.items() if calls} == {}


def is_async(call: object) -> bool:
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(
        getattr(call, "__call__", None)  # noqa: B004 - a callable instance's method
    )
