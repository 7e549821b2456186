"""Checks at the edge of every request, before any route reads it.

- ``RequestGuard``, one middleware layer for both:
  - a URL whose unescaped path or query is not UTF-8 is refused, rather than having its
    bytes silently replaced and naming some other file;
  - a request body over ``max_request_body`` is refused before it is read whole
    (uploads stream to disk and are exempt).
- ``ToldFirst``: with shared state, an answer starts only once the changes its request
  posted to the bus (a listing a write patched) are sent, so that a request that
  follows it to another instance finds them there.
- ``NOSNIFF``: the header every answer carries (``CatchAll`` and the fast paths add it)
  so browsers never guess a content type and run a downloaded file as a page of this site.

A refusal answers the envelope: HTTP 200 under ``/api``, as every API error does, and
the real status elsewhere (downloads), as ``/d`` and ``/p`` answer their errors.
"""

from __future__ import annotations

from typing import Protocol
from urllib.parse import unquote_to_bytes

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from manifold.api.envelope import error
from manifold.config import Config

NOSNIFF = (b"x-content-type-options", b"nosniff")
TOO_LARGE = "request body too large"
NOT_UTF8 = "URL is not valid UTF-8 once unescaped"


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a body without a (truthful) length passes the cap.

    An ``HTTPException``, so that FastAPI's body parsing lets it through unchanged and
    the app's handler answers it as the envelope.
    """

    def __init__(self) -> None:
        super().__init__(status_code=413, detail=TOO_LARGE)


async def refuse(scope: Scope, receive: Receive, send: Send, code: int, message: str) -> None:
    status = 200 if scope["path"].startswith("/api/") else code
    await error(code, message, status=status)(scope, receive, send)


class RequestGuard:
    """What every request passes before routing, in one layer: a URL whose path or query,
    once unescaped, is not UTF-8 is refused; request bodies are capped at
    ``config.max_request_body`` bytes, except on ``streamed`` paths.

    A declared length over the cap is refused at once, unread; otherwise the bytes are
    counted as they arrive and reading stops at the cap, so no more than the cap is
    ever held. The cap is read per request, so a changed config applies at once.
    """

    def __init__(self, app: ASGIApp, config: Config, streamed: frozenset[str]) -> None:
        self.app = app
        self.config = config
        self.streamed = streamed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not _utf8_url(scope):
            await refuse(scope, receive, send, 400, NOT_UTF8)
            return
        if scope["path"] in self.streamed:
            await self.app(scope, receive, send)
            return
        cap = self.config.max_request_body
        if _declared_length(scope) > cap:
            await refuse(scope, receive, send, 413, TOO_LARGE)
            return
        await self.app(scope, _counted(receive, cap), send)


def _declared_length(scope: Scope) -> int:
    value = Headers(scope=scope).get("content-length", "")
    return int(value) if value.isdigit() else 0


def _counted(receive: Receive, cap: int) -> Receive:
    received = 0

    async def counted() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > cap:
                raise BodyTooLarge()
        return message

    return counted


def _utf8_url(scope: Scope) -> bool:
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope.get("query_string", b"")
    try:
        unquote_to_bytes(raw_path).decode()
        unquote_to_bytes(query.replace(b"+", b" ")).decode()
    except UnicodeDecodeError:
        return False
    return True


class Outgoing(Protocol):
    """The part of the change bus ``ToldFirst`` uses."""

    async def flush(self) -> None: ...


class ToldFirst:
    """Holds each answer's start until the bus has sent what was posted meanwhile
    (installed only when other processes share the state)."""

    def __init__(self, app: ASGIApp, bus: Outgoing) -> None:
        self.app = app
        self.bus = bus

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def told_first(message: Message) -> None:
            if message["type"] == "http.response.start":
                await self.bus.flush()
            await send(message)

        await self.app(scope, receive, told_first)
