"""Addresses the OpenList web frontend calls beyond AList v3.45, answered so that no
page shows an error or waits: shares (none yet, so empty lists) and the manual scan
(the search index is built from the index page instead).

The answers are stable: listing endpoints answer an empty page, actions answer one
clear error that says the feature is not here, never a 404 or a crash.
"""

from __future__ import annotations

from starlette.responses import Response

from manifold.api.envelope import error, ok
from manifold.api.routes.tasks import TaskCallerDep

SHARES_MISSING = "sharing is not available on this server yet"
SCAN_MISSING = "manual scan is not available; build the search index instead"


async def share_list(_: TaskCallerDep) -> Response:
    return ok({"content": [], "total": 0})


async def share_action(_: TaskCallerDep) -> Response:
    return error(500, SHARES_MISSING)


async def scan_start() -> Response:
    return error(400, SCAN_MISSING)


async def scan_stop() -> Response:
    return error(400, "manual scan is not running")


async def scan_progress() -> Response:
    return ok({"obj_count": 0, "is_done": True})
