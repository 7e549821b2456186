"""Dependencies shared by the route modules: the services, the caller, the admin check."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Annotated

from fastapi import Depends, Request
from starlette.types import Scope

from manifold.container import Services
from manifold.errors import Forbidden
from manifold.services.auth.service import Caller


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def client_address(request: Request, trusted: list[str]) -> str:
    """The real client address: X-Forwarded-For is believed only from trusted proxies."""
    peer = request.client.host if request.client else ""
    if not from_trusted_proxy(request, trusted):
        return peer
    # Several lines are one list in order (RFC 9110 5.3); a proxy may add its own line
    # below the client's, so reading the first line alone would believe the client.
    forwarded = ",".join(request.headers.getlist("x-forwarded-for"))
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    # Walk from the nearest hop back; the first address not ours is the client.
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer


def scope_client(scope: Scope, trusted: list[str]) -> str:
    """``client_address`` for a bare ASGI scope; with no trusted proxies (the usual
    case) it reads the peer without building a request around the scope."""
    if trusted:
        return client_address(Request(scope), trusted)
    peer = scope.get("client")
    return str(peer[0]) if peer else ""


def header_of(scope: Scope, name: bytes) -> str:
    """The first value of the header ``name`` (lower case) in ``scope``, else ""."""
    return header_in(scope["headers"], name)


def header_in(headers: list[tuple[bytes, bytes]], name: bytes) -> str:
    """The first value of the header ``name`` (lower case) among ``headers``, else ""."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return ""


def from_trusted_proxy(request: Request, trusted: list[str]) -> bool:
    """Whether the peer is one of ``trusted``, so its ``X-Forwarded-*`` headers count."""
    peer = request.client.host if request.client else ""
    return bool(trusted) and _is_trusted(peer, trusted)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def trusted_networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    """The networks of ``trusted_proxies`` entries, parsed once per list rather than on
    every request; an entry that names no address or network is left out."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue
    return tuple(networks)


def _is_trusted(address: str, trusted: list[str]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted_networks(tuple(trusted)))


async def get_caller(request: Request) -> Caller:
    services = get_services(request)
    client = client_address(request, services.config.trusted_proxies)
    header = request.headers.get("authorization", "")
    return await services.auth.authenticate(header, client)


async def get_admin(caller: Annotated[Caller, Depends(get_caller)]) -> Caller:
    if not caller.user.is_admin:
        raise Forbidden("You are not an admin")
    return caller


async def services_of(request: Request) -> Services:
    """``get_services`` as a dependency: a plain ``def`` one would cost every request
    a trip to the thread pool."""
    return get_services(request)


ServicesDep = Annotated[Services, Depends(services_of)]
CallerDep = Annotated[Caller, Depends(get_caller)]
AdminDep = Annotated[Caller, Depends(get_admin)]
