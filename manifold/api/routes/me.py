"""The current user and its SSH public keys."""

from __future__ import annotations

from fastapi import Request
from starlette.responses import Response

from manifold.api.deps import CallerDep, ServicesDep, get_caller
from manifold.api.envelope import ok, ok_body, paged, raw
from manifold.api.schemas import Int64, PageNumber, RequestBody, sshkey_json, user_json
from manifold.errors import Forbidden
from manifold.models import User
from manifold.services.auth.sso import BIND_COOKIE


class ProfileBody(RequestBody):
    username: str = ""
    password: str = ""
    sso_id: str = ""


class KeyBody(RequestBody):
    title: str = ""
    key: str = ""


# Users whose answer is kept at once; past this the kept answers start again from none.
ME_KEPT = 1024


class MeBodies:
    """``/api/me``'s encoded answer for each user, made once per ``User`` object.

    A user held by the users' cache is never changed in place: every change stores a
    new object and drops the old one from the cache, here and (told by the change bus)
    in every other process. So the answer kept for the very object asked about is that
    user's current answer, and nothing has to be told to forget one. (Asked about
    another object of the same user, say one read from the database, it encodes again.)
    """

    def __init__(self) -> None:
        self._kept: dict[int, tuple[User, bytes]] = {}

    def of(self, user: User) -> bytes:
        kept = self._kept.get(user.id)
        if kept is not None and kept[0] is user:
            return kept[1]
        body = ok_body(user_json(user, with_otp=True))
        if len(self._kept) >= ME_KEPT:
            self._kept.clear()
        self._kept[user.id] = (user, body)
        return body


ME_BODIES = MeBodies()


async def me(request: Request) -> Response:
    # Called on every page load: a plain handler, no dependency machinery.
    caller = await get_caller(request)
    return raw(ME_BODIES.of(caller.user))


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
