"""The ASGI application: every route is listed in ``ROUTES`` below, and nowhere else."""

from __future__ import annotations

import hashlib
import logging
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import PlainTextResponse, Response
from starlette.types import Scope

from manifold import VERSION_STRING
from manifold.api import envelope
from manifold.api.asgi import CatchAll, FastBody, Headers, ManifoldApp, QuickBody, RouteTable
from manifold.api.deps import client_address, get_admin, header_in, header_of, scope_client
from manifold.api.guards import RequestGuard, ToldFirst
from manifold.api.observe import Observer
from manifold.api.openapi import no_body
from manifold.api.routes import (
    archive,
    auth,
    authn,
    download,
    fs,
    fs_write,
    me,
    metas,
    multipart,
    offline,
    openlist,
    ops,
    s3,
    search,
    settings,
    shares,
    site,
    sso,
    storages,
    tasks,
    torrents,
    users,
)
from manifold.config import Config
from manifold.container import Services
from manifold.errors import ManifoldError
from manifold.protocols.ftp import start_ftp
from manifold.protocols.s3.app import s3_app
from manifold.protocols.s3.multipart import keep_swept
from manifold.protocols.sftp import start_sftp
from manifold.protocols.webdav.hrefs import MOUNT as DAV_MOUNT
from manifold.protocols.webdav.server import DavMount, DavServer
from manifold.protocols.webdav.shared_locks import lock_store
from manifold.server import Listener
from manifold.services.runner import FINISH_SECONDS
from manifold.state.records import S3UploadRepo
from manifold.web import (
    ASSET_FOLDERS,
    PAGE_ADDRESSES,
    BasePath,
    WebPage,
    asset_folders,
    base_path_of,
    default_dist_dir,
    is_page,
)

log = logging.getLogger("manifold")


@dataclass(frozen=True, slots=True)
class Route:
    methods: tuple[str, ...]
    path: str
    endpoint: Callable[..., Any]
    admin: bool = False
    # The input of a handler that reads it by hand (``api.openapi``), for ``app.openapi()``.
    openapi: dict[str, Any] | None = None


GET, POST, PUT = ("GET",), ("POST",), ("PUT",)
GET_HEAD = ("GET", "HEAD")
ANY = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")

