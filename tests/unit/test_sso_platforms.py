"""Each single sign-on platform's requests against its documented endpoints, and the
checks an ID token must pass; no network."""

from __future__ import annotations

import base64
import dataclasses
import json
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from manifold.errors import BadRequest
from manifold.services.auth import oidc, sso_platforms
from manifold.services.auth.sso_platforms import Client

REDIRECT = "https://files.example/api/auth/sso_callback?method=sso_get_token"
CLIENT = Client("the-id", "the-secret", REDIRECT, endpoint="https://door.example/")

AUTHORIZE = {
    "Github": ("https://github.com/login/oauth/authorize", "read:user", {}),
    "Microsoft": (
        "https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
        "user.read",
        {"response_mode": "query"},
    ),
    "Google": (
        "https://accounts.google.com/o/oauth2/v2/auth",
        "https://www.googleapis.com/auth/userinfo.profile",
        {},
    ),
    "Dingtalk": ("https://login.dingtalk.com/oauth2/auth", "openid", {"prompt": "consent"}),
    "Casdoor": ("https://door.example/login/oauth/authorize", "profile", {}),
}


@pytest.mark.parametrize("name", sorted(AUTHORIZE))
def test_authorize_url(name: str) -> None:
    base, scope, extra = AUTHORIZE[name]
    url = sso_platforms.authorize_url(sso_platforms.platform(name), CLIENT, "st4te")
    assert url.split("?")[0] == base
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert query == {
        "response_type": "code",
        "client_id": "the-id",
        "redirect_uri": REDIRECT,
        "scope": scope,
        "state": "st4te",
        **extra,
    }


FORM_TOKEN = {
    "Github": ("https://github.com/login/oauth/access_token", {}),
    "Microsoft": (
        "https://login.microsoftonline.com/common/oauth2/v2.0/token",
        {"grant_type": "authorization_code"},
    ),
    "Google": ("https://oauth2.googleapis.com/token", {"grant_type": "authorization_code"}),
    "Casdoor": (
        "https://door.example/api/login/oauth/access_token",
        {"grant_type": "authorization_code"},
    ),
}


@pytest.mark.parametrize("name", sorted(FORM_TOKEN))
def test_token_request_is_a_form(name: str) -> None:
    url, extra = FORM_TOKEN[name]
    chosen = sso_platforms.platform(name)
    request = sso_platforms.token_request(chosen, CLIENT, "c0de")
    assert (request.method, str(request.url)) == ("POST", url)
    assert request.headers["accept"] == "application/json"
    form = {k: v[0] for k, v in parse_qs(request.read().decode()).items()}
    assert form == {
        "client_id": "the-id",
        "client_secret": "the-secret",
        "code": "c0de",
        "redirect_uri": REDIRECT,
        "scope": chosen.scope,
        **extra,
    }


def test_dingtalk_token_request_is_json() -> None:
    chosen = sso_platforms.platform("Dingtalk")
    request = sso_platforms.token_request(chosen, CLIENT, "c0de")
    assert str(request.url) == "https://api.dingtalk.com/v1.0/oauth2/userAccessToken"
    assert json.loads(request.read()) == {
        "clientId": "the-id",
        "clientSecret": "the-secret",
        "code": "c0de",
        "grantType": "authorization_code",
    }
    assert sso_platforms.access_token(chosen, {"accessToken": "tok"}) == "tok"
    user = sso_platforms.user_request(chosen, CLIENT, "tok")
    assert str(user.url) == "https://api.dingtalk.com/v1.0/contact/users/me"
    assert user.headers["x-acs-dingtalk-access-token"] == "tok"
    assert sso_platforms.identity(chosen, {"unionId": "u1", "nick": "Ann"}) == ("u1", "Ann")
    assert chosen.code_field == "authCode"


USERS = {
    "Github": ("https://api.github.com/user", {"id": 42, "login": "octo"}, ("42", "octo")),
    "Microsoft": (
        "https://graph.microsoft.com/v1.0/me",
        {"id": "m-1", "displayName": "Ann B"},
        ("m-1", "Ann B"),
    ),
    "Google": (
        "https://www.googleapis.com/oauth2/v1/userinfo",
        {"id": "g-1", "name": "Ann"},
        ("g-1", "Ann"),
    ),
    "Casdoor": (
        "https://door.example/api/userinfo",
        {"sub": "c-1", "preferred_username": "ann"},
        ("c-1", "ann"),
    ),
}


