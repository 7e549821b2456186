"""The site's small fixed addresses: favicon, robots.txt, the web app manifest, the iOS
install list (``/i/<link>.plist``), and the admin message box.

They answer as AList v3.45 does; the plist escapes what it writes (AList only swaps
angle brackets, so a name could still break out of its element).
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape

from fastapi import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from manifold.api.binding import bind
from manifold.api.deps import ServicesDep
from manifold.api.envelope import error
from manifold.api.openapi import bound
from manifold.api.schemas import RequestBody
from manifold.web import base_path_of, manifest_json

# Go's SafeAtob: base64 with "-", "_" and "." standing for "+", "/" and "=".
_SAFE_B64 = str.maketrans({"-": "+", "_": "/", ".": "="})


async def favicon(services: ServicesDep) -> Response:
    return RedirectResponse(services.settings.get("favicon"), status_code=302)


async def robots(services: ServicesDep) -> Response:
    return PlainTextResponse(services.settings.get("robots_txt"))


async def manifest(services: ServicesDep) -> Response:
    base = base_path_of(services.config.site_url)
    return Response(
        manifest_json(services.settings, base),
        media_type="application/json",
        headers={"cache-control": "public, max-age=3600"},
    )


async def plist(link_name: str) -> Response:
    """The manifest iOS reads to install an app package from a link the page builds."""
    encoded = link_name.removesuffix(".plist").translate(_SAFE_B64)
    try:
        decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        return error(400, f"illegal base64 data: {exc}")
    parts = decoded.split("/")
    if len(parts) != 2:
        return error(400, "malformed link")
    try:
        url, full_name = (unquote(part, errors="strict") for part in parts)
    except UnicodeDecodeError:
        return error(400, "malformed link")
    name, identifier = full_name, "ci.nn." + quote(full_name, safe="")
    if "@" in full_name:
        name, _, identifier = full_name.rpartition("@")
    body = _PLIST.format(url=escape(url), identifier=escape(identifier), name=escape(name))
    return Response(body, media_type="application/xml;charset=utf-8")


class MessageBody(RequestBody):
    message: str = ""


MESSAGE_INPUT = bound(MessageBody)


async def message_get() -> Response:
    """Nothing in Manifold posts messages to the admin page, so there never is one."""
    return error(404, "no message")


async def message_send(request: Request) -> Response:
    """Nothing in Manifold waits for a message from the admin page (AList's answer)."""
    await bind(request, MessageBody)
    return error(500, "nowhere needed")


_PLIST = """<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE plist PUBLIC \
"-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
  <dict>
    <key>items</key>
    <array>
      <dict>
        <key>assets</key>
        <array>
          <dict>
            <key>kind</key>
            <string>software-package</string>
            <key>url</key>
            <string>{url}</string>
          </dict>
        </array>
        <key>metadata</key>
        <dict>
          <key>bundle-identifier</key>
          <string>{identifier}</string>
          <key>bundle-version</key>
          <string>4.4</string>
          <key>kind</key>
          <string>software</string>
          <key>title</key>
          <string>{name}</string>
        </dict>
      </dict>
    </array>
  </dict>
</plist>"""