ROUTES: tuple[Route, ...] = (
    Route(ANY, "/ping", settings.ping),
    Route(GET, "/metrics", ops.metrics),
    Route(GET_HEAD, "/favicon.ico", site.favicon),
    Route(GET_HEAD, "/robots.txt", site.robots),
    Route(GET_HEAD, "/manifest.json", site.manifest),
    Route(GET_HEAD, "/i/{link_name}", site.plist),
    Route(POST, "/api/admin/message/get", site.message_get, admin=True),
    Route(
        POST,
        "/api/admin/message/send",
        site.message_send,
        admin=True,
        openapi=site.MESSAGE_INPUT,
    ),
    Route(ANY, "/api/share/list", shares.share_list),
    Route(GET, "/api/share/get", shares.share_get),
    Route(POST, "/api/share/create", shares.share_create),
    Route(POST, "/api/share/update", shares.share_update),
    Route(POST, "/api/share/delete", shares.share_delete),
    Route(POST, "/api/share/enable", shares.share_enable),
    Route(POST, "/api/share/disable", shares.share_disable),
    Route(
        POST, "/api/admin/scan/start", openlist.scan_start, admin=True, openapi=openlist.SCAN_INPUT
    ),
    Route(POST, "/api/admin/scan/stop", openlist.scan_stop, admin=True),
    Route(GET, "/api/admin/scan/progress", openlist.scan_progress, admin=True),
    Route(ANY, "/api/public/settings", settings.public_settings, openapi=no_body()),
    Route(ANY, "/api/public/archive_extensions", settings.archive_extensions),
    Route(ANY, "/api/public/offline_download_tools", settings.offline_download_tools),
    Route(POST, "/api/auth/login", auth.login),
    Route(POST, "/api/auth/login/hash", auth.login_hash),
    Route(POST, "/api/auth/login/ldap", auth.login_ldap),
    Route(GET, "/api/auth/logout", auth.logout),
    Route(POST, "/api/auth/2fa/generate", auth.generate_2fa),
    Route(POST, "/api/auth/2fa/verify", auth.verify_2fa),
    Route(GET, "/api/auth/sso", sso.start, openapi=sso.START_INPUT),
    Route(GET, "/api/auth/sso_callback", sso.callback, openapi=sso.CALLBACK_INPUT),
    Route(GET, "/api/auth/get_sso_id", sso.callback, openapi=sso.CALLBACK_INPUT),
    Route(GET, "/api/auth/sso_get_token", sso.callback, openapi=sso.CALLBACK_INPUT),
    Route(
        GET,
        "/api/authn/webauthn_begin_registration",
        authn.begin_registration,
        openapi=authn.SITE_INPUT,
    ),
    Route(
        POST,
        "/api/authn/webauthn_finish_registration",
        authn.finish_registration,
        openapi=authn.ANSWER_INPUT,
    ),
    Route(GET, "/api/authn/webauthn_begin_login", authn.begin_login),
    Route(POST, "/api/authn/webauthn_finish_login", authn.finish_login, openapi=authn.ANSWER_INPUT),
    Route(GET, "/api/authn/getcredentials", authn.credentials),
    Route(POST, "/api/authn/delete_authn", authn.delete),
    Route(GET, "/api/me", me.me, openapi=no_body("Authorization")),
    Route(POST, "/api/me/update", me.update_me),
    Route(GET, "/api/me/sshkey/list", me.list_keys),
    Route(POST, "/api/me/sshkey/add", me.add_key),
    Route(POST, "/api/me/sshkey/delete", me.delete_key),
    Route(GET, "/api/admin/user/list", users.list_users, admin=True),
    Route(GET, "/api/admin/user/get", users.get_user, admin=True),
    Route(POST, "/api/admin/user/create", users.create_user, admin=True),
    Route(POST, "/api/admin/user/update", users.update_user, admin=True),
    Route(POST, "/api/admin/user/delete", users.delete_user, admin=True),
    Route(POST, "/api/admin/user/cancel_2fa", users.cancel_2fa, admin=True),
    Route(POST, "/api/admin/user/del_cache", users.del_cache, admin=True),
    Route(GET, "/api/admin/user/sshkey/list", users.list_user_keys, admin=True),
    Route(POST, "/api/admin/user/sshkey/delete", users.delete_user_key, admin=True),
    Route(GET, "/api/admin/setting/list", settings.list_settings, admin=True),
    Route(GET, "/api/admin/setting/get", settings.get_setting, admin=True),
    Route(POST, "/api/admin/setting/save", settings.save_settings, admin=True),
    Route(POST, "/api/admin/setting/delete", settings.delete_setting, admin=True),
    Route(POST, "/api/admin/setting/default", settings.default_settings, admin=True),
    Route(POST, "/api/admin/setting/reset_token", settings.reset_token, admin=True),
    Route(POST, "/api/admin/setting/set_aria2", offline.set_aria2, admin=True),
    Route(POST, "/api/admin/setting/set_qbit", offline.set_qbit, admin=True),
    Route(POST, "/api/admin/setting/set_transmission", offline.set_transmission, admin=True),
    Route(GET, "/api/admin/meta/list", metas.list_metas, admin=True),
    Route(GET, "/api/admin/meta/get", metas.get_meta, admin=True),
    Route(POST, "/api/admin/meta/create", metas.create_meta, admin=True),
    Route(POST, "/api/admin/meta/update", metas.update_meta, admin=True),
    Route(POST, "/api/admin/meta/delete", metas.delete_meta, admin=True),
    Route(ANY, "/api/fs/list", shares.list_fs, openapi=fs.LIST_INPUT),
    Route(ANY, "/api/fs/get", shares.get_fs, openapi=fs.GET_INPUT),
    Route(ANY, "/api/fs/dirs", fs.dirs_fs, openapi=fs.DIRS_INPUT),
    Route(ANY, "/api/fs/other", fs.other_fs, openapi=fs.OTHER_INPUT),
    Route(ANY, "/api/fs/search", search.search_fs, openapi=search.SEARCH_INPUT),
    Route(ANY, "/api/fs/archive/meta", archive.archive_meta, openapi=archive.META_INPUT),
    Route(ANY, "/api/fs/archive/list", archive.archive_list, openapi=archive.LIST_INPUT),
    Route(POST, "/api/fs/archive/decompress", archive.decompress),
    Route(POST, "/api/fs/mkdir", fs_write.mkdir),
    Route(POST, "/api/fs/rename", fs_write.rename),
    Route(POST, "/api/fs/batch_rename", fs_write.batch_rename),
    Route(POST, "/api/fs/regex_rename", fs_write.regex_rename),
    Route(POST, "/api/fs/move", fs_write.move),
    Route(POST, "/api/fs/recursive_move", fs_write.recursive_move),
    Route(POST, "/api/fs/copy", fs_write.copy),
    Route(POST, "/api/fs/remove", fs_write.remove),
    Route(POST, "/api/fs/remove_empty_directory", fs_write.remove_empty_directory),
    Route(PUT, "/api/fs/put", fs_write.put, openapi=fs_write.PUT_INPUT),
    Route(PUT, "/api/fs/form", fs_write.form, openapi=fs_write.FORM_INPUT),
    Route(POST, "/api/fs/multipart/init", multipart.init, openapi=multipart.INIT_INPUT),
    Route(PUT, "/api/fs/multipart/chunk", multipart.chunk, openapi=multipart.CHUNK_INPUT),
    Route(GET, "/api/fs/multipart/status", multipart.status),
    Route(POST, "/api/fs/multipart/complete", multipart.complete, openapi=multipart.ID_INPUT),
    Route(POST, "/api/fs/multipart/abort", multipart.abort, openapi=multipart.ID_INPUT),
    Route(POST, "/api/fs/link", fs_write.link, admin=True),
    Route(POST, "/api/fs/get_direct_upload_info", fs_write.get_direct_upload_info),
    Route(POST, "/api/fs/torrent/parse", torrents.parse_torrent),
    Route(
        POST,
        "/api/fs/torrent/upload_parse",
        torrents.upload_parse,
        openapi=torrents.UPLOAD_INPUT,
    ),
    Route(POST, "/api/fs/torrent/rapid_upload", torrents.rapid_upload),
    Route(POST, "/api/fs/torrent/generate", torrents.generate),
    Route(
        POST,
        "/api/fs/add_offline_download",
        offline.add_offline_download,
        openapi=offline.ADD_INPUT,
    ),
    Route(GET, "/api/admin/storage/list", storages.list_storages, admin=True),
    Route(GET, "/api/admin/storage/get", storages.get_storage, admin=True),
    Route(POST, "/api/admin/storage/create", storages.create_storage, admin=True),
    Route(POST, "/api/admin/storage/update", storages.update_storage, admin=True),
    Route(POST, "/api/admin/storage/delete", storages.delete_storage, admin=True),
    Route(POST, "/api/admin/storage/enable", storages.enable_storage, admin=True),
    Route(POST, "/api/admin/storage/disable", storages.disable_storage, admin=True),
    Route(POST, "/api/admin/storage/load_all", storages.load_all, admin=True),
    Route(GET, "/api/admin/driver/list", storages.driver_list, admin=True),
    Route(GET, "/api/admin/driver/names", storages.driver_names, admin=True),
    Route(GET, "/api/admin/driver/info", storages.driver_info, admin=True),
    Route(POST, "/api/admin/index/build", search.build_index, admin=True),
    Route(
        POST,
        "/api/admin/index/update",
        search.update_index,
        admin=True,
        openapi=search.UPDATE_INDEX_INPUT,
    ),
    Route(POST, "/api/admin/index/stop", search.stop_index, admin=True),
    Route(POST, "/api/admin/index/clear", search.clear_index, admin=True),
    Route(GET, "/api/admin/index/progress", search.index_progress, admin=True),
    Route(ANY, "/s3", s3.elsewhere),
    Route(ANY, "/s3/{path:path}", s3.elsewhere),
    Route(GET_HEAD, "/sd/{share_id}", download.shared),
    Route(GET_HEAD, "/sd/{share_id}/{path:path}", download.shared),
    Route(GET_HEAD, "/d/{path:path}", download.download),
    Route(GET_HEAD, "/p/{path:path}", download.proxy),
    Route(GET_HEAD, "/ae/{path:path}", archive.member),
    Route(GET_HEAD, "/ad/{path:path}", archive.member),
    Route(GET_HEAD, "/ap/{path:path}", archive.member),
    Route(GET, "/api/admin/task/{kind}/undone", tasks.undone, admin=True),
    Route(GET, "/api/admin/task/{kind}/done", tasks.done, admin=True),
    Route(POST, "/api/admin/task/{kind}/info", tasks.info, admin=True),
    Route(POST, "/api/admin/task/{kind}/cancel", tasks.cancel, admin=True),
    Route(POST, "/api/admin/task/{kind}/delete", tasks.delete, admin=True),
    Route(POST, "/api/admin/task/{kind}/retry", tasks.retry, admin=True),
    Route(
        POST,
        "/api/admin/task/{kind}/cancel_some",
        tasks.cancel_some,
        admin=True,
        openapi=tasks.IDS_INPUT,
    ),
    Route(
        POST,
        "/api/admin/task/{kind}/delete_some",
        tasks.delete_some,
        admin=True,
        openapi=tasks.IDS_INPUT,
    ),
    Route(
        POST,
        "/api/admin/task/{kind}/retry_some",
        tasks.retry_some,
        admin=True,
        openapi=tasks.IDS_INPUT,
    ),
    Route(POST, "/api/admin/task/{kind}/clear_done", tasks.clear_done, admin=True),
    Route(POST, "/api/admin/task/{kind}/clear_succeeded", tasks.clear_succeeded, admin=True),
    Route(POST, "/api/admin/task/{kind}/retry_failed", tasks.retry_failed, admin=True),
    Route(GET, "/api/task/{kind}/undone", tasks.undone),
    Route(GET, "/api/task/{kind}/done", tasks.done),
    Route(POST, "/api/task/{kind}/info", tasks.info),
    Route(POST, "/api/task/{kind}/cancel", tasks.cancel),
    Route(POST, "/api/task/{kind}/delete", tasks.delete),
    Route(POST, "/api/task/{kind}/retry", tasks.retry),
    Route(POST, "/api/task/{kind}/cancel_some", tasks.cancel_some, openapi=tasks.IDS_INPUT),
    Route(POST, "/api/task/{kind}/delete_some", tasks.delete_some, openapi=tasks.IDS_INPUT),
    Route(POST, "/api/task/{kind}/retry_some", tasks.retry_some, openapi=tasks.IDS_INPUT),
    Route(POST, "/api/task/{kind}/clear_done", tasks.clear_done),
    Route(POST, "/api/task/{kind}/clear_succeeded", tasks.clear_succeeded),
    Route(POST, "/api/task/{kind}/retry_failed", tasks.retry_failed),
)


