"""Uploads handed to rclone as it fetches them: each upload's bytes are offered at a
one-time URL on the loopback interface, and ``operations/copyurl`` tells rclone to
store what that URL serves.

Why not ``operations/uploadfile`` (a multipart POST to rclone): it stores a file with
the time of the upload, and without its size, so rclone spools any file past 100 KiB
to its disk for back ends that need the size first (OneDrive), and uploads to S3 in
parts sized for the largest file it might be. ``copyurl`` reads the size from
``Content-Length`` and the time from ``Last-Modified``: rclone puts the file with
both, streaming, on every back end, and checks the count it got.

A URL is a random 256-bit token, answered once, and only while its upload runs. The
sender's bytes go out as they arrive; a stream that fails, or brings more or fewer
bytes than announced, cuts the connection so that rclone stores nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime

from aiohttp import web

from manifold.drivers.base import Upload

# What the loopback server answers on (its port is the system's pick).
HOST = "127.0.0.1"


@dataclass(slots=True)
class Offer:
    """One upload on offer: what it sent, and how its stream ended."""

    upload: Upload
    sent: int = 0
    # The sender's own exception, raised again by the caller unchanged.
    failure: BaseException | None = None
    # The stream ended with another count than announced.
    miscounted: bool = False
    taken: asyncio.Event = field(default_factory=asyncio.Event)


class Feeder:
    """The loopback server offering uploads to rclone (started on first use)."""

    def __init__(self) -> None:
        self._offers: dict[str, Offer] = {}
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def offering(self, upload: Upload) -> AsyncIterator[tuple[str, Offer]]:
        """The URL that serves ``upload`` once, and its ``Offer``, inside the block."""
        await self._start()
        token = secrets.token_urlsafe(32)
        offer = self._offers[token] = Offer(upload)
        try:
            yield f"http://{HOST}:{self._port}/{token}", offer
        finally:
            self._offers.pop(token, None)

    async def _start(self) -> None:
        async with self._lock:
            if self._runner is not None:
                return
            app = web.Application()
            app.router.add_get("/{token}", self._serve)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listening.bind((HOST, 0))
            self._port = listening.getsockname()[1]
            await web.SockSite(runner, listening).start()
            self._runner = runner

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        offer = self._offers.pop(request.match_info["token"], None)
        if offer is None:
            return web.Response(status=404)
        offer.taken.set()
        response = web.StreamResponse(headers=_headers(offer.upload))
        await response.prepare(request)
        try:
            await _relay(offer, response)
        except Exception:
            # Cut the connection mid-body: rclone sees a short read and stores nothing.
            if request.transport is not None:
                request.transport.abort()
            raise ConnectionResetError("upload cut") from None
        await response.write_eof()
        return response

    async def aclose(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


async def _relay(offer: Offer, response: web.StreamResponse) -> None:
    size = offer.upload.size
    try:
        async for data in offer.upload.stream:
            offer.sent += len(data)
            if size is not None and offer.sent > size:
                offer.miscounted = True
                raise ValueError("more bytes than announced")
            await response.write(data)
    except Exception as exc:
        if not offer.miscounted:
            offer.failure = exc
        raise
    if size is not None and offer.sent != size:
        offer.miscounted = True
        raise ValueError("fewer bytes than announced")


def _headers(upload: Upload) -> dict[str, str]:
    headers = {"Content-Type": "application/octet-stream"}
    if upload.size is not None:
        headers["Content-Length"] = str(upload.size)
    if upload.modified is not None:
        headers["Last-Modified"] = _http_date(upload.modified)
    return headers


def _http_date(when: datetime) -> str:
    return format_datetime(when.astimezone(UTC), usegmt=True)
