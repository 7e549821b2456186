"""The web interface: the OpenList frontend's built files, served unchanged.

The frontend is a dependency fetched at install (``scripts/_setup.sh`` places the npm
package's ``dist/`` in ``web/dist``), never part of this repository. Manifold serves
its asset folders with long-lived caching and answers every other page address with
``index.html``, into which it writes what the frontend reads at start: its config
object (CDN and base path, main colour), the site title, favicon and logo, and the
admin's custom head and body. The page is rebuilt whenever the settings change.

Two things differ from AList on purpose: the title, favicon and logo are escaped
(AList writes them raw, so a title could carry a script), and the manage pages never
get the custom head and body (as AList), so a broken custom script cannot lock the
admin out of the page that removes it.
"""

from __future__ import annotations

import html
import json
import logging
import os
from pathlib import Path
from urllib.parse import quote, urlsplit

import anyio.to_thread
import orjson
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from manifold.drivers.registry import DriverRegistry
from manifold.services.admin.settings import SettingsService
from manifold.web_i18n import LanguagePacks

log = logging.getLogger("manifold.web")

FRONTEND_PACKAGE = "@openlist-frontend/openlist-frontend"
FRONTEND_VERSION = "4.2.6"
# Folders of content-hashed (or versioned) files: cached for 180 days, as AList does.
ASSET_FOLDERS = ("assets", "images", "streamer", "static")
LONG_CACHE = "public, max-age=15552000"
# Answered by the API or a protocol, never by the page.
NOT_PAGES = ("/api/", "/d/", "/p/", "/ad/", "/ap/", "/ae/", "/dav/", "/s3/", "/i/")
MANAGE_PREFIX = "/@manage"
# The page's own addresses (``/@login``, ``/@manage``, ``/@s/<id>``) all start so.
PAGE_ADDRESSES = "/@*"
_MISSING = (
    "<!doctype html><title>Manifold</title><p>The web interface is not installed. "
    "Run <code>scripts/start</code> (which fetches it), or set <code>dist_dir</code>. "
    "The API works without it.</p>"
)


def default_dist_dir() -> Path:
    """Where the install step puts the frontend: ``web/dist`` beside the package."""
    return Path(__file__).resolve().parent.parent / "web" / "dist"


def base_path_of(site_url: str) -> str:
    """The path the site is served under, from ``site_url``: ``/`` or ``/x`` (no slash)."""
    path = urlsplit(site_url).path if "://" in site_url else ""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    return "/" + "/".join(parts)


class WebPage:
    """``index.html`` with the settings written in, rebuilt when the settings change."""

    def __init__(self, dist: Path, settings: SettingsService, base_path: str) -> None:
        self.dist = dist
        self._settings = settings
        self._base = base_path
        index = dist / "index.html"
        self._raw = index.read_text(encoding="utf-8") if index.is_file() else ""
        if not self._raw:
            log.warning("web interface not found in %s; only the API is served", dist)
        self._built_for = -1
        self._page = b""
        self._manage = b""

    @property
    def installed(self) -> bool:
        return bool(self._raw)

    def html(self, path: str) -> bytes:
        if not self._raw:
            return _MISSING.encode()
        if self._built_for != self._settings.version:
            self._build()
        return self._manage if path.startswith(MANAGE_PREFIX) else self._page

    def _build(self) -> None:
        get = self._settings.get
        cdn = "" if self._base == "/" else self._base
        manifest = "/manifest.json" if self._base == "/" else self._base + "/manifest.json"
        text = _replace_once(
            self._raw,
            {
                "cdn: undefined": f"cdn: {_js(cdn)}",
                "base_path: undefined": f"base_path: {_js(self._base)}",
                "main_color: undefined": f"main_color: {_js(get('main_color'))}",
                'href="/manifest.json"': f'href="{html.escape(manifest)}"',
                "https://res.oplist.org/logo/logo.svg": html.escape(get("favicon")),
                "https://res.oplist.org/logo/logo.png": html.escape(get("logo").split("\n")[0]),
                "<title>Loading...</title>": f"<title>{html.escape(get('site_title'))}</title>",
            },
        )
        self._manage = text.encode()
        custom = {
            "<!-- customize head -->": get("customize_head"),
            "<!-- customize body -->": get("customize_body"),
        }
        self._page = _replace_once(text, custom).encode()
        self._built_for = self._settings.version

    def response(self, path: str, method: str) -> Response:
        body = b"" if method == "HEAD" else self.html(path)
        headers = {"cache-control": "no-cache"}
        if method == "HEAD":
            headers["content-length"] = str(len(self.html(path)))
        return Response(body, media_type="text/html; charset=utf-8", headers=headers)


