"""A storage's options checked and turned into where and how to log in."""

from __future__ import annotations

import codecs
import posixpath
import ssl
from urllib.parse import urlsplit

from manifold.drivers.ftp.meta import CONFIG, TLS_MODES, Addition
from manifold.drivers.ftp.protocol import Endpoint
from manifold.errors import InvalidRequest

CONNECT_SECONDS = 10.0


def clean_root(text: str) -> str:
    root = text.strip() or "/"
    return posixpath.normpath(root) if root != "/" else root


def endpoint(options: Addition) -> Endpoint:
    host, port = _address(options.address)
    encoding = options.encoding.strip() or "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise InvalidRequest(f"unknown encoding: {encoding}") from None
    return Endpoint(
        host=host,
        port=port,
        user=options.username,
        password=options.password,
        encoding=encoding,
        tls=_tls_context(options),
        connect_timeout=CONNECT_SECONDS,
        io_timeout=CONFIG.idle_timeout,
    )


def _address(text: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port``; the text itself is never echoed, in
    case someone typed credentials into it."""
    text = text.strip()
    if not text or "://" in text or "@" in text:
        raise InvalidRequest("address must be host:port")
    try:
        parts = urlsplit("//" + text)
        host, port = parts.hostname, parts.port or 21
    except ValueError:
        raise InvalidRequest("address must be host:port") from None
    if not host:
        raise InvalidRequest("address must be host:port")
    return host, port


def _tls_context(options: Addition) -> ssl.SSLContext | None:
    if options.tls not in TLS_MODES:
        raise InvalidRequest(f"tls must be one of {', '.join(TLS_MODES)}")
    if options.tls == "none":
        return None
    context = ssl.create_default_context()
    if options.tls_insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
