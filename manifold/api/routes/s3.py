"""``/s3/*`` on the main port: the S3 server listens on a port of its own, or not at all."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from manifold.api import envelope
from manifold.api.deps import get_services


async def elsewhere(request: Request) -> Response:
    """AList's two answers, enveloped: which one depends on ``s3_port``."""
    if get_services(request).config.s3_port:
        return envelope.error(403, "S3 server bound to single port")
    return envelope.error(403, "S3 server is not enabled")
