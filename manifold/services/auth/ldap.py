"""Checking a username and password against an LDAP directory (AList's LDAP login).

One check opens a connection to ``ldap_server``, binds as the manager (when both a
manager DN and password are set; else it searches anonymously), searches
``ldap_user_search_base`` with ``ldap_user_search_filter`` in which every ``%s`` is
the username escaped as a filter value (RFC 4515), and binds as the one entry found
with the password given. The library is synchronous: a check runs in ``LDAP_POOL``,
with timeouts on connecting and on every answer, so a silent server holds one
thread for a bounded time.

``ldaps://`` servers are reached over TLS and, with ``ldap_start_tls`` on,
``ldap://`` ones are upgraded by StartTLS before anything is sent. Certificates are
always verified against the system's authorities (``SSL_CERT_FILE`` names another
bundle), host name included; AList skips that check and so offers no setting to turn
it back off.

The name given must also be, exactly, a value of an attribute the filter compares with
``%s`` (``uid`` in ``(uid=%s)``): the directory matches ``Bob`` and `` bob`` to
``bob``, but here those are three different accounts, and another attribute that
happens to hold ``Bob`` (a ``cn``) is no login name.

Failures are ``errors.py`` classes: a wrong password or a username the directory does
not know is the user's (400); a server that cannot be reached, refuses the manager,
or finds the username more than once is the configuration's (500), and its detail
goes to the log, never to the anonymous caller.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import ssl
import warnings
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from manifold.concurrency import LDAP_POOL, run_in
from manifold.errors import BadRequest, ServerError, TemporaryFailure

with warnings.catch_warnings():
    # ldap3 2.9 reaches pyasn1 names that newer pyasn1 marks deprecated, once at import.
    warnings.simplefilter("ignore", DeprecationWarning)
    import ldap3
    from ldap3.core import exceptions as ldap_errors
    from ldap3.utils.conv import escape_filter_chars

log = logging.getLogger("manifold.ldap")

# Seconds to connect, and to wait for each answer.
TIMEOUT = 10
NOT_FOUND = "failed find user in LDAP: no entry matches the username"
INCORRECT = "password is incorrect"
SPELLING = "failed find user in LDAP: give the username as the directory spells it"
# An equality item of the filter whose value is the username: ``(uid=%s)``.
_LOGIN_ITEM = re.compile(r"\(\s*([A-Za-z0-9][A-Za-z0-9.;-]*)\s*=\s*%s\s*\)")


@dataclass(frozen=True, slots=True)
class Directory:
    """Where and how to look users up: the ``ldap_*`` settings."""

    server: str
    start_tls: bool = False
    manager_dn: str = ""
    manager_password: str = ""
    search_base: str = ""
    search_filter: str = "(uid=%s)"


def user_filter(template: str, username: str) -> str:
    """``template`` with every ``%s`` replaced by ``username`` as an escaped value:
    ``*``, ``(``, ``)``, ``\\`` and NUL cannot change the filter's shape."""
    return template.replace("%s", escape_filter_chars(username))


async def check_password(directory: Directory, username: str, password: str) -> None:
    """Return when ``username`` binds with ``password``; raise an ``errors.py`` class."""
    if not password:
        # An empty password would be an anonymous bind, which many servers accept.
        raise BadRequest("password is empty")
    await run_in(LDAP_POOL, _check, directory, username, password)


def _check(directory: Directory, username: str, password: str) -> None:
    server = _server(directory.server)
    dn = _find(server, directory, username)
    try:
        _close(_connection(server, directory, dn, password))
    except ldap_errors.LDAPInvalidCredentialsResult as exc:
        raise BadRequest(INCORRECT) from exc


def _find(server: ldap3.Server, directory: Directory, username: str) -> str:
    """The DN of the one entry the search filter finds for ``username``."""
    query = user_filter(directory.search_filter, username)
    try:
        conn = _connection(server, directory, directory.manager_dn, directory.manager_password)
    except ldap_errors.LDAPInvalidCredentialsResult as exc:
        log.error("LDAP refused the manager DN %r", directory.manager_dn)
        raise ServerError("failed to bind to LDAP as the manager") from exc
    try:
        conn.search(directory.search_base, query, ldap3.SUBTREE, attributes=[ldap3.ALL_ATTRIBUTES])
        entries = [e for e in conn.response or () if e.get("type") == "searchResEntry"]
    except ldap_errors.LDAPInvalidFilterError as exc:
        raise ServerError("ldap_user_search_filter is not a valid LDAP filter") from exc
    except ldap_errors.LDAPOperationResult as exc:
        log.error("LDAP search under %r failed: %s", directory.search_base, exc)
        raise ServerError(f"LDAP search failed: {exc.description}") from exc
    except ldap_errors.LDAPException as exc:
        raise _unreachable(directory.server, exc) from exc
    finally:
        _close(conn)
    if not entries:
        raise BadRequest(NOT_FOUND)
    if len(entries) > 1:
        log.error("LDAP search %r found %d entries, not one", query, len(entries))
        raise ServerError(
            f"LDAP search found {len(entries)} entries for this username; "
            "ldap_user_search_filter must match exactly one"
        )
    names = login_attributes(directory.search_filter)
    if not _spelled_as_stored(entries[0], names, username):
        raise BadRequest(SPELLING)
    return str(entries[0]["dn"])


