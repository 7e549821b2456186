"""The S3 server as an ASGI app: authenticate, route by method and query, render errors.

Requests are path-style (``/bucket/key``). Every request runs as the admin user with
the protocol ``s3``, which is AList's "no user, full access", held in its bucket's
folder (``Caller.rooted``: the file services treat it as a base path, links and
Aliases included), but without the two bits that pass folder passwords and show
hidden entries (``key_holder``). AList applies neither rule to S3; here a folder
password and a hide rule hold on every protocol alike: S3 has no way to give a
password, so a folder behind one answers AccessDenied to every request, and hidden
entries are left out of listings (and refused by exact name, as the API refuses them).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from manifold.errors import ManifoldError
from manifold.models import Perm, User
from manifold.protocols.s3 import copies, listings, objects, sigv4, uploads
from manifold.protocols.s3.buckets import Bucket, parse_buckets
from manifold.protocols.s3.context import XML, Context
from manifold.protocols.s3.errors import S3Error, from_manifold
from manifold.protocols.s3.multipart import LocalMultipartStore, MultipartStore
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.service import Caller
from manifold.services.auth.users import UserService
from manifold.services.fs.notes import ObjectNotes
from manifold.services.fs.ops import GuardedOps
from manifold.state.records import S3UploadRepo

log = logging.getLogger("manifold.s3")

Handler = Callable[[Context], Awaitable[Response]]

# What the key pair may not do that the admin may: pass folder passwords, see hidden entries.
_NOT_FOR_KEYS = Perm.ACCESS_WITHOUT_PASSWORD | Perm.SEE_HIDDEN

# Bucket and object subresources this server does not keep (ACLs, policies, tags ...).
UNSUPPORTED = frozenset(
    {
        "acl",
        "policy",
        "cors",
        "lifecycle",
        "website",
        "tagging",
        "replication",
        "notification",
        "logging",
        "encryption",
        "object-lock",
        "retention",
        "legal-hold",
        "torrent",
        "requestPayment",
        "accelerate",
        "ownershipControls",
        "publicAccessBlock",
        "analytics",
        "metrics",
        "inventory",
        "intelligent-tiering",
        "restore",
        "select",
        "attributes",
    }
)


class S3App:
    def __init__(
        self,
        ops: GuardedOps,
        notes: ObjectNotes,
        settings: SettingsService,
        users: UserService,
        store: MultipartStore,
    ) -> None:
        self._ops = ops
        self._notes = notes
        self._settings = settings
        self._users = users
        self.store = store
        self._buckets: tuple[str, dict[str, Bucket]] = ("", {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        request_id = secrets.token_hex(8).upper()
        try:
            response = await self._handle(request)
        except S3Error as exc:
            response = _error(exc, request, request_id)
        except ManifoldError as exc:
            response = _error(from_manifold(exc, _path(request)), request, request_id)
        response.headers["x-amz-request-id"] = request_id
        await response(scope, receive, send)

    async def _handle(self, request: Request) -> Response:
        keys = sigv4.Keys(
            self._settings.get("s3_access_key_id"), self._settings.get("s3_secret_access_key")
        )
        raw_path = request.scope.get("raw_path") or _path(request).encode()
        signed = sigv4.verify(
            request.method,
            raw_path.decode("latin-1").partition("?")[0],
            request.scope.get("query_string", b"").decode("latin-1"),
            request.headers,
            keys,
        )
        _, _, rest = _path(request).partition("/")
        bucket_name, _, key = rest.partition("/")
        ctx = Context(
            request=request,
            ops=self._ops,
            notes=self._notes,
            keys=Caller(key_holder(await self._users.admin()), _client(request), protocol="s3"),
            store=self.store,
            buckets=self._current_buckets(),
            signed=signed,
            bucket_name=bucket_name,
            key=key,
        )
        return await route(ctx)(ctx)

    def _current_buckets(self) -> dict[str, Bucket]:
        text = self._settings.get("s3_buckets", "[]")
        if self._buckets[0] != text:
            self._buckets = (text, parse_buckets(text))
        return self._buckets[1]


def key_holder(admin: User) -> User:
    """The user S3 requests act as: the admin, less ``_NOT_FOR_KEYS``."""
    return replace(admin, permission=admin.permission & ~_NOT_FOR_KEYS)


def route(ctx: Context) -> Handler:
    """The handler of a request, by its method, its query and what its path names."""
    method = ctx.request.method
    if any(ctx.has(name) for name in UNSUPPORTED):
        return _not_implemented
    if not ctx.bucket_name:
        return listings.list_buckets if method == "GET" else _not_allowed
    if not ctx.key:
        return _bucket_route(ctx, method)
    return _object_route(ctx, method)


def _bucket_route(ctx: Context, method: str) -> Handler:
    if method == "GET":
        for name, handler in (
            ("uploads", uploads.list_uploads),
            ("location", listings.location),
            ("versioning", listings.versioning),
        ):
            if ctx.has(name):
                return handler
        return (
            listings.list_objects_v2 if ctx.param("list-type") == "2" else listings.list_objects_v1
        )
    if method == "POST" and ctx.has("delete"):
        return listings.delete_objects
    table: dict[str, Handler] = {"HEAD": listings.head_bucket, "PUT": listings.create_bucket}
    return table.get(method, _not_implemented if method == "DELETE" else _not_allowed)


def _object_route(ctx: Context, method: str) -> Handler:
    upload = ctx.has("uploadId")
    if method == "GET":
        return uploads.list_parts if upload else objects.get_object
    if method == "HEAD":
        return objects.head_object
    if method == "PUT":
        if upload and ctx.header("x-amz-copy-source"):
            return copies.upload_part_copy
        if upload:
            return uploads.upload_part
        return copies.copy_object if ctx.header("x-amz-copy-source") else objects.put_object
    if method == "POST":
        if ctx.has("uploads"):
            return uploads.create_upload
        return uploads.complete_upload if upload else _not_allowed
    if method == "DELETE":
        return uploads.abort_upload if upload else objects.delete_object
    return _not_allowed


async def _not_implemented(ctx: Context) -> Response:
    raise S3Error(
        "NotImplemented",
        "A header or query you provided implies functionality that is not implemented",
        ctx.resource,
    )


async def _not_allowed(ctx: Context) -> Response:
    raise S3Error(
        "MethodNotAllowed",
        "The specified method is not allowed against this resource.",
        ctx.resource,
    )


def _client(request: Request) -> str:
    return request.client.host if request.client else ""


def _error(exc: S3Error, request: Request, request_id: str) -> Response:
    if exc.status >= 500:
        log.warning("S3 %s %s: %s", request.method, _path(request), exc.message)
    resource = exc.resource or _path(request)
    exc.resource = resource
    body = b"" if request.method == "HEAD" else exc.body(request_id)
    headers = {"Content-Range": "bytes */*"} if exc.code == "InvalidRange" else {}
    if _announces_body(request):
        # The body may be unread (a client that sent ``Expect: 100-continue`` never sent
        # it): the connection cannot carry another request, so it ends with this answer.
        headers["Connection"] = "close"
    return Response(body, status_code=exc.status, headers=headers, media_type=XML)


def _announces_body(request: Request) -> bool:
    length = request.headers.get("content-length", "0")
    return "transfer-encoding" in request.headers or length not in ("", "0")


def _path(request: Request) -> str:
    # The decoded path as the server got it: ``request.url`` re-parses it and would
    # take a decoded ``#`` or ``?`` in a key for the start of a fragment or a query.
    return str(request.scope["path"])


def s3_app(
    ops: GuardedOps,
    notes: ObjectNotes,
    settings: SettingsService,
    users: UserService,
    temp: Path,
    uploads: S3UploadRepo,
    holder: str,
) -> S3App:
    """The S3 server over the file services, its multipart parts under ``temp`` and
    their records in ``uploads``, naming this server ``holder``."""
    store = LocalMultipartStore(temp / "s3-multipart", uploads, holder)
    return S3App(ops, notes, settings, users, store)
