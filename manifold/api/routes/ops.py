"""``/metrics``: the Prometheus text, for a bearer token or listed addresses only.

Off (404) unless the config's ``metrics`` is set. Its value is either a list of client
addresses or networks (``127.0.0.1,::1``; the address as ``trusted_proxies`` decide
it) or a token that the scraper sends as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import ipaddress
import secrets

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from manifold.api.deps import client_address, get_services
from manifold.config import looks_like_addresses
from manifold.metrics import CONTENT_TYPE


async def metrics(request: Request) -> Response:
    services = get_services(request)
    config = services.config
    if services.metrics is None or not config.metrics:
        raise HTTPException(404)
    _check_allowed(request, config.metrics, config.trusted_proxies)
    body = services.metrics.render(await services.task_counts())
    return Response(body, media_type=CONTENT_TYPE)


def _check_allowed(request: Request, rule: str, trusted: list[str]) -> None:
    if looks_like_addresses(rule):
        client = client_address(request, trusted)
        if not _in_networks(client, rule):
            raise HTTPException(403, "metrics are not served to this address")
        return
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    token_ok = secrets.compare_digest(token.strip().encode(), rule.encode())
    if scheme.lower() != "bearer" or not token_ok:
        raise HTTPException(401, "a bearer token is needed for metrics")


def _in_networks(client: str, rule: str) -> bool:
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return False
    for part in rule.split(","):
        if part.strip() and address in ipaddress.ip_network(part.strip(), strict=False):
            return True
    return False