@pytest.mark.parametrize("name", sorted(USERS))
def test_user_request_and_identity(name: str) -> None:
    url, answer, expected = USERS[name]
    chosen = sso_platforms.platform(name)
    token = sso_platforms.access_token(chosen, {"access_token": "tok"})
    request = sso_platforms.user_request(chosen, CLIENT, token)
    assert (request.method, str(request.url)) == ("GET", url)
    assert request.headers["authorization"] == "Bearer tok"
    assert sso_platforms.identity(chosen, answer) == expected


def test_missing_id_token_or_platform_is_an_error() -> None:
    github = sso_platforms.platform("Github")
    with pytest.raises(BadRequest, match="error occurred"):
        sso_platforms.identity(github, {"id": 0})
    with pytest.raises(BadRequest, match="bad_verification_code"):
        sso_platforms.access_token(github, {"error": "bad_verification_code"})
    with pytest.raises(BadRequest, match="invalid platform"):
        sso_platforms.platform("Myspace")
    with pytest.raises(BadRequest, match="sso_endpoint_name"):
        sso_platforms.authorize_url(
            sso_platforms.platform("Casdoor"), Client("i", "s", REDIRECT), "st"
        )


FOUND = oidc.Discovery(
    issuer="https://idp.example",
    authorization_endpoint="https://idp.example/auth",
    token_endpoint="https://idp.example/token",
    jwks_uri="https://idp.example/jwks",
    userinfo_endpoint="https://idp.example/me",
    algorithms=frozenset({"RS256"}),
    secret_in_form=False,
)


def test_oidc_authorize_and_token_requests() -> None:
    verifier, challenge = oidc.pkce_pair()
    fields = {"state": "st", "nonce": "no", "challenge": challenge}
    url = oidc.authorize_url(FOUND, "the id", REDIRECT, ["openid", "profile", "email"], fields)
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert query["scope"] == "openid profile email"
    assert (query["code_challenge_method"], query["nonce"], query["state"]) == ("S256", "no", "st")
    request = oidc.token_request(FOUND, ("the id", "s:cret"), "c0de", REDIRECT, verifier)
    form = {k: v[0] for k, v in parse_qs(request.read().decode()).items()}
    assert form == {
        "grant_type": "authorization_code",
        "code": "c0de",
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
    }
    basic = base64.b64decode(request.headers["authorization"].removeprefix("Basic ")).decode()
    assert basic == "the+id:s%3Acret"


@pytest.fixture(scope="module")
def key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _token(key: Any, **changes: Any) -> str:
    now = int(time.time())
    claims = {"iss": FOUND.issuer, "aud": "the-id", "sub": "s1", "iat": now, "exp": now + 60}
    claims.update(changes)
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, key, algorithm="RS256")


def _public(key: Any) -> jwt.PyJWK:
    return jwt.PyJWK(json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "RS256")


def test_id_token_accepted_with_the_right_key_issuer_and_audience(key: Any) -> None:
    claims = oidc.check_id_token(
        _token(key, nonce="n"), _public(key), "RS256", FOUND.issuer, "the-id"
    )
    assert (claims["sub"], claims["nonce"]) == ("s1", "n")


@pytest.mark.parametrize(
    "changes",
    [
        {"iss": "https://evil.example"},
        {"aud": "another-client"},
        {"aud": ["the-id", "another"], "azp": "another"},
        {"exp": int(time.time()) - 3600},
        {"sub": None},
    ],
)
def test_id_token_refused(key: Any, changes: dict[str, Any]) -> None:
    with pytest.raises(BadRequest, match="id_token"):
        oidc.check_id_token(_token(key, **changes), _public(key), "RS256", FOUND.issuer, "the-id")


def test_id_token_signed_by_another_key_is_refused(key: Any) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(BadRequest, match="Signature"):
        oidc.check_id_token(_token(other), _public(key), "RS256", FOUND.issuer, "the-id")


def test_nonce_must_match_the_flow(key: Any) -> None:
    oidc.check_nonce({"nonce": "n1"}, "n1")
    for claims in ({"nonce": "n2"}, {}):
        with pytest.raises(BadRequest, match="nonce"):
            oidc.check_nonce(claims, "n1")


def test_only_announced_asymmetric_algorithms(key: Any) -> None:
    assert oidc.signed_with(FOUND, _token(key)) == ("RS256", "")
    # Signed with the client secret, or not at all: anyone with the secret could forge it.
    hs = jwt.encode({"sub": "s1"}, "the-secret-of-32-bytes-or-longer!", algorithm="HS256")
    unsigned = jwt.encode({"sub": "s1"}, None, algorithm="none")
    announced = dataclasses.replace(FOUND, algorithms=frozenset({"RS256", "HS256"}))
    for token in (hs, unsigned):
        with pytest.raises(BadRequest, match="algorithm"):
            oidc.signed_with(announced, token)