def reserved_prefixes() -> tuple[str, ...]:
    """The first path segments the server answers itself: every route's, WebDAV's, the
    page's asset folders' and its own addresses'. A storage mounted there could not be
    opened in the page (its address would reach the server's answer), so none may be."""
    paths = [route.path for route in ROUTES] + [DAV_MOUNT]
    paths += [f"/{folder}" for folder in ASSET_FOLDERS]
    return (PAGE_ADDRESSES, *sorted({"/" + path.split("/")[1] for path in paths}))


# Uploads stream their bodies to disk, so ``max_request_body`` does not apply to them;
# a .torrent sent as a form stops at ``MAX_TORRENT_BYTES`` of its own.
STREAMED_BODIES = frozenset(
    {"/api/fs/put", "/api/fs/form", "/api/fs/multipart/chunk", "/api/fs/torrent/upload_parse"}
)


def create_app(config: Config, services: Services | None = None, listeners: bool = True) -> FastAPI:
    """The application; ``listeners`` False leaves the FTP, SFTP and S3 ports to another
    process (a worker other than the first of ``--workers N``)."""
    services = services or Services.build(config)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await services.start()
        if services.created_admin_password:
            _announce_admin_password(services.created_admin_password)
        ftp = None
        if config.ftp_port and listeners:
            ftp = await start_ftp(services.ops, services.credentials, services.settings, config)
        beside = await start_s3(services) if config.s3_port and listeners else None
        sftp = None
        if config.sftp_port and listeners:
            sftp = await start_sftp(services.ops, services.credentials, services.settings, config)
        try:
            yield
        finally:
            if beside is not None:
                await beside.stop()
            if ftp is not None:
                await ftp.close()
            if sftp is not None:
                await sftp.stop()
            await services.stop(task_deadline=FINISH_SECONDS)

    app = ManifoldApp(
        title="Manifold",
        version=VERSION_STRING,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.services = services
    services.storages.reserved = reserved_prefixes()
    admin_only = [Depends(get_admin)]
    for route in ROUTES:
        # The table is the mechanism: an admin route refuses everyone else before its
        # handler runs, whatever the handler itself asks for.
        app.add_api_route(
            route.path,
            route.endpoint,
            methods=list(route.methods),
            dependencies=admin_only if route.admin else None,
            openapi_extra=route.openapi,
        )
    page = _web_page(config, services)
    if page is not None:
        for prefix, folder in asset_folders(page.dist, services.storages.registry):
            app.mount(prefix, folder)
    _install_error_handlers(app, services, page)
    app.add_middleware(RequestGuard, config=config, streamed=STREAMED_BODIES)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=config.cors_origins,
        allow_methods=["*"],
        allow_headers=["*"],
        allow_credentials="*" not in config.cors_origins,
    )
    app.add_middleware(CatchAll)
    base = base_path_of(config.site_url)
    if config.webdav:
        app.add_middleware(DavMount, dav=_dav_server(services, base))
    app.fast_bodies = {
        (base.rstrip("/") + path): body for path, body in _fast_bodies(services).items()
    }
    app.quick_bodies = {
        (base.rstrip("/") + path): body for path, body in _quick_bodies(services).items()
    }
    if base != "/":
        app.add_middleware(BasePath, base=base)
    if services.state.shared:
        app.add_middleware(ToldFirst, bus=services.state.bus)
    app.router.middleware_stack = RouteTable(app.router)
    if services.metrics is not None or config.log_format == "json":
        app.observer = Observer(
            app.answer,
            services.metrics,
            access=config.log_format == "json",
            fixed=frozenset(app.fast_bodies),
            dav_prefix=(base.rstrip("/") + "/dav") if config.webdav else None,
        )
    return app


