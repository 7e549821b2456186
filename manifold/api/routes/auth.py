"""Login, logout and 2FA."""

from __future__ import annotations

from fastapi import Request
from starlette.responses import Response

from manifold.api.deps import CallerDep, ServicesDep, client_address
from manifold.api.envelope import ok
from manifold.api.schemas import RequestBody


class LoginBody(RequestBody):
    username: str = ""
    password: str = ""
    otp_code: str = ""


class VerifyBody(RequestBody):
    code: str = ""
    secret: str = ""


async def login(body: LoginBody, request: Request, services: ServicesDep) -> Response:
    client = client_address(request, services.config.trusted_proxies)
    token = await services.auth.login(body.username, body.password, body.otp_code, client)
    return ok({"token": token})


async def login_hash(body: LoginBody, request: Request, services: ServicesDep) -> Response:
    client = client_address(request, services.config.trusted_proxies)
    token = await services.auth.login_hashed(body.username, body.password, body.otp_code, client)
    return ok({"token": token})


async def login_ldap(body: LoginBody, request: Request, services: ServicesDep) -> Response:
    client = client_address(request, services.config.trusted_proxies)
    token = await services.auth.login_ldap(body.username, body.password, body.otp_code, client)
    return ok({"token": token})


async def logout(caller: CallerDep, services: ServicesDep) -> Response:
    await services.auth.logout(caller)
    return ok()


async def generate_2fa(caller: CallerDep, services: ServicesDep) -> Response:
    secret, qr = await services.auth.generate_2fa(caller)
    return ok({"qr": qr, "secret": secret})


async def verify_2fa(body: VerifyBody, caller: CallerDep, services: ServicesDep) -> Response:
    await services.auth.verify_2fa(caller, body.code, body.secret)
    return ok()
