"""Cross-cutting concerns as layers wrapped around any driver, never coded inside one.

A layer has the driver's interface and passes each call to the driver it wraps,
adding one concern: a time limit, retries of temporary failures, a cap on calls
under way at once, a log line. ``wrap`` stacks the ones a driver's static config
asks for, in one place, when a storage is mounted:

    Logging → Retry → ConcurrencyLimit → Idle → Timeout → driver

so a retry waits its back-off without holding a slot, and waiting for a slot does
not count against a call's time limit. Bytes moved after a call returns count too: a
download's range reader (``Link.reader``) holds its slot until it is closed, and a
reader or an upload that goes ``idle_timeout`` seconds without a byte fails as
temporary instead of holding its slot for ever. A driver that asks for none (Local) is used
bare: no layer costs anything on its hot paths. ``StorageOps`` adds the list cache
and the single-flight of identical listings on top, as the outermost layers.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from manifold.concurrency import Pool
from manifold.drivers import progress
from manifold.drivers.base import (
    ArchiveEntry,
    ArchiveMeta,
    Driver,
    DriverConfig,
    Resources,
    Upload,
    VirtualTree,
)
from manifold.errors import TemporaryFailure
from manifold.models import DiskUsage, Link, LinkArgs, Obj, OtherArgs, Storage

T = TypeVar("T")

log = logging.getLogger("manifold.drivers")

# Calls that read or make what already exists: safe to repeat after a failure.
IDEMPOTENT = frozenset(
    {
        "root_obj",
        "get",
        "list",
        "link",
        "make_dir",
        "real_paths",
        "fingerprint",
        "details",
        "archive_meta",
        "archive_list",
        "archive_link",
    }
)
# Calls whose length depends on the data moved (an upload, a copy): never time-limited.
UNBOUNDED = frozenset({"put", "copy", "move", "init", "drop", "other", "multipart_part"})
# Calls that hold an upload's slot rather than a call's (``ConcurrencyLimitLayer``).
WRITES = frozenset({"put", "multipart_part"})
# Calls as long as a folder is big (a tree removed entry by entry, a folder renamed by
# copying its objects): limited by the time between two of their steps
# (``drivers.progress``), not by their whole length. One that is a single round
# trip makes no step, and is limited as any other call.
WATCHED = frozenset({"remove", "rename"})


class Layer(Driver[Any]):
    """Passes every call to ``inner`` through ``around``; subclasses add one concern."""

    def __init__(self, inner: Driver[Any]) -> None:
        self.inner = inner

    async def around(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        return await call()

    # --- what the services read of a driver, passed through ---------------------

    @property
    def storage(self) -> Storage:
        return self.inner.storage

    @storage.setter
    def storage(self, storage: Storage) -> None:
        self.inner.storage = storage

    @property
    def options(self) -> Any:
        return self.inner.options

    @options.setter
    def options(self, options: Any) -> None:
        self.inner.options = options

    @property
    def tree(self) -> VirtualTree | None:
        return self.inner.tree

    @tree.setter
    def tree(self, tree: VirtualTree | None) -> None:
        self.inner.tree = tree

    def capabilities(self) -> frozenset[str]:  # type: ignore[override]
        return self.inner.capabilities()

    def promises(self) -> frozenset[str]:
        return self.inner.promises()

    @property
    def resources(self) -> Resources:
        return self.inner.resources

    @resources.setter
    def resources(self, resources: Resources) -> None:
        self.inner.resources = resources

    @property
    def options_saver(self) -> Callable[[str], Awaitable[None]] | None:
        return self.inner.options_saver

    @options_saver.setter
    def options_saver(self, saver: Callable[[str], Awaitable[None]] | None) -> None:
        self.inner.options_saver = saver

    @property
    def options_loader(self) -> Callable[[], Awaitable[str | None]] | None:
        return self.inner.options_loader

    @options_loader.setter
    def options_loader(self, loader: Callable[[], Awaitable[str | None]] | None) -> None:
        self.inner.options_loader = loader

    def options_to_save(self, stored: str, addition: str) -> str:
        return self.inner.options_to_save(stored, addition)

    async def options_saved(self, addition: str) -> None:
        await self.inner.options_saved(addition)  # the driver's own calls: never limited

    @property
    def threads(self) -> Pool:
        return self.inner.threads

    @threads.setter
    def threads(self, threads: Pool) -> None:
        self.inner.threads = threads

    def addition(self) -> str:
        return self.inner.addition()

    def multipart_limits(self) -> tuple[int, int]:
        return self.inner.multipart_limits()

    # --- the contract ------------------------------------------------------------

    async def init(self) -> None:
        await self.around("init", self.inner.init)

    async def drop(self) -> None:
        await self.inner.drop()  # never raises, never waits on a limit

    async def root_obj(self) -> Obj:
        return await self.around("root_obj", self.inner.root_obj)

    def folder_at(self, path: str) -> Obj | None:
        return self.inner.folder_at(path)  # asks no back end: never limited

    async def real_paths(self, paths: Sequence[str]) -> builtins.list[str | None]:
        return await self.around("real_paths", lambda: self.inner.real_paths(paths))

    async def served_from(
        self, anchor: str, paths: Sequence[str]
    ) -> builtins.list[tuple[str, str] | None] | None:
        return await self.inner.served_from(anchor, paths)  # asks no back end: never limited

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        return await self.around("list", lambda: self.inner.list(dir))

    async def list_pages(self, dir: Obj) -> AsyncGenerator[builtins.list[Obj], None]:
        # Each page is a call of its own ("list_page": limited and timed, never
        # retried, since a failed page cannot be asked for again).
        pages = self.inner.list_pages(dir)
        try:
            while True:
                try:
                    page = await self.around("list_page", lambda: anext(pages))
                except StopAsyncIteration:
                    return
                yield page
        finally:
            await pages.aclose()

    async def list_refreshed(self, dir: Obj) -> builtins.list[Obj]:
        return await self.around("list", lambda: self.inner.list_refreshed(dir))

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return await self.around("link", lambda: self.inner.link(file, args))

    async def get(self, path: str) -> Obj:
        return await self.around("get", lambda: self.inner.get(path))

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        return await self.around("make_dir", lambda: self.inner.make_dir(parent, name))

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        return await self.around("move", lambda: self.inner.move(src, dst_dir))

    async def rename(self, src: Obj, new_name: str) -> Obj:
        return await self.around("rename", lambda: self.inner.rename(src, new_name))

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        return await self.around("copy", lambda: self.inner.copy(src, dst_dir))

    async def remove(self, obj: Obj) -> None:
        await self.around("remove", lambda: self.inner.remove(obj))

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        return await self.around("put", lambda: self.inner.put(dst_dir, upload))

    async def move_over(self, src: Obj, dst_dir: Obj, name: str, replaced: Obj) -> Obj:
        # One rename on the server: time-limited like ``rename``, never repeated (a
        # second try would find the source gone).
        return await self.around(
            "move_over", lambda: self.inner.move_over(src, dst_dir, name, replaced)
        )

    async def other(self, args: OtherArgs) -> Any:
        return await self.around("other", lambda: self.inner.other(args))

    async def fingerprint(self, dir: Obj) -> str | None:
        return await self.around("fingerprint", lambda: self.inner.fingerprint(dir))

    async def details(self) -> DiskUsage:
        return await self.around("details", self.inner.details)

    def direct_upload_tools(self) -> builtins.list[str]:
        return self.inner.direct_upload_tools()

    async def direct_upload_info(self, dir: Obj, name: str, size: int) -> dict[str, Any]:
        return await self.around(
            "direct_upload_info", lambda: self.inner.direct_upload_info(dir, name, size)
        )

    async def multipart_begin(self, dst_dir: Obj, name: str, hidden: bool) -> str:
        return await self.around(
            "multipart_begin", lambda: self.inner.multipart_begin(dst_dir, name, hidden)
        )

    async def multipart_part(
        self, token: str, index: int, length: int, stream: AsyncIterator[bytes]
    ) -> None:
        await self.around(
            "multipart_part", lambda: self.inner.multipart_part(token, index, length, stream)
        )

    async def multipart_abort(self, token: str) -> None:
        await self.around("multipart_abort", lambda: self.inner.multipart_abort(token))

    async def archive_meta(self, file: Obj, password: str) -> ArchiveMeta:
        return await self.around("archive_meta", lambda: self.inner.archive_meta(file, password))

    async def archive_list(
        self, file: Obj, password: str, inner: str
    ) -> builtins.list[ArchiveEntry]:
        return await self.around(
            "archive_list", lambda: self.inner.archive_list(file, password, inner)
        )

    async def archive_link(self, file: Obj, password: str, inner: str) -> Link:
        return await self.around(
            "archive_link", lambda: self.inner.archive_link(file, password, inner)
        )

    async def archive_decompress(
        self,
        file: Obj,
        dst_dir: Obj,
        password: str,
        inner: str,
        into_new_dir: bool,
        overwrite: bool,
    ) -> None:
        await self.around(
            "archive_decompress",
            lambda: self.inner.archive_decompress(
                file, dst_dir, password, inner, into_new_dir, overwrite
            ),
        )


class TimeoutLayer(Layer):
    """A call that outlasts ``seconds`` fails as temporary (uploads and copies
    excepted); a removal or a rename, once ``seconds`` pass without a step."""

    def __init__(self, inner: Driver[Any], seconds: float) -> None:
        super().__init__(inner)
        self.seconds = seconds

    async def around(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        if name in UNBOUNDED:
            return await call()
        try:
            async with asyncio.timeout(self.seconds) as limit:
                if name not in WATCHED:
                    return await call()
                return await _Steps(limit, self.seconds).watch(call)
        except TimeoutError as exc:
            raise TemporaryFailure(f"{name} timed out after {self.seconds:g}s") from exc


class _Steps:
    """A watched call's deadline, moved ``seconds`` on by each of its steps. A step
    may be said from a driver's thread, even after the call ended (a thread runs to
    its end when its caller is cancelled): the move is made on the loop, if still
    wanted."""

    def __init__(self, limit: asyncio.Timeout, seconds: float) -> None:
        self.limit = limit
        self.seconds = seconds
        self.loop = asyncio.get_running_loop()
        self.open = True

    async def watch(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            with progress.watching(self.tell):
                return await call()
        finally:
            self.open = False

    def tell(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._push)

    def _push(self) -> None:
        if self.open and not self.limit.expired():
            self.limit.reschedule(self.loop.time() + self.seconds)


class RetryLayer(Layer):
    """Repeats an idempotent call that failed as temporary, backing off exponentially."""

    def __init__(
        self, inner: Driver[Any], attempts: int, first_delay: float = 0.2, longest: float = 5.0
    ) -> None:
        super().__init__(inner)
        self.attempts = attempts
        self.first_delay = first_delay
        self.longest = longest

    async def around(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        if name not in IDEMPOTENT:
            return await call()
        for attempt in range(self.attempts):
            try:
                return await call()
            except TemporaryFailure:
                if attempt + 1 >= self.attempts:
                    raise
                await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _delay(self, attempt: int) -> float:
        # Full jitter: instances retrying the same back end do not retry in step.
        return random.uniform(0, min(self.longest, self.first_delay * 2**attempt))


async def close_stream(stream: AsyncIterator[bytes]) -> None:
    """Close a byte stream at once, releasing its connection, when it can be closed."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