def _dav_server(services: Services, base: str) -> DavServer:
    trusted = services.config.trusted_proxies
    return DavServer(
        services.ops,
        services.dav_props,
        services.credentials,
        services.settings,
        base,
        lambda request: client_address(request, trusted),
        lock_store(services.state),
    )


def s3_holder(config: Config) -> str:
    """The name this instance's multipart uploads carry: the same after a restart (its
    start forgets them), apart for each data folder on one host."""
    if config.instance_id:
        return config.instance_id[:191]
    folder = hashlib.sha256(str(config.data_dir.resolve()).encode()).hexdigest()[:8]
    return f"{socket.gethostname()[:160]}:{folder}"


async def start_s3(services: Services, port: int | None = None) -> Listener:
    """The S3 server on ``port`` (else ``s3_port``), its idle multipart uploads swept
    now and then every so often (``s3_upload_expiry_seconds``)."""
    config = services.config
    uploads = S3UploadRepo(services.engine)
    app = s3_app(
        services.ops, services.notes, services.settings, services.users,
        config.data_dir / "temp", uploads, s3_holder(config),
    )  # fmt: skip
    expiry = max(config.s3_upload_expiry_seconds, 1)
    await app.store.sweep(expiry, starting=True)
    listener = Listener(
        app,
        config,
        config.s3_port if port is None else port,
        chores=lambda: keep_swept(app.store, expiry),
    )
    await listener.start()
    return listener


