"""OpenID Connect for single sign-on: discovery, PKCE, and checking an ID token.

The provider's discovery document and published keys (JWKS) are fetched with the
server's HTTP client and kept for a few minutes; a token signed with a key id not
seen yet fetches the keys again (providers rotate them), at most once a minute.
An ID token is accepted only when its signature verifies with one of those keys
under an asymmetric algorithm the provider announces, its issuer is the provider's,
its audience holds this client, it has not expired, and its nonce is the one this
browser's flow sent.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, urlencode

import httpx
import jwt

from manifold.errors import BadRequest

# Asymmetric only: a symmetric ID token would be signed with the client secret,
# which anyone holding that secret could forge.
ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
KEPT_SECONDS = 300
REFETCH_SECONDS = 60
# Clocks of the provider and this server may differ a little.
LEEWAY_SECONDS = 60


@dataclass(frozen=True, slots=True)
class Discovery:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str
    algorithms: frozenset[str]
    # Whether the token endpoint takes the client secret in the form only.
    secret_in_form: bool


def pkce_pair() -> tuple[str, str]:
    """A code verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    return verifier, _b64(hashlib.sha256(verifier.encode()).digest())


def authorize_url(
    found: Discovery, client_id: str, redirect_uri: str, scopes: list[str], flow: dict[str, str]
) -> str:
    """Where the browser goes to sign in; ``flow`` holds state, nonce and challenge."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": " ".join(scopes),
        "state": flow["state"],
        "nonce": flow["nonce"],
        "code_challenge": flow["challenge"],
        "code_challenge_method": "S256",
    }
    separator = "&" if "?" in found.authorization_endpoint else "?"
    return found.authorization_endpoint + separator + urlencode(query)


def token_request(
    found: Discovery, client: tuple[str, str], code: str, redirect_uri: str, verifier: str
) -> httpx.Request:
    """The code exchange; the client authenticates with HTTP Basic unless the
    provider takes only the form (``client_secret_post``)."""
    client_id, secret = client
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
    }
    headers = {"Accept": "application/json"}
    if found.secret_in_form:
        form |= {"client_id": client_id, "client_secret": secret}
    else:
        headers["Authorization"] = _basic(client_id, secret)
    return httpx.Request("POST", found.token_endpoint, data=form, headers=headers)


class OidcClient:
    """Discovery documents and key sets of providers, fetched and kept a while."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http
        self._found: dict[str, tuple[float, Discovery]] = {}
        self._keys: dict[str, tuple[float, dict[str, Any]]] = {}

    async def discover(self, endpoint: str) -> Discovery:
        issuer = endpoint.rstrip("/")
        if not issuer.startswith(("https://", "http://")):
            raise BadRequest("sso_endpoint_name must be the provider's issuer URL")
        kept = self._found.get(issuer)
        if kept is not None and kept[0] > time.monotonic():
            return kept[1]
        doc = await self._json(httpx.Request("GET", issuer + "/.well-known/openid-configuration"))
        found = _discovery(doc, issuer)
        self._found[issuer] = (time.monotonic() + KEPT_SECONDS, found)
        return found

    async def exchange(self, request: httpx.Request) -> dict[str, Any]:
        return await self._json(request)

    async def userinfo(self, found: Discovery, access_token: str) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {access_token}", "Accept": "application/json"}
        return await self._json(httpx.Request("GET", found.userinfo_endpoint, headers=headers))

    async def verify(
        self, found: Discovery, raw: str, client_id: str, nonce: str
    ) -> dict[str, Any]:
        """The claims of ``raw`` if it is a valid ID token for this flow."""
        algorithm, kid = signed_with(found, raw)
        key = await self._key(found, kid)
        claims = check_id_token(raw, key, algorithm, found.issuer, client_id)
        check_nonce(claims, nonce)
        return claims

    async def _key(self, found: Discovery, kid: str) -> jwt.PyJWK:
        keys = await self._key_set(found.jwks_uri, refresh=False)
        if kid not in keys:
            keys = await self._key_set(found.jwks_uri, refresh=True)
        key = keys.get(kid)
        if key is None:
            raise BadRequest("id_token is signed with a key the provider does not publish")
        return key  # type: ignore[no-any-return]

    async def _key_set(self, uri: str, refresh: bool) -> dict[str, Any]:
        kept = self._keys.get(uri)
        now = time.monotonic()
        if kept is not None:
            age = now - kept[0]
            if age < (REFETCH_SECONDS if refresh else KEPT_SECONDS):
                return kept[1]
        keys = _usable_keys(await self._json(httpx.Request("GET", uri)))
        self._keys[uri] = (now, keys)
        return keys

    async def _json(self, request: httpx.Request) -> dict[str, Any]:
        try:
            response = await self._http.send(request, follow_redirects=False)
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise BadRequest(f"the provider did not answer {request.url.path}: {exc}") from None
        if response.status_code != 200 or not isinstance(body, dict):
            detail = body.get("error", "") if isinstance(body, dict) else ""
            raise BadRequest(f"the provider answered {response.status_code} {detail}".rstrip())
        return body


