"""Administration of users and their SSH keys."""

from __future__ import annotations

from starlette.responses import Response

from manifold.api.deps import ServicesDep
from manifold.api.envelope import ok, paged
from manifold.api.schemas import Int64, PageNumber, RequestBody, sshkey_json, user_json
from manifold.errors import BadRequest, NotFound, ServerError
from manifold.models import Role
from manifold.services.auth.users import UserInput


class UserBody(RequestBody):
    id: Int64 = 0
    username: str = ""
    password: str = ""
    base_path: str = "/"
    role: Int64 = Role.GENERAL
    disabled: bool = False
    permission: Int64 = 0
    sso_id: str = ""

    def as_input(self) -> UserInput:
        return UserInput(
            username=self.username,
            password=self.password,
            base_path=self.base_path,
            role=self.role,
            disabled=self.disabled,
            permission=self.permission,
            sso_id=self.sso_id,
        )


async def list_users(
    services: ServicesDep, page: PageNumber = 1, per_page: PageNumber = 0
) -> Response:
    users, total = await services.users.page(page, per_page)
    return paged([user_json(u) for u in users], total)


async def get_user(id: Int64, services: ServicesDep) -> Response:
    return ok(user_json(await services.users.get(id)))


async def create_user(body: UserBody, services: ServicesDep) -> Response:
    await services.users.create(body.as_input())
    return ok()


async def update_user(body: UserBody, services: ServicesDep) -> Response:
    await services.users.update(body.id, body.as_input())
    return ok()


async def delete_user(id: Int64, services: ServicesDep) -> Response:
    await services.users.delete(id)
    await services.tasks.disown(id)
    return ok()


async def cancel_2fa(id: Int64, services: ServicesDep) -> Response:
    user = await services.users.get(id)
    await services.users.set_otp_secret(user, "")
    return ok()


async def del_cache(services: ServicesDep, username: str = "") -> Response:
    if not username:
        raise BadRequest("username is empty")
    if await services.users.by_name(username) is None:
        raise ServerError("failed find user: record not found")
    services.users.forget(username)
    return ok()


async def list_user_keys(
    uid: Int64, services: ServicesDep, page: PageNumber = 1, per_page: PageNumber = 0
) -> Response:
    try:
        await services.users.get(uid)
    except ServerError:
        raise NotFound("user invalid") from None
    keys, total = await services.sshkeys.page_for(uid, page, per_page)
    return paged([sshkey_json(k) for k in keys], total)


async def delete_user_key(id: Int64, services: ServicesDep) -> Response:
    await services.sshkeys.delete_any(id)
    return ok()
