"""Whether a storage's back end answers, as its own calls show, and the way back.

A remote storage whose server goes away is marked down by the first call that fails
as temporary: its status says why (the driver's message, which never holds a secret).
A driver that asks for it (``check_status``, as AList's S3, SFTP and AList V3) then
refuses every call at once with ``storage not init: <status>`` instead of letting
each one wait out its time limit; after a back-off one call goes through as a probe,
and the first call that succeeds marks the storage up again. Other drivers keep being
called (as AList calls them), and their status still shows the trouble.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from manifold.drivers.base import Driver
from manifold.errors import ServerError, TemporaryFailure
from manifold.models import Link, LinkArgs, Obj
from manifold.vfs.layers import Layer, close_stream

T = TypeVar("T")

WORK = "work"
# Seconds before the first probe of a storage found down, doubled per failed probe.
FIRST_WAIT = 1.0
LONGEST_WAIT = 300.0
# Calls that never tell about the back end's health.
_SILENT = frozenset({"init", "drop"})


class Health:
    """One storage's state; ``on_status`` hears each change of its status text."""

    def __init__(self, refuse_when_down: bool, on_status: Callable[[str], None]) -> None:
        self._refuse = refuse_when_down
        self._on_status = on_status
        self.status = WORK
        self._down = False
        self._wait = FIRST_WAIT
        self._retry_at = 0.0

    @property
    def down(self) -> bool:
        return self._down

    def admit(self) -> None:
        """Refuse a call while the storage is down and refuses calls, but for one probe
        each time the back-off runs out."""
        if not (self._down and self._refuse):
            return
        now = time.monotonic()
        if now < self._retry_at:
            raise ServerError.not_init(self.status)
        self._retry_at = now + self._wait  # this call probes; the others wait for it

    def failed(self, reason: str) -> None:
        if self._down:
            self._wait = min(self._wait * 2, LONGEST_WAIT)
        else:
            self._down = True
            self._wait = FIRST_WAIT
        self._retry_at = time.monotonic() + self._wait
        status = f"unreachable: {reason}"
        if status != self.status:
            self.status = status
            self._on_status(status)

    def succeeded(self) -> None:
        if self._down:
            self._down = False
            self._wait = FIRST_WAIT
            self.status = WORK
            self._on_status(WORK)


class HealthLayer(Layer):
    """Tells ``health`` how each call ended, and asks it before each call."""

    def __init__(self, inner: Driver[Any], health: Health) -> None:
        super().__init__(inner)
        self.health = health

    async def around(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        if name in _SILENT:
            return await call()
        self.health.admit()
        try:
            result = await call()
        except TemporaryFailure as exc:
            self.health.failed(exc.message)
            raise
        self.health.succeeded()
        return result

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        link = await self.around("link", lambda: self.inner.link(file, args))
        reader = link.reader
        if reader is None:
            return link
        health = self.health

        async def watched(offset: int, length: int | None) -> AsyncIterator[bytes]:
            stream = reader(offset, length)
            try:
                async for data in stream:
                    yield data
            except TemporaryFailure as exc:
                health.failed(exc.message)
                raise
            finally:
                await close_stream(stream)

        return replace(link, reader=watched)
