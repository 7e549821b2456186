"""The WebDAV server at ``/dav``: who is asking, which handler answers, and how an
error is answered.

Credentials come from ``Credentials`` (HTTP Basic, or ``Bearer`` with the admin
token), as AList's WebDAV takes them: a request without any (or with wrong ones)
answers 401 with ``WWW-Authenticate: Basic realm="alist"``, except OPTIONS, which
proceeds as the guest; a disabled user or one without bit 8 answers 403, a locked
out address or name 429.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from manifold.errors import ManifoldError, Unauthorized
from manifold.protocols.webdav import locking, reading, render, writing
from manifold.protocols.webdav.exchange import Exchange, Shared
from manifold.protocols.webdav.hrefs import MOUNT, Hrefs
from manifold.protocols.webdav.locks import LockStore, MemoryLockStore
from manifold.protocols.webdav.statuses import DavError, status_of
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.credentials import Credentials
from manifold.services.auth.service import Caller
from manifold.services.fs.ops import GuardedOps
from manifold.services.fs.props import DeadProps

log = logging.getLogger("manifold.webdav")
REALM = 'Basic realm="alist"'
Handler = Callable[[Shared, Exchange], Awaitable[Response]]


HANDLERS: dict[str, Handler] = {
    "OPTIONS": reading.options,
    "PROPFIND": reading.propfind_,
    "GET": reading.get,
    "HEAD": reading.head,
    "POST": reading.get,
    "PUT": writing.put,
    "MKCOL": writing.mkcol,
    "DELETE": writing.delete,
    "COPY": writing.copy,
    "MOVE": writing.move,
    "PROPPATCH": writing.proppatch,
    "LOCK": locking.lock,
    "UNLOCK": locking.unlock,
}


class DavServer:
    """The ASGI application serving ``/dav`` (the path it is given starts with it)."""

    def __init__(
        self,
        ops: GuardedOps,
        props: DeadProps,
        credentials: Credentials,
        settings: SettingsService,
        site_base: str,
        client_of: Callable[[Request], str],
        locks: LockStore | None = None,
    ) -> None:
        self.shared = Shared(ops, props, locks or MemoryLockStore(), Hrefs(site_base))
        self._credentials = credentials
        self._settings = settings
        self._client_of = client_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            response = await self._answer(request)
        except DavError as exc:
            response = _error(exc.status, exc.condition, str(exc))
        except ManifoldError as exc:
            status = status_of(exc)
            response = _error(status, "", self._settings.mask_private(exc.message))
        await response(scope, receive, send)

    async def _answer(self, request: Request) -> Response:
        handler = HANDLERS.get(request.method)
        if handler is None:
            raise DavError(405)
        caller = await self._caller(request)
        if caller is None:
            return reading.bare_options()
        path = self.shared.hrefs.path_of(request.scope["path"])
        return await handler(self.shared, Exchange(request, caller, path))

    async def _caller(self, request: Request) -> Caller | None:
        """Who asks; for an OPTIONS without working credentials the guest, or None
        when the guest may not come in either (the answer then names no path)."""
        client = self._client_of(request)
        header = request.headers.get("authorization", "")
        try:
            return await self._credentials_of(header, client)
        except ManifoldError:
            if request.method != "OPTIONS":
                raise
        try:
            return await self._credentials.guest("webdav", client)
        except ManifoldError:
            return None

    async def _credentials_of(self, header: str, client: str) -> Caller:
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return await self._credentials.bearer(value.strip(), client, "webdav")
        if scheme.lower() != "basic":
            raise Unauthorized()
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise Unauthorized() from None
        try:
            text = decoded.decode()
        except UnicodeDecodeError:
            text = decoded.decode("latin-1")
        username, _, password = text.partition(":")
        return await self._credentials.password(username, password, client, "webdav")


def _error(status: int, condition: str, message: str) -> Response:
    headers = {"WWW-Authenticate": REALM} if status == 401 else {}
    if condition:
        return Response(render.error_body(condition), status, headers, media_type="application/xml")
    return Response(message.encode() + b"\n", status, headers, media_type="text/plain")


class DavMount:
    """Sends requests for ``/dav`` and below to the WebDAV server, the rest on; inside
    the site's base path, before the API's routing and its body limits (a PUT
    streams its body into the tree)."""

    def __init__(self, app: ASGIApp, dav: ASGIApp) -> None:
        self.app = app
        self.dav = dav

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and (path == MOUNT or path.startswith(MOUNT + "/")):
            await self.dav(scope, receive, send)
            return
        await self.app(scope, receive, send)