class IdleLayer(Layer):
    """A range reader, a URL link's fetch or an upload that moves no byte for
    ``seconds`` fails with ``TemporaryFailure``: a back end that stopped answering
    mid-transfer frees its slot and its client instead of holding them until the
    connection dies."""

    def __init__(self, inner: Driver[Any], seconds: float) -> None:
        super().__init__(inner)
        self.seconds = seconds

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        link = await self.inner.link(file, args)
        reader = link.reader
        if reader is None:
            # A URL the server fetches itself (a download it relays, a copy) waits no
            # longer for a byte than the storage's own reader would.
            return replace(link, idle_timeout=self.seconds) if link.url else link
        seconds = self.seconds

        def idle_reader(offset: int, length: int | None) -> AsyncIterator[bytes]:
            return _idle_stream(reader(offset, length), seconds)

        return replace(link, reader=idle_reader)

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        if upload.native is not None:  # no byte moves through here: the store joins its parts
            return await self.inner.put(dst_dir, upload)
        watched = _Watched(upload.stream)
        outer = upload.progress

        def progress(count: int) -> None:
            watched.moved(count)
            if outer is not None:
                outer(count)

        watched_upload = replace(upload, stream=watched, progress=progress)
        stored = asyncio.ensure_future(self.inner.put(dst_dir, watched_upload))
        try:
            while True:
                done, _ = await asyncio.wait({stored}, timeout=self.seconds)
                if done:
                    return stored.result()
                if watched.idle_for() >= self.seconds:
                    stored.cancel()
                    with contextlib.suppress(BaseException):
                        await stored  # the driver removes what it had begun
                    raise TemporaryFailure(f"upload stalled for {self.seconds:g}s")
        except BaseException:
            if not stored.done():
                stored.cancel()
                with contextlib.suppress(BaseException):
                    await stored
            raise


