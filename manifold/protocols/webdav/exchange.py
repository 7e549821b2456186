"""One WebDAV request as the handlers see it, and the server state they share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from manifold.paths import join_base, split_path
from manifold.protocols.webdav.hrefs import Hrefs
from manifold.protocols.webdav.locks import LockStore
from manifold.services.auth.service import Caller
from manifold.services.fs.ops import GuardedOps
from manifold.services.fs.props import DeadProps
from manifold.vfs.memo import DerivedMemo

# Rendered listings kept at once, in entries: a few folders of 100,000.
RENDER_BUDGET = 300_000


@dataclass(slots=True)
class Shared:
    """What every request of one server uses."""

    ops: GuardedOps
    props: DeadProps
    locks: LockStore
    hrefs: Hrefs
    rendered: DerivedMemo[bytes] = field(default_factory=lambda: DerivedMemo(RENDER_BUDGET))


@dataclass(slots=True)
class Exchange:
    request: Request
    caller: Caller
    path: str  # relative to the caller's base path, as GuardedOps takes it

    @property
    def full(self) -> str:
        """The path in the whole tree (locks and dead properties are kept by it)."""
        return join_base(self.caller.user.base_path, self.path)

    def full_of(self, path: str) -> str:
        return join_base(self.caller.user.base_path, path)

    @property
    def parent(self) -> str:
        return split_path(self.path)[0]

    def header(self, name: str, default: str = "") -> str:
        return self.request.headers.get(name, default)

    async def body(self) -> bytes:
        return await self.request.body()


class StreamBody(Response):
    """A streamed body whose source is closed however the sending ends (a client
    that leaves mid-file releases the file or the back end's connection at once)."""

    def __init__(
        self,
        stream: AsyncIterator[bytes],
        status_code: int,
        headers: Mapping[str, str],
        release: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(None, status_code, dict(headers))
        self.stream = stream
        # What the stream reads from (a ``ReadHandle``), closed even when the stream
        # never started (a generator closed unstarted runs no ``finally``).
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        try:
            async for chunk in self.stream:
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            try:
                close = getattr(self.stream, "aclose", None)
                if close is not None:
                    await close()
            finally:
                if self.release is not None:
                    await self.release()
