"""Watching every request from outside the app: ``/metrics`` counters and the access log.

``Observer`` wraps the whole application (the pre-encoded fast answers included) and is
only installed when metrics or JSON logs are on, so a server with neither pays nothing.
A request is named by its route's template (``/d/{path:path}``), never its raw path,
so the counters stay few; the access log line gives the path without its query (a
query may carry a sign or a token).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from manifold.metrics import Metrics
from manifold.splice import SPLICED

access_log = logging.getLogger("manifold.access")
# The key under which a request's scope carries what routing found (see ``Seen``).
SEEN = "manifold.seen"
UNMATCHED = "unmatched"


class Seen:
    """What the router found for a request, filled in by ``api.asgi.RouteTable``.

    The scope is copied on the way in (the site's base path), so the route is handed
    back through this one shared object rather than through the scope itself.
    """

    __slots__ = ("route",)

    def __init__(self) -> None:
        self.route: str | None = None


class Observer:
    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics | None,
        access: bool,
        fixed: frozenset[str],
        dav_prefix: str | None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.access = access
        self.fixed = fixed  # paths answered before routing (``ManifoldApp.fast_bodies``)
        self.dav_prefix = dav_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        seen = scope[SEEN] = Seen()
        status = 0
        sent = 0

        async def observed(message: Message) -> None:
            nonlocal status, sent
            kind = message["type"]
            if kind == "http.response.body":
                # Bytes spliced into the socket are reported beside the body.
                sent += len(message.get("body", b"")) + message.get(SPLICED, 0)
            elif kind == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observed)
        finally:
            took = time.perf_counter() - started
            route = seen.route or self._unrouted(scope["path"])
            if self.metrics is not None:
                self.metrics.request(route, scope["method"], status, took, sent)
            if self.access:
                self._log(scope, route, status, took, sent)

    def _unrouted(self, path: str) -> str:
        if path in self.fixed:
            return path
        if self.dav_prefix is not None and (
            path == self.dav_prefix or path.startswith(self.dav_prefix + "/")
        ):
            return self.dav_prefix
        return UNMATCHED

    def _log(self, scope: Scope, route: str, status: int, took: float, sent: int) -> None:
        client = scope.get("client")
        extra: dict[str, Any] = {
            "method": scope["method"],
            "path": scope["path"],
            "route": route,
            "status": status,
            "duration_ms": round(took * 1000, 2),
            "bytes": sent,
            "client": client[0] if client else "",
        }
        access_log.info("%s %s %d", scope["method"], scope["path"], status, extra=extra)


def note_route(scope: Scope) -> None:
    """Hand the matched route's template to the request's ``Seen``, if it is watched."""
    seen = scope.get(SEEN)
    route = scope.get("route")
    if seen is not None and route is not None:
        seen.route = getattr(route, "path", None)