class _Watched:
    """An upload's stream that remembers when a byte last moved: one came from the
    sender, or the driver reported one going out (``Upload.progress``). A driver that
    is slow to ask for the next chunk while it sends what it holds is busy, not idle;
    a sender or a back end that moves nothing for the whole time is stalled."""

    def __init__(self, stream: AsyncIterator[bytes]) -> None:
        self._stream = stream
        self._last = time.monotonic()

    def idle_for(self) -> float:
        return time.monotonic() - self._last

    def moved(self, count: int) -> None:
        if count:
            self._last = time.monotonic()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> bytes:
        data = await anext(self._stream)
        self.moved(len(data))
        return data

    async def aclose(self) -> None:
        await close_stream(self._stream)


async def _idle_stream(stream: AsyncIterator[bytes], seconds: float) -> AsyncIterator[bytes]:
    try:
        while True:
            try:
                async with asyncio.timeout(seconds):
                    data = await anext(stream)
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                raise TemporaryFailure(f"read stalled for {seconds:g}s") from exc
            yield data
    finally:
        await close_stream(stream)


class ConcurrencyLimitLayer(Layer):
    """At most ``limit`` calls to the back end under way at once, the others waiting
    their turn; and apart from them at most ``limit`` range readers (each until it is
    closed) and ``limit`` uploads (each until it is stored).

    Three separate counts, because a copy within one storage through streams holds an
    upload while its reader opens: were they one count, copies filling every slot
    with uploads would wait for ever on their own readers.
    """

    def __init__(self, inner: Driver[Any], limit: int) -> None:
        super().__init__(inner)
        self._calls = asyncio.Semaphore(limit)
        self._reads = asyncio.Semaphore(limit)
        self._writes = asyncio.Semaphore(limit)

    async def around(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        if name == "init":
            return await call()
        async with self._writes if name in WRITES else self._calls:
            return await call()

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        link = await self.around("link", lambda: self.inner.link(file, args))
        reader = link.reader
        if reader is None:
            return link
        slots = self._reads

        async def held_reader(offset: int, length: int | None) -> AsyncIterator[bytes]:
            async with slots:
                stream = reader(offset, length)
                try:
                    async for data in stream:
                        yield data
                finally:
                    await close_stream(stream)

        return replace(link, reader=held_reader)


class LoggingLayer(Layer):
    """One debug line a call: its name, the storage's mount path, the time it took and
    how it ended. Never the options, headers or links, which may hold secrets."""

    async def around(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        started = time.perf_counter()
        outcome = "ok"
        try:
            return await call()
        except BaseException as exc:
            outcome = type(exc).__name__
            raise
        finally:
            took = (time.perf_counter() - started) * 1000
            log.debug("%s %s: %s in %.1f ms", self.storage.mount_path, name, outcome, took)


class CallRecorder(Protocol):
    """Told of every driver call a ``MeasureLayer`` passes: the storage's mount path,
    the call's name, how long it took and the error class it ended with (None: ok)."""

    def __call__(self, storage: str, call: str, seconds: float, error: str | None) -> None: ...


class MeasureLayer(Layer):
    """Times every call and tells ``record`` how it ended (for ``/metrics``); outermost,
    so a call's time includes its retries and its wait for a slot."""

    def __init__(self, inner: Driver[Any], record: CallRecorder) -> None:
        super().__init__(inner)
        self._record = record

    async def around(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        started = time.perf_counter()
        error: str | None = None
        try:
            return await call()
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            self._record(self.storage.mount_path, name, time.perf_counter() - started, error)


def wrap(
    driver: Driver[Any], config: DriverConfig, record: CallRecorder | None = None
) -> Driver[Any]:
    """The layers ``config`` asks for around ``driver`` (none: the driver itself), and
    a ``MeasureLayer`` outermost when ``record`` is given."""
    wrapped = driver
    if config.max_concurrency > 0:
        driver.threads = Pool(driver.threads.name, config.max_concurrency)
    if config.call_timeout > 0:
        wrapped = TimeoutLayer(wrapped, config.call_timeout)
    if config.idle_timeout > 0:
        wrapped = IdleLayer(wrapped, config.idle_timeout)
    if config.max_concurrency > 0:
        wrapped = ConcurrencyLimitLayer(wrapped, config.max_concurrency)
    if config.retries > 1:
        wrapped = RetryLayer(wrapped, config.retries)
    if log.isEnabledFor(logging.DEBUG):
        wrapped = LoggingLayer(wrapped)
    if record is not None:
        wrapped = MeasureLayer(wrapped, record)
    return wrapped
