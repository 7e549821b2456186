"""The storage account an endpoint option names, and the URL its blob service is at.

OpenList takes the account name from the host (``name.blob.core.windows.net``) and a
bare name as the public cloud's account. An endpoint whose path names the account
(``http://127.0.0.1:10000/devstoreaccount1``: Azurite, Azure Stack, an IP address)
is path-style: there the name is the path's first segment, which OpenList would miss.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from manifold.errors import InvalidRequest

from .meta import ENDPOINT_PLACEHOLDER

_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")
# Container names: 3 to 63 lowercase letters, digits and single hyphens, starting and
# ending with a letter or a digit.
_CONTAINER = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}")


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    url: str  # the blob service's URL, without a trailing slash


def account_of(endpoint: str) -> Account:
    """The account ``endpoint`` names; ``InvalidRequest`` saying what is wrong."""
    text = endpoint.strip()
    if not text or text == ENDPOINT_PLACEHOLDER:
        raise InvalidRequest("endpoint is required")
    if re.fullmatch(r"[A-Za-z0-9]+", text):  # a bare account name
        name = text.lower()
        return Account(_checked(name), f"https://{name}.blob.core.windows.net")
    parts = urlsplit(text if "://" in text else f"https://{text}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest(f"endpoint is not an http(s) URL: {text}")
    path = parts.path.strip("/")
    if "/" in path:
        raise InvalidRequest(f"endpoint's path must be the account name alone: {text}")
    name = (path or parts.hostname.split(".")[0]).lower()
    base = urlunsplit((parts.scheme, parts.netloc, f"/{path}" if path else "", "", ""))
    return Account(_checked(name), base)


def _checked(name: str) -> str:
    if not _ACCOUNT.fullmatch(name):
        raise InvalidRequest(
            f"invalid storage account name {name!r}: 3 to 24 lowercase letters and digits"
        )
    return name


def container_of(option: str) -> str:
    """The container option without the slashes OpenList trims; checked as Azure does."""
    name = option.strip("/\\ ")
    if not name:
        raise InvalidRequest("container_name is required")
    if not _CONTAINER.fullmatch(name):
        raise InvalidRequest(
            f"invalid container name {name!r}: 3 to 63 lowercase letters, digits and hyphens"
        )
    return name


def key_checked(key: str) -> str:
    """The access key, refused early unless it is base64 as every account key is (the
    client library would fail on it only when signing the first request)."""
    key = key.strip()
    if not key:
        raise InvalidRequest("access_key is required")
    try:
        base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest("access_key is not an account key (base64 text)") from exc
    return key