def login_attributes(template: str) -> frozenset[str]:
    """The attributes ``template`` compares with the username, lowercased (attribute
    names are case-insensitive): ``uid`` and ``mail`` in ``(|(uid=%s)(mail=%s))``."""
    names = frozenset(name.lower() for name in _LOGIN_ITEM.findall(template))
    if not names:
        raise ServerError("ldap_user_search_filter must compare an attribute with %s: (uid=%s)")
    return names


def _spelled_as_stored(entry: dict[str, Any], names: frozenset[str], username: str) -> bool:
    """Whether a login attribute of the entry holds ``username`` exactly. Directories
    match names without regard to case or extra spaces, but accounts here are told
    apart by them: ``Bob`` must not log in as the local ``Bob`` with the directory's
    ``bob``, not even when the entry's ``cn`` happens to be ``Bob``."""
    for name, values in (entry.get("attributes") or {}).items():
        if name.lower() not in names:
            continue
        for value in values if isinstance(values, list) else [values]:
            if value == username:
                return True
    return False


def _connection(server: ldap3.Server, directory: Directory, dn: str, password: str) -> Any:
    """A bound connection: as ``dn`` when both ``dn`` and ``password`` are set, else
    anonymous; over StartTLS when the directory asks for it. A refused bind raises
    ``LDAPInvalidCredentialsResult``."""
    user, secret = (dn, password) if dn and password else (None, None)
    conn = ldap3.Connection(
        server, user=user, password=secret, receive_timeout=TIMEOUT, raise_exceptions=True
    )
    try:
        conn.open()
        if directory.start_tls:
            conn.start_tls()
        conn.bind()
    except ldap_errors.LDAPInvalidCredentialsResult:
        _close(conn)
        raise
    except ldap_errors.LDAPException as exc:
        _close(conn)
        raise _unreachable(directory.server, exc) from exc
    return conn


def _close(conn: Any) -> None:
    """Unbind if the connection still works, and close its socket either way (ldap3
    leaves the socket of a failed connect or handshake open)."""
    with contextlib.suppress(ldap_errors.LDAPException, OSError):
        conn.unbind()
    if conn.socket is not None:
        conn.socket.close()


def _unreachable(address: str, exc: Exception) -> TemporaryFailure:
    log.error("LDAP server %r: %s: %s", address, type(exc).__name__, exc)
    if "certificate verify failed" in str(exc).lower():
        return TemporaryFailure("failed to connect to LDAP: certificate verify failed")
    return TemporaryFailure("failed to connect to LDAP")


def _server(address: str) -> ldap3.Server:
    """``ldap://host[:port]``, ``ldaps://host[:port]`` or a bare ``host[:port]`` (plain
    LDAP, as AList takes it)."""
    url = urlsplit(address if "://" in address else "ldap://" + address)
    if url.scheme not in ("ldap", "ldaps") or not url.hostname:
        raise ServerError("ldap_server must be ldap://host[:port] or ldaps://host[:port]")
    secure = url.scheme == "ldaps"
    try:
        port = url.port or (636 if secure else 389)
    except ValueError as exc:
        raise ServerError("ldap_server has an invalid port") from exc
    return ldap3.Server(
        url.hostname, port=port, use_ssl=secure, tls=_VerifiedTls(url.hostname),
        connect_timeout=TIMEOUT, get_info=ldap3.NONE,
    )  # fmt: skip


class _VerifiedTls(ldap3.Tls):  # type: ignore[misc]
    """TLS with the standard library's own checks: the chain against the system's
    authorities and the name through ``check_hostname`` (ldap3's own name check relies
    on ``ssl.match_hostname``, deprecated and gone from newer Pythons)."""

    def __init__(self, hostname: str) -> None:
        super().__init__(validate=ssl.CERT_REQUIRED)
        self.hostname = hostname
        self.context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)

    def wrap_socket(self, connection: Any, do_handshake: bool = False) -> None:
        plain: socket.socket = connection.socket
        connection.socket = self.context.wrap_socket(
            plain, server_hostname=self.hostname, do_handshake_on_connect=do_handshake
        )
