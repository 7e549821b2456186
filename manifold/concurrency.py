"""Small concurrency helpers shared by every layer (no Manifold imports).

``SingleFlight`` lets identical concurrent calls share one run. The run belongs to
the flight, not to whichever caller started it: a caller that is cancelled (a client
hanging up) stops waiting, but the others still get the result. Without that, the
first caller's cancellation would reach every waiter as a ``CancelledError`` of its
own, which no error handler catches.

``Pool`` is a named thread pool of a fixed size, reached through ``run_in``. Blocking
work runs in the pool of its kind rather than in the event loop's default executor,
so that one kind of work piling up (archives being decompressed, a slow disk, a
remote library stuck on its server) cannot take the threads every other request
needs. The rule that keeps a pool from being held by a client: a call in a pool does
a bounded piece of work and returns; nothing in a pool ever waits for a client to
read or to send. Streams hand over one chunk per call.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """One run per key at a time; callers arriving meanwhile share its outcome."""

    def __init__(self) -> None:
        self._running: dict[str, asyncio.Future[T]] = {}

    async def run(self, key: str, call: Callable[[], Awaitable[T]]) -> T:
        task = self._running.get(key)
        if task is None:
            task = asyncio.ensure_future(call())
            self._running[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(task)

    def _finished(self, key: str, task: asyncio.Future[T]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
        if not task.cancelled():
            task.exception()  # retrieved: every caller may have gone already

    def running(self) -> int:
        """How many runs are under way (for tests and diagnostics)."""
        return len(self._running)


class Pool:
    """A named thread pool of ``size`` threads, started on first use."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.size, thread_name_prefix=self.name)
            return self._executor

    def __repr__(self) -> str:
        return f"Pool({self.name!r}, {self.size})"


# Reading archives: listing, extracting and one member's bytes (CPU and source reads).
ARCHIVE_POOL = Pool("manifold-archive", 4)
# Local files: opening, reading and mapping the windows of downloads and streams.
DISK_POOL = Pool("manifold-disk", 8)
# Pure computation on request data: hashing uploads, compiling patterns.
CPU_POOL = Pool("manifold-cpu", 2)
# Drivers' blocking library calls (``run_blocking``): listings, links, writes.
DRIVER_POOL = Pool("manifold-driver", 8)
# Password hashing (argon2): a burst of logins waits here, not in front of uploads.
PASSWORD_POOL = Pool("manifold-passwords", 2)
# Offline downloads by SimpleHttp, each a blocking transfer from a remote server.
DOWNLOAD_POOL = Pool("manifold-downloads", 8)
# Thumbnails: decoding images and video frames (ffmpeg), seconds at worst.
MEDIA_POOL = Pool("manifold-media", 2)
# LDAP logins: connect, search and bind, each bounded by a timeout.
LDAP_POOL = Pool("manifold-ldap", 4)
# Searches on an SQLite file: each thread keeps its own read connection.
SQLITE_POOL = Pool("manifold-sqlite", 4)


async def run_in(pool: Pool, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` in one of ``pool``'s threads, with the caller's context.

    Cancelling the caller stops the wait, not the call: the thread runs to its end.
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await loop.run_in_executor(pool.executor, call)


def start_in(pool: Pool, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """``func(*args)`` started in ``pool`` now; its future, to await later or not at all."""
    return asyncio.get_running_loop().run_in_executor(pool.executor, func, *args)
