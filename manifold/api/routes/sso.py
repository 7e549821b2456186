"""Single sign-on: the redirect to the provider and the callback that comes back.

In compatibility mode the flow runs in the page's own tab and ends with a redirect
to ``/@login?token=`` or ``/@manage?sso_id=``; otherwise it runs in a popup whose
last page hands the result to the page that opened it, and to no other origin.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from manifold.api.deps import ServicesDep
from manifold.services.auth.sso import BIND_COOKIE, FLOW_COOKIE, FLOW_SECONDS, Finished, SsoService
from manifold.web import base_path_of

_NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def _described(query: tuple[str, ...], cookies: tuple[str, ...] = ()) -> dict[str, Any]:
    """The inputs these handlers read from the request, for ``app.openapi()``."""
    text = {"type": "string"}
    places = [("query", name) for name in query] + [("cookie", name) for name in cookies]
    return {"parameters": [{"name": n, "in": where, "schema": text} for where, n in places]}


START_INPUT = _described(("method",))
# ``code`` (``authCode`` from Dingtalk) and ``state``, or the provider's ``error``.
CALLBACK_INPUT = _described(
    ("method", "code", "authCode", "state", "iss", "error", "error_description"), (FLOW_COOKIE,)
)


async def start(request: Request, services: ServicesDep) -> Response:
    sso = services.sso
    started = await sso.start(request.query_params.get("method", ""))
    response = RedirectResponse(started.url, status_code=302, headers=_NO_STORE)
    _set_cookie(response, sso, FLOW_COOKIE, started.flow_cookie)
    return response


async def callback(request: Request, services: ServicesDep) -> Response:
    """``/api/auth/sso_callback``, and ``get_sso_id`` and ``sso_get_token`` (whose own
    name is the method in compatibility mode, as AList)."""
    sso = services.sso
    method = request.query_params.get("method", "")
    name = request.url.path.rsplit("/", 1)[-1]
    if sso.compatible and name != "sso_callback":
        method = name
    cookie = request.cookies.get(FLOW_COOKIE, "")
    finished = await sso.finish(method, request.query_params, cookie)
    response = _answer(sso, finished)
    # One use: a second callback with the same state finds no flow.
    response.delete_cookie(FLOW_COOKIE, path=_cookie_path(sso))
    if finished.bind_cookie:
        _set_cookie(response, sso, BIND_COOKIE, finished.bind_cookie)
    return response


def _answer(sso: SsoService, finished: Finished) -> Response:
    site = sso.site()
    field = "token" if finished.method == "sso_get_token" else "sso_id"
    if sso.compatible:
        page = "/@login?token=" if field == "token" else "/@manage?sso_id="
        return RedirectResponse(site + page + finished.value, status_code=302, headers=_NO_STORE)
    return HTMLResponse(_popup_page(field, finished.value, _origin(site)), headers=_NO_STORE)


def _popup_page(field: str, value: str, origin: str) -> str:
    # JSON with "<" escaped cannot close the script element it sits in.
    message = orjson.dumps({field: value}).decode().replace("<", "\\u003c")
    target = orjson.dumps(origin).decode().replace("<", "\\u003c")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Single sign-on</title>"
        "</head><body><p>Signed in; this window can be closed.</p><script>"
        f"if (window.opener) {{ window.opener.postMessage({message}, {target}); window.close(); }}"
        "</script></body></html>"
    )


def _set_cookie(response: Response, sso: SsoService, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        max_age=FLOW_SECONDS,
        path=_cookie_path(sso),
        secure=sso.site().startswith("https://"),
        httponly=True,
        samesite="lax",
    )


def _cookie_path(sso: SsoService) -> str:
    """The API's path under the site: the callback and ``/api/me/update`` read the cookies."""
    base = base_path_of(sso.site())
    return base.rstrip("/") + "/api"


def _origin(site: str) -> str:
    scheme, rest = site.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}"
