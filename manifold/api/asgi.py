"""The ASGI machinery under the route table in ``manifold.app``.

Three pieces, each answering a measured cost of the stock stack:

* ``ManifoldApp``: FastAPI less the layers every request crossed for nothing, and a
  few pre-encoded page-load answers given before any routing;
* ``RouteTable``: routing by one dict lookup for routes with a fixed path;
* ``CatchAll``: the outermost layer; every unexpected error answers the envelope.

These reach into Starlette's and FastAPI's internals (``get_route_path``, the exit
stack middleware), which is why ``pyproject.toml`` holds both to the minor series the
suite runs against.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from fastapi import FastAPI
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from starlette import routing as starlette_routing
from starlette._utils import get_route_path
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from manifold.api import envelope
from manifold.api.guards import NOSNIFF
from manifold.api.observe import note_route

log = logging.getLogger("manifold")


class ManifoldApp(FastAPI):
    """The application, answering a few hot, pre-encoded JSON endpoints before any
    routing or middleware: every page load calls them, and the layers on the way
    cost more than their work. (Each answer gets what ``CatchAll`` would add.)

    Each path has a producer that reads the request's scope and returns the body, or
    None to let the normal route answer (an error, a method it does not take), so
    every answer other than the common one comes from one place. A request with an
    ``Origin`` header takes the normal route, so CORS applies.
    """

    fast_bodies: dict[str, FastBody] = {}
    # The same answers where they need no waiting: ``quick`` gives them to the HTTP
    # protocol (``manifold.server``), which writes them without an ASGI call at all.
    quick_bodies: dict[str, QuickBody] = {}
    # Watches every request (``api.observe.Observer``) when metrics or the access log are on.
    observer: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.observer is not None:
            await self.observer(scope, receive, send)
        else:
            await self.answer(scope, receive, send)

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The application itself, without the observer."""
        body_of = self.fast_bodies.get(scope["path"]) if scope["type"] == "http" else None
        if body_of is not None and not _has_origin(scope["headers"]):
            body = await body_of(scope)
            if body is not None:
                headers = fast_headers(body)
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await super().__call__(scope, receive, send)

    def quick(self, path: str, headers: Headers) -> bytes | None:
        """The body of a fast answer to a GET of ``path`` with ``headers`` if it needs
        no waiting, else None (the request then takes the ASGI call). Never while the
        observer watches: metrics and the access log count every request."""
        body_of = self.quick_bodies.get(path)
        if body_of is None or self.observer is not None or _has_origin(headers):
            return None
        return body_of(headers)

    def build_middleware_stack(self) -> ASGIApp:
        """FastAPI's stack less three layers every request would pass for nothing:
        the server-error layer (``CatchAll``, outermost of this app's own, answers
        every unexpected error first), the telemetry layer (no OpenTelemetry here)
        and the app-wide body limit (``RequestGuard`` holds the limits). What the
        routes rely on stays: the exception handlers and the exit stack of a request.
        """
        handlers = {
            key: handler
            for key, handler in self.exception_handlers.items()
            if key not in (500, Exception)
        }
        app: ASGIApp = AsyncExitStackMiddleware(self.router)
        app = ExceptionMiddleware(app, handlers=handlers, debug=self.debug)
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        return app


Headers = list[tuple[bytes, bytes]]
FastBody = Callable[[Scope], Awaitable[bytes | None]]
QuickBody = Callable[[Headers], bytes | None]
CONTENT_TYPE = (b"content-type", envelope.JSON.encode())


def fast_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """The headers of a fast answer (what ``CatchAll`` would add included)."""
    return [CONTENT_TYPE, (b"content-length", str(len(body)).encode()), NOSNIFF]


def _has_origin(headers: Headers) -> bool:
    # A request with an Origin header takes the normal route, so CORS applies.
    for name, _ in headers:  # noqa: SIM110 - any() makes a generator for each request
        if name == b"origin":
            return True
    return False


class RouteTable:
    """Routing by one dict lookup for the routes with a fixed path (nearly all of them),
    instead of Starlette's test of every route in turn; anything else (paths with
    parameters, mounts, the web page's fallback, 405s) goes the usual way.

    A fixed route is put in the table only when no route before it matches its path,
    so the table picks exactly the route Starlette's ordered scan would.
    """

    def __init__(self, router: Router) -> None:
        self._router = router
        self._fixed: dict[str, list[BaseRoute]] = {}
        for index, route in enumerate(router.routes):
            if not isinstance(route, starlette_routing.Route) or route.param_convertors:
                continue
            if not _shadowed(route, router.routes[:index]):
                self._fixed.setdefault(route.path, []).append(route)

    def routes_at(self, path: str) -> tuple[BaseRoute, ...]:
        """The routes the table holds for the fixed path ``path``, in order."""
        return tuple(self._fixed.get(path, ()))

    def __len__(self) -> int:
        """How many routes the table holds."""
        return sum(len(routes) for routes in self._fixed.values())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self._fixed.get(get_route_path(scope), ()):
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    scope.setdefault("router", self._router)
                    scope["route"] = route
                    scope.update(child_scope)
                    note_route(scope)
                    await route.handle(scope, receive, send)
                    return
        try:
            await self._router.app(scope, receive, send)
        finally:
            note_route(scope)


def _shadowed(route: starlette_routing.Route, earlier: list[BaseRoute]) -> bool:
    """Whether a route before ``route`` also matches its path (for any of its methods)."""
    for method in route.methods or {"GET"}:
        probe: Scope = {"type": "http", "path": route.path, "root_path": "", "method": method,
                        "headers": [], "query_string": b""}  # fmt: skip
        for other in earlier:
            try:
                if other.matches(probe)[0] is not Match.NONE:
                    return True
            except Exception:  # a route that cannot judge a bare scope: assume it matches
                return True
    return False


class CatchAll:
    """Last line of defence: an unexpected error answers the envelope, and the log
    gets one line naming the error class; no traceback, which may hold secrets.

    Every answer passes here, so this is also where each gets ``NOSNIFF``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", ()), NOSNIFF]}
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except ClientDisconnect:
            # The client hung up mid-request (an upload cut off): nobody to answer.
            log.info("client left during %s %s", scope["method"], scope["path"])
        except Exception as exc:
            log.error("unhandled %s in %s %s", type(exc).__name__, scope["method"], scope["path"])
            if not started:
                await envelope.error(500, "internal error")(scope, receive, tracking_send)