def manifest_json(settings: SettingsService, base_path: str) -> bytes:
    """The web app manifest, so the site installs as an app that opens at its base path."""
    logo = settings.get("logo").split("\n")[0]
    icon = {"src": logo, "sizes": "512x512", "type": "image/png"}
    return orjson.dumps(
        {
            "display": "standalone",
            "scope": base_path,
            "start_url": base_path,
            "name": settings.get("site_title"),
            "icons": [icon],
        }
    )


class Assets(StaticFiles):
    """One of the frontend's asset folders, cached long (their names change with content).
    The language packs among them are answered by ``packs``, with Manifold's storage form
    texts filled in, and never cached long: those texts change with Manifold, not with
    the pack's name."""

    def __init__(self, directory: Path, packs: LanguagePacks | None = None) -> None:
        super().__init__(directory=directory, follow_symlink=False)
        self.packs = packs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.packs is not None and scope["type"] == "http":
            body = await anyio.to_thread.run_sync(self.packs.answer, self.get_path(scope))
            if body is not None:
                headers = {"cache-control": "no-cache"}
                answer = Response(body, media_type="text/javascript", headers=headers)
                await answer(scope, receive, send)
                return

        async def cached(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                headers = [*message.get("headers", ()), (b"cache-control", LONG_CACHE.encode())]
                message = {**message, "headers": headers}
            await send(message)

        await super().__call__(scope, receive, cached)


def asset_folders(dist: Path, registry: DriverRegistry) -> list[tuple[str, Assets]]:
    """Mounts for the asset folders that exist in ``dist``; ``registry``'s drivers give
    the texts the language packs (in ``assets``) are served with."""
    return [
        (
            f"/{name}",
            Assets(dist / name, LanguagePacks(dist / name, registry) if name == "assets" else None),
        )
        for name in ASSET_FOLDERS
        if os.path.isdir(dist / name)
    ]


def is_page(path: str) -> bool:
    """Whether an unmatched address is a page of the frontend (not an API answer)."""
    return not any(path.startswith(prefix) or path == prefix[:-1] for prefix in NOT_PAGES)


def _replace_once(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        text = text.replace(old, new, 1)
    return text


def _js(value: str) -> str:
    """A JavaScript string literal that cannot close the surrounding script element."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e")


class BasePath:
    """Serves the whole site under ``site_url``'s path (``/x``): ``/x/...`` is routed as
    ``/...``, ``/`` redirects to ``/x``, and anything else is not found."""

    def __init__(self, app: ASGIApp, base: str) -> None:
        self.app = app
        self.base = base
        self._raw = quote(base).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path == self.base or path.startswith(self.base + "/"):
            raw: bytes = scope.get("raw_path") or path.encode()
            if raw.startswith(self._raw):
                raw = raw[len(self._raw) :] or b"/"
            inner = {**scope, "path": path[len(self.base) :] or "/", "raw_path": raw}
            await self.app(inner, receive, send)
            return
        if scope["type"] != "http":
            return
        if path == "/":
            answer: Response = RedirectResponse(self.base, status_code=302)
        else:
            answer = PlainTextResponse("Not Found", status_code=404)
        await answer(scope, receive, send)