def _web_page(config: Config, services: Services) -> WebPage | None:
    if not config.ui:
        return None
    dist = Path(config.dist_dir) if config.dist_dir else default_dist_dir()
    return WebPage(dist, services.settings, base_path_of(config.site_url))


def _announce_admin_password(password: str) -> None:
    # Printed once, to the terminal that started the server, never to the log.
    sys.stdout.write(
        f"Successfully created the admin user and the initial password is: {password}\n"
    )
    sys.stdout.flush()


def _install_error_handlers(app: FastAPI, services: Services, page: WebPage | None) -> None:
    async def on_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ManifoldError)
        return envelope.error(exc.code, services.settings.mask_private(exc.message), exc.data)

    async def on_invalid(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return envelope.error(400, describe_validation(exc))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        path = request.url.path
        if (
            page is not None
            and exc.status_code == 404
            and request.method in ("GET", "HEAD")
            and is_page(path)
        ):
            return page.response(path, request.method)  # the frontend routes it
        if path.startswith("/api/") or path == "/api":
            return envelope.error(exc.status_code, str(exc.detail).lower())
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code)

    app.add_exception_handler(ManifoldError, on_error)
    app.add_exception_handler(RequestValidationError, on_invalid)
    app.add_exception_handler(HTTPException, on_http)


