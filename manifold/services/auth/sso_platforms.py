"""The OAuth 2 platforms of single sign-on other than generic OIDC (see ``oidc``).

Each platform's endpoints, scope and the fields of its answers are AList's
(``sso_login_platform``: Github, Microsoft, Google, Dingtalk, Casdoor). Requests
are built here and sent by the caller, so each can be checked without a network.
Every platform gets a ``state`` bound to the browser's flow (AList sends none, or
Casdoor's endpoint).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx

from manifold.errors import BadRequest


@dataclass(frozen=True, slots=True)
class Platform:
    name: str
    authorize_url: str
    exchange_url: str
    user_url: str
    scope: str
    # The callback's query field holding the code.
    code_field: str = "code"
    # The user's stable id and display name in the user answer.
    id_field: str = "id"
    name_field: str = "name"
    authorize_extra: dict[str, str] = field(default_factory=dict)
    token_extra: dict[str, str] = field(default_factory=dict)


_GRANT = {"grant_type": "authorization_code"}
PLATFORMS = {
    "Github": Platform(
        "Github",
        authorize_url="https://github.com/login/oauth/authorize",
        exchange_url="https://github.com/login/oauth/access_token",
        user_url="https://api.github.com/user",
        scope="read:user",
        name_field="login",
    ),
    "Microsoft": Platform(
        "Microsoft",
        authorize_url="https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
        exchange_url="https://login.microsoftonline.com/common/oauth2/v2.0/token",
        user_url="https://graph.microsoft.com/v1.0/me",
        scope="user.read",
        name_field="displayName",
        authorize_extra={"response_mode": "query"},
        token_extra=_GRANT,
    ),
    "Google": Platform(
        "Google",
        authorize_url="https://accounts.google.com/o/oauth2/v2/auth",
        exchange_url="https://oauth2.googleapis.com/token",
        user_url="https://www.googleapis.com/oauth2/v1/userinfo",
        scope="https://www.googleapis.com/auth/userinfo.profile",
        token_extra=_GRANT,
    ),
    "Dingtalk": Platform(
        "Dingtalk",
        authorize_url="https://login.dingtalk.com/oauth2/auth",
        exchange_url="https://api.dingtalk.com/v1.0/oauth2/userAccessToken",
        user_url="https://api.dingtalk.com/v1.0/contact/users/me",
        scope="openid",
        code_field="authCode",
        id_field="unionId",
        name_field="nick",
        authorize_extra={"prompt": "consent"},
    ),
    # Relative to ``sso_endpoint_name``, the Casdoor server.
    "Casdoor": Platform(
        "Casdoor",
        authorize_url="/login/oauth/authorize",
        exchange_url="/api/login/oauth/access_token",
        user_url="/api/userinfo",
        scope="profile",
        id_field="sub",
        name_field="preferred_username",
        token_extra=_GRANT,
    ),
}


@dataclass(frozen=True, slots=True)
class Client:
    """This site as the platform knows it."""

    client_id: str
    secret: str
    redirect_uri: str
    # Casdoor's server; unused by the others.
    endpoint: str = ""


def platform(name: str) -> Platform:
    found = PLATFORMS.get(name)
    if found is None:
        raise BadRequest("invalid platform")
    return found


def authorize_url(chosen: Platform, client: Client, state: str) -> str:
    query = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": client.redirect_uri,
        "scope": chosen.scope,
        "state": state,
        **chosen.authorize_extra,
    }
    return _url(chosen.authorize_url, client) + "?" + urlencode(query)


def token_request(chosen: Platform, client: Client, code: str) -> httpx.Request:
    """The code exchange: Dingtalk takes JSON, the others a form."""
    url = _url(chosen.exchange_url, client)
    headers = {"Accept": "application/json"}
    if chosen.name == "Dingtalk":
        body = {
            "clientId": client.client_id,
            "clientSecret": client.secret,
            "code": code,
            "grantType": "authorization_code",
        }
        return httpx.Request("POST", url, json=body, headers=headers)
    form = {
        "client_id": client.client_id,
        "client_secret": client.secret,
        "code": code,
        "redirect_uri": client.redirect_uri,
        "scope": chosen.scope,
        **chosen.token_extra,
    }
    return httpx.Request("POST", url, data=form, headers=headers)


def access_token(chosen: Platform, answer: dict[str, Any]) -> str:
    token = answer.get("accessToken" if chosen.name == "Dingtalk" else "access_token")
    if not isinstance(token, str) or not token:
        error = answer.get("error_description") or answer.get("error") or answer.get("message")
        raise BadRequest(f"the provider gave no access token: {error or 'no reason given'}")
    return token


def user_request(chosen: Platform, client: Client, token: str) -> httpx.Request:
    if chosen.name == "Dingtalk":
        headers = {"x-acs-dingtalk-access-token": token}
    else:
        headers = {"Authorization": f"Bearer {token}"}
    return httpx.Request("GET", _url(chosen.user_url, client), headers=headers | _JSON)


def identity(chosen: Platform, answer: dict[str, Any]) -> tuple[str, str]:
    """The user's id and name from the platform's user answer."""
    user_id = _text(answer.get(chosen.id_field))
    if user_id in ("", "0"):
        raise BadRequest("error occurred")
    return user_id, _text(answer.get(chosen.name_field))


_JSON = {"Accept": "application/json"}


def _url(path: str, client: Client) -> str:
    if path.startswith("/"):
        endpoint = client.endpoint.rstrip("/")
        if not endpoint.startswith(("https://", "http://")):
            raise BadRequest("sso_endpoint_name must be the Casdoor server's URL")
        return endpoint + path
    return path


def _text(value: Any) -> str:
    """A JSON value as AList reads it into a string (numbers too: Github's ids)."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | str):
        return str(value)
    return ""
