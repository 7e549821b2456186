"""The current user and its SSH public keys."""

from __future__ import annotations

from fastapi import Request
from starlette.responses import Response

from manifold.api.deps import CallerDep, ServicesDep, get_caller
from manifold.api.envelope import ok, paged
from manifold.api.schemas import Int64, PageNumber, RequestBody, sshkey_json, user_json
from manifold.errors import Forbidden
from manifold.services.auth.sso import BIND_COOKIE


class ProfileBody(RequestBody):
    username: str = ""
    password: str = ""
    sso_id: str = ""


class KeyBody(RequestBody):
    title: str = ""
    key: str = ""


async def me(request: Request) -> Response:
    # Called on every page load: a plain handler, no dependency machinery.
    caller = await get_caller(request)
    return ok(user_json(caller.user, with_otp=True))


async def update_me(
    body: ProfileBody, request: Request, caller: CallerDep, services: ServicesDep
) -> Response:
    if caller.user.is_guest:
        raise Forbidden("Guest user can not update profile")
    # A new single sign-on identity arrives as a ticket from this browser's sign-in.
    bind_cookie = request.cookies.get(BIND_COOKIE, "")
    sso = await services.sso.binding(caller.user, body.sso_id, bind_cookie)
    await services.users.update_profile(caller.user, body.username, body.password, sso)
    return ok()


async def list_keys(
    caller: CallerDep, services: ServicesDep, page: PageNumber = 1, per_page: PageNumber = 0
) -> Response:
    keys, total = await services.sshkeys.page(caller.user, page, per_page)
    return paged([sshkey_json(k) for k in keys], total)


async def add_key(body: KeyBody, caller: CallerDep, services: ServicesDep) -> Response:
    await services.sshkeys.add(caller.user, body.title, body.key)
    return ok()


async def delete_key(id: Int64, caller: CallerDep, services: ServicesDep) -> Response:
    await services.sshkeys.delete_own(caller.user, id)
    return ok()
