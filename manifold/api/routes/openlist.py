"""Addresses the OpenList web frontend calls beyond AList v3.45: the manual scan of
the Indexes page, with OpenList's request and answers (share links: ``shares.py``).
"""

from __future__ import annotations

from dataclasses import asdict

from fastapi import Request
from starlette.responses import Response

from manifold.api.binding import bind
from manifold.api.deps import ServicesDep
from manifold.api.envelope import ok
from manifold.api.openapi import bound
from manifold.api.schemas import RequestBody


class ScanBody(RequestBody):
    path: str = ""  # the root when missing or empty
    # Listings a second at most; 0 for no limit.
    limit: float = 0


SCAN_INPUT = bound(ScanBody)


async def scan_start(request: Request, services: ServicesDep) -> Response:
    body = await bind(request, ScanBody)
    services.scan.start(body.path or "/", body.limit)
    return ok()


async def scan_stop(services: ServicesDep) -> Response:
    await services.scan.stop()
    return ok()


async def scan_progress(services: ServicesDep) -> Response:
    return ok(asdict(services.scan.progress()))