def signed_with(found: Discovery, raw: str) -> tuple[str, str]:
    """The algorithm and key id of an ID token, if the algorithm is one accepted."""
    try:
        header = jwt.get_unverified_header(raw)
    except jwt.PyJWTError as exc:
        raise BadRequest(f"invalid id_token: {exc}") from None
    algorithm = str(header.get("alg", ""))
    if algorithm not in ALGORITHMS & found.algorithms:
        raise BadRequest(f"id_token algorithm {algorithm!r} is not accepted")
    return algorithm, str(header.get("kid", ""))


def check_nonce(claims: dict[str, Any], nonce: str) -> None:
    if not secrets.compare_digest(str(claims.get("nonce", "")).encode(), nonce.encode()):
        raise BadRequest("id_token nonce does not match this sign-in")


def check_id_token(
    raw: str, key: jwt.PyJWK, algorithm: str, issuer: str, client_id: str
) -> dict[str, Any]:
    """Signature, issuer, audience and lifetime of an ID token (OpenID Connect 3.1.3.7)."""
    try:
        claims: dict[str, Any] = jwt.decode(
            raw,
            key,
            algorithms=[algorithm],
            audience=client_id,
            issuer=issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": ["iss", "aud", "exp", "iat", "sub"]},
        )
    except jwt.PyJWTError as exc:
        raise BadRequest(f"invalid id_token: {exc}") from None
    audience = claims["aud"]
    if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != client_id:
        raise BadRequest("invalid id_token: issued to another party")
    return claims


def _discovery(doc: dict[str, Any], issuer: str) -> Discovery:
    if str(doc.get("issuer", "")).rstrip("/") != issuer:
        raise BadRequest("the provider's issuer differs from sso_endpoint_name")
    try:
        methods = doc.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        return Discovery(
            issuer=str(doc["issuer"]),
            authorization_endpoint=str(doc["authorization_endpoint"]),
            token_endpoint=str(doc["token_endpoint"]),
            jwks_uri=str(doc["jwks_uri"]),
            userinfo_endpoint=str(doc.get("userinfo_endpoint") or ""),
            algorithms=frozenset(doc.get("id_token_signing_alg_values_supported") or ["RS256"]),
            secret_in_form="client_secret_basic" not in methods,
        )
    except KeyError as exc:
        raise BadRequest(f"the provider's discovery document lacks {exc}") from None


def _usable_keys(jwks: dict[str, Any]) -> dict[str, Any]:
    """Signing keys by id; a set with a single key also answers a token with no id."""
    keys: dict[str, Any] = {}
    for entry in jwks.get("keys") or []:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            keys[str(entry.get("kid", ""))] = jwt.PyJWK(entry)
        except jwt.PyJWTError:
            continue  # a key type this library cannot use: never picked
    if len(keys) == 1:
        keys.setdefault("", next(iter(keys.values())))
    return keys


def _basic(client_id: str, secret: str) -> str:
    """HTTP Basic client authentication: both parts form-encoded first (RFC 6749 2.3.1)."""
    pair = f"{quote_plus(client_id, safe='')}:{quote_plus(secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
