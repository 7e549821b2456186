"""Single sign-on: AList's four routes over OAuth 2 platforms and generic OIDC.

A flow starts at ``/api/auth/sso?method=...`` and comes back to the callback with a
code. What AList keeps per client address (the state) is here a short-lived signed
cookie on the browser that started the flow: it holds the state, and for OIDC the
nonce and the PKCE verifier, so a callback is accepted only in that browser, within
five minutes, on any worker or instance, and once: the first callback marks the flow
used in the database (``SsoFlowRepo``), which every instance asks (the route clears
the cookie too, but a copy of it must not serve again).

An identity is the platform's user id, or for OpenID Connect the issuer and the
``sub`` of the ID token: the name claim (``sso_oidc_username_key``) only names an
account that auto-registration makes, since another account at the provider may
carry the same name. A binding made before identities had an issuer (by that name)
opens nothing: its sign-in is refused until the account is connected again.

The result is a login token (``sso_get_token``) or, for binding an identity to the
signed-in user from the profile page (``get_sso_id``), a signed ticket that the page
hands to ``/api/me/update`` as its ``sso_id``: the update accepts a new identity only
through a ticket from the same browser (a second cookie), so neither a crafted
``sso_id`` nor a link carrying someone else's ticket binds anything.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import jwt

from manifold.config import Secret
from manifold.db.repos import SsoFlowRepo
from manifold.errors import BadRequest, Forbidden, ServerError
from manifold.models import SsoIdentity, User
from manifold.services.admin.settings import SettingsService
from manifold.services.auth import oidc, sso_platforms
from manifold.services.auth.tokens import TokenService
from manifold.services.auth.users import UserInput, UserService, random_password

FLOW_COOKIE = "manifold_sso_flow"
BIND_COOKIE = "manifold_sso_bind"
FLOW_SECONDS = 300
METHODS = ("get_sso_id", "sso_get_token")
_DISABLED = "Current user is disabled, replace please"
_BAD_STATE = "incorrect or expired state parameter"
_REBIND = (
    "the account of this name was connected to single sign-on by name only: sign in "
    "with its password (an admin can set one) and connect it again from the profile"
)


@dataclass(frozen=True, slots=True)
class Started:
    url: str
    flow_cookie: str


@dataclass(frozen=True, slots=True)
class Finished:
    """A login token (``sso_get_token``) or a binding ticket (``get_sso_id``)."""

    method: str
    value: str
    bind_cookie: str = ""


class SsoService:
    def __init__(
        self,
        settings: SettingsService,
        users: UserService,
        tokens: TokenService,
        client: oidc.OidcClient,
        flows: SsoFlowRepo,
        secret: Secret,
        site_url: str,
    ) -> None:
        self._settings = settings
        self._users = users
        self._tokens = tokens
        self._oidc = client
        self._flows = flows
        # A key of its own, so nothing signed here can pass for a login token.
        self._key = hmac.new(secret.reveal().encode(), b"single sign-on", hashlib.sha256).digest()
        self.site_url = site_url.rstrip("/")

    @property
    def compatible(self) -> bool:
        """``sso_compatibility_mode``: the flow runs in the page's own tab, not a popup."""
        return self._settings.get_bool("sso_compatibility_mode")

    def site(self) -> str:
        if urlsplit(self.site_url).scheme not in ("http", "https"):
            raise BadRequest("single sign-on needs site_url (the site's public URL) in the config")
        return self.site_url

    def redirect_uri(self, method: str) -> str:
        if self.compatible:
            return f"{self.site()}/api/auth/{method}"
        return f"{self.site()}/api/auth/sso_callback?method={method}"

    async def start(self, method: str) -> Started:
        if not self._settings.get_bool("sso_login_enabled"):
            raise Forbidden("Single sign-on is not enabled")
        if not method:
            raise BadRequest("no method provided")
        if method not in METHODS:
            raise BadRequest("invalid request")
        flow = {"m": method, "s": secrets.token_urlsafe(24)}
        name = self._settings.get("sso_login_platform")
        if name == "OIDC":
            url = await self._start_oidc(flow)
        else:
            url = sso_platforms.authorize_url(
                sso_platforms.platform(name), self._client(method), flow["s"]
            )
        return Started(url, self._seal("flow", flow, FLOW_SECONDS))

    async def finish(self, method: str, query: Mapping[str, str], flow_cookie: str) -> Finished:
        if not self._settings.get_bool("sso_login_enabled"):
            raise ServerError("sso login is disabled")
        if method not in METHODS:
            raise ServerError("invalid request")
        flow = await self._take_flow(method, query, flow_cookie)
        if query.get("error"):
            raise BadRequest(
                f"single sign-on failed: {query.get('error_description') or query['error']}"
            )
        identity, name = await self._identity(method, query, flow)
        if method == "get_sso_id":
            return self._ticket(identity)
        return Finished(method, await self._sign_in(identity, name))

    async def binding(self, user: User, given: str, bind_cookie: str) -> SsoIdentity:
        """The identity to store for a profile update that sent ``given`` as ``sso_id``."""
        if given in ("", user.sso_id):
            return user.sso if given else SsoIdentity("", "")
        claims = self._open("bind", given, verify_exp=False)
        if claims is None:
            raise BadRequest("sso_id can only be set by connecting through single sign-on")
        identity = SsoIdentity(str(claims.get("s", "")), str(claims["i"]))
        if identity == user.sso:
            return identity
        if claims["exp"] < time.time():
            raise BadRequest("the single sign-on connection has expired, connect again")
        if not _same(_digest(bind_cookie), str(claims["k"])):
            raise BadRequest("the single sign-on connection was made in another browser")
        owner = await self._users.by_sso(identity)
        if owner is not None and owner.id != user.id:
            raise BadRequest("this single sign-on account is connected to another user")
        return identity

    async def _take_flow(
        self, method: str, query: Mapping[str, str], flow_cookie: str
    ) -> dict[str, Any]:
        """The flow this browser began for ``method``, the first time it comes back."""
        flow = self._open("flow", flow_cookie)
        if (
            flow is None
            or flow.get("m") != method
            or not _same(query.get("state", ""), str(flow.get("s", "")))
        ):
            raise BadRequest(_BAD_STATE)
        used = _digest(str(flow["s"]))
        if not await self._flows.use(used, int(flow["exp"]), int(time.time())):
            raise BadRequest(_BAD_STATE)
        return flow

    async def _start_oidc(self, flow: dict[str, Any]) -> str:
        found = await self._oidc.discover(self._settings.get("sso_endpoint_name"))
        verifier, challenge = oidc.pkce_pair()
        flow |= {"n": secrets.token_urlsafe(24), "v": verifier}
        extra = self._settings.get("sso_extra_scopes").split()
        scopes = ["openid", "profile", *[s for s in extra if s not in ("openid", "profile")]]
        fields = {"state": flow["s"], "nonce": flow["n"], "challenge": challenge}
        client = self._client(flow["m"])
        return oidc.authorize_url(found, client.client_id, client.redirect_uri, scopes, fields)

    async def _identity(
        self, method: str, query: Mapping[str, str], flow: dict[str, Any]
    ) -> tuple[SsoIdentity, str]:
        """The user's identity at the provider, and the name a new account takes."""
        name = self._settings.get("sso_login_platform")
        if name == "OIDC":
            return await self._oidc_identity(method, query, flow)
        chosen = sso_platforms.platform(name)
        code = query.get(chosen.code_field, "")
        if not code:
            raise BadRequest("No code provided")
        client = self._client(method)
        answer = await self._oidc.exchange(sso_platforms.token_request(chosen, client, code))
        token = sso_platforms.access_token(chosen, answer)
        user = await self._oidc.exchange(sso_platforms.user_request(chosen, client, token))
        user_id, name = sso_platforms.identity(chosen, user)
        return SsoIdentity("", user_id), name

    async def _oidc_identity(
        self, method: str, query: Mapping[str, str], flow: dict[str, Any]
    ) -> tuple[SsoIdentity, str]:
        found = await self._oidc.discover(self._settings.get("sso_endpoint_name"))
        # RFC 9207: an answer naming another issuer came from a mixed-up flow.
        if "iss" in query and query["iss"] != found.issuer:
            raise BadRequest(_BAD_STATE)
        code = query.get("code", "")
        if not code:
            raise BadRequest("No code provided")
        client = self._client(method)
        pair = (client.client_id, client.secret)
        request = oidc.token_request(found, pair, code, client.redirect_uri, str(flow["v"]))
        answer = await self._oidc.exchange(request)
        raw = answer.get("id_token")
        if not isinstance(raw, str):
            raise BadRequest("no id_token found in oauth2 token")
        claims = await self._oidc.verify(found, raw, client.client_id, str(flow["n"]))
        subject = str(claims["sub"])
        if not 0 < len(subject) <= 255:  # OpenID Connect Core 2: at most 255 characters
            raise BadRequest("invalid id_token: sub")
        access = answer.get("access_token")
        name = await self._oidc_name(found, claims, access if isinstance(access, str) else "")
        return SsoIdentity(found.issuer, subject), name

    async def _oidc_name(self, found: oidc.Discovery, claims: dict[str, Any], access: str) -> str:
        """The ``sso_oidc_username_key`` claim: a new account's name, nothing more."""
        key = self._settings.get("sso_oidc_username_key") or "name"
        value = claims.get(key)
        if value is None and found.userinfo_endpoint and access:
            # Many providers put profile claims in the userinfo answer only.
            info = await self._oidc.userinfo(found, access)
            if info.get("sub") == claims["sub"]:
                value = info.get(key)
        return value if isinstance(value, str) else str(value) if isinstance(value, int) else ""

    async def _sign_in(self, identity: SsoIdentity, name: str) -> str:
        user = await self._users.by_sso(identity)
        if user is None:
            await self._refuse_name_binding(identity, name)
            user = await self._register(identity, name)
        if user.disabled:
            raise Forbidden(_DISABLED)
        return self._tokens.issue(user)

    async def _refuse_name_binding(self, identity: SsoIdentity, name: str) -> None:
        """An OIDC account whose name an older binding holds may be that account's
        owner or anyone who took the same name: neither is let in, nor given a second
        account, until the owner connects the account again (binding its ``sub``)."""
        if identity.issuer and name and await self._users.by_sso(SsoIdentity("", name)):
            raise BadRequest(_REBIND)

    async def _register(self, identity: SsoIdentity, name: str) -> User:
        if not self._settings.get_bool("sso_auto_register"):
            raise BadRequest("failed find user: record not found")
        if not name:
            raise BadRequest("cannot get username from SSO provider")
        if await self._users.by_name(name) is not None:
            name = f"{name}_{identity.subject}"
        data = UserInput(
            username=name,
            password=random_password(24),
            base_path=self._settings.get("sso_default_dir") or "/",
            permission=self._settings.get_int("sso_default_permission", 0),
            sso_id=identity.subject,
            sso_issuer=identity.issuer,
        )
        return await self._users.create(data)

    def _ticket(self, identity: SsoIdentity) -> Finished:
        browser = secrets.token_urlsafe(24)
        claims = {"i": identity.subject, "s": identity.issuer, "k": _digest(browser)}
        return Finished("get_sso_id", self._seal("bind", claims, FLOW_SECONDS), browser)

    def _client(self, method: str) -> sso_platforms.Client:
        client_id = self._settings.get("sso_client_id")
        if not client_id:
            raise BadRequest("sso_client_id is not set")
        return sso_platforms.Client(
            client_id=client_id,
            secret=self._settings.get("sso_client_secret"),
            redirect_uri=self.redirect_uri(method),
            endpoint=self._settings.get("sso_endpoint_name"),
        )

    def _seal(self, purpose: str, claims: dict[str, Any], seconds: int) -> str:
        body = {**claims, "p": purpose, "exp": int(time.time()) + seconds}
        return jwt.encode(body, self._key, algorithm="HS256")

    def _open(self, purpose: str, value: str, verify_exp: bool = True) -> dict[str, Any] | None:
        if not value:
            return None
        try:
            claims: dict[str, Any] = jwt.decode(
                value,
                self._key,
                algorithms=["HS256"],
                options={"require": ["exp", "p"], "verify_exp": verify_exp},
            )
        except jwt.PyJWTError:
            return None
        return claims if claims.get("p") == purpose else None


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _same(given: str, expected: str) -> bool:
    return bool(expected) and secrets.compare_digest(given.encode(), expected.encode())