def describe_validation(exc: RequestValidationError) -> str:
    """One clear sentence per problem, naming the field as the client spelled it."""
    parts = []
    for problem in exc.errors():
        if problem.get("type") == "json_invalid":
            parts.append(
                f"body: invalid JSON ({problem.get('ctx', {}).get('error', 'decode error')})"
            )
            continue
        location = [str(p) for p in problem.get("loc", ()) if p not in ("body", "query")]
        field = ".".join(location) or "body"
        parts.append(f"{field}: {problem.get('msg', 'invalid')}")
    return "; ".join(parts) or "request invalid"


def _fast_bodies(services: Services) -> dict[str, FastBody]:
    async def public_settings(_: Scope) -> bytes:
        return services.settings.public_envelope()

    async def current_user(scope: Scope) -> bytes | None:
        if scope["method"] != "GET":
            return None
        client = scope_client(scope, services.config.trusted_proxies)
        try:
            caller = await services.auth.authenticate(header_of(scope, b"authorization"), client)
        except ManifoldError:
            return None  # the route answers the error
        return me.ME_BODIES.of(caller.user)

    return {"/api/public/settings": public_settings, "/api/me": current_user}


def _quick_bodies(services: Services) -> dict[str, QuickBody]:
    """``_fast_bodies`` where no waiting is needed: a token whose checks are all in
    memory; anything else (a first sight, a guest, an error) takes the ASGI call.
    They are given the request's headers only: nothing else decides these answers."""

    def public_settings(_: Headers) -> bytes:
        return services.settings.public_envelope()

    def current_user(headers: Headers) -> bytes | None:
        try:
            user = services.auth.known_user(header_in(headers, b"authorization"))
        except ManifoldError:
            return None  # the route answers the error
        return None if user is None else me.ME_BODIES.of(user)

    return {"/api/public/settings": public_settings, "/api/me": current_user}
