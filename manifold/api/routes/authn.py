"""Passkeys (WebAuthn), with AList's routes and shapes: ``{options, session}`` to begin,
the browser's credential JSON as the body and ``session`` as a header to finish."""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request
from starlette.responses import Response

from manifold.api.deps import CallerDep, ServicesDep, client_address
from manifold.api.envelope import ok
from manifold.api.openapi import no_body, raw_body
from manifold.api.routes.fs import api_url
from manifold.api.schemas import RequestBody
from manifold.container import Services
from manifold.errors import BadRequest
from manifold.services.auth.passkeys import RelyingParty, fingerprint, listed_id

# The relying party comes from the request's host unless ``site_url`` names it.
SITE_INPUT = no_body("Host", "X-Forwarded-Host", "X-Forwarded-Proto")
# The browser's ``PublicKeyCredential.toJSON()``, with the ceremony's ``session``.
ANSWER_INPUT = raw_body("application/json", {"type": "object"}, {"session": True})


class DeleteBody(RequestBody):
    id: str = ""


def relying_party(request: Request, services: Services) -> RelyingParty:
    """The site's host is the relying party id, as AList has it: from ``site_url``,
    else from the request (a trusted proxy's forwarded host counts)."""
    try:
        url = urlsplit(api_url(request, services))
        host = url.hostname or ""
    except ValueError as exc:  # a Host header such as "[]"
        raise BadRequest("invalid host") from exc
    name = services.settings.get("site_title") or "Manifold"
    return RelyingParty(host, f"{url.scheme}://{url.netloc}", name)


async def begin_registration(
    request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    rp = relying_party(request, services)
    options, session = await services.passkeys.begin_registration(caller.user, rp)
    return ok({"options": options, "session": session})


async def finish_registration(
    request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    answer = (await request.body()).decode("utf-8", "replace")
    session = request.headers.get("session", "")
    await services.passkeys.finish_registration(caller.user, session, answer)
    return ok("Registered Successfully")


async def begin_login(request: Request, services: ServicesDep, username: str = "") -> Response:
    rp = relying_party(request, services)
    client = client_address(request, services.config.trusted_proxies)
    options, session = await services.passkeys.begin_login(username, rp, client)
    return ok({"options": options, "session": session})


async def finish_login(request: Request, services: ServicesDep, username: str = "") -> Response:
    answer = (await request.body()).decode("utf-8", "replace")
    session = request.headers.get("session", "")
    token = await services.passkeys.finish_login(username, session, answer)
    return ok({"token": token})


async def credentials(caller: CallerDep, services: ServicesDep) -> Response:
    keys = await services.passkeys.credentials(caller.user)
    return ok([{"id": listed_id(k), "fingerprint": fingerprint(k.aaguid)} for k in keys])


async def delete(body: DeleteBody, caller: CallerDep, services: ServicesDep) -> Response:
    await services.passkeys.delete(caller.user, body.id)
    return ok("Deleted Successfully")
