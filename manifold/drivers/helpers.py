"""The helpers every driver uses: library errors translated at the edge, blocking
calls in threads, a listing's pages joined within its bound, and an upload that is
already a whole file on this machine.

``manifold.drivers.base`` re-exports each of them, so a driver still imports all it
needs from there in one line.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, BinaryIO, TypeVar

from manifold.concurrency import DISK_POOL, DRIVER_POOL, run_in
from manifold.errors import InvalidRequest, ManifoldError, ServerError
from manifold.models import Obj

T = TypeVar("T")

ErrorTarget = type[ManifoldError] | Callable[[Any], ManifoldError]
ErrorTable = Mapping[type[Exception], ErrorTarget]


async def run_blocking(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking library call in one of the drivers' threads.

    The drivers' pool is theirs alone: a back end that hangs can hold those threads,
    never the ones archives, local downloads or the database need. Cancelling the
    caller stops the wait, not the call: the thread runs to its end, so a call that
    must not be abandoned halfway (a rename into place) finishes.
    """
    return await run_in(DRIVER_POOL, func, *args, **kwargs)


async def trimmed(
    source: AsyncIterator[bytes], skip: int, length: int | None
) -> AsyncIterator[bytes]:
    """``source`` without its first ``skip`` bytes, and at most ``length`` bytes of the
    rest (None: all): a range cut from a stream that began earlier than asked (an HTTP
    server that ignored a Range header)."""
    left = length
    async for data in source:
        if skip:
            cut = min(skip, len(data))
            data, skip = data[cut:], skip - cut
        if left is not None:
            data, left = data[:left], left - min(left, len(data))
        if data:
            yield data
        if left == 0:
            return


def too_many_entries(folder: str, limit: int) -> ServerError:
    """The error of a listing past its bound, naming the folder and the bound."""
    return ServerError(
        f"the folder {folder} holds more than {limit} entries, the most one listing may "
        "hold (the server's max_listing_entries)"
    )


async def gathered(pages: AsyncIterator[list[Obj]], folder: str, limit: int) -> list[Obj]:
    """A listing's pages joined, refused with ``too_many_entries`` as soon as they hold
    more than ``limit`` objects: a huge folder costs the bound, never more. The pages
    are closed when refused (an async generator: its request is given up)."""
    found: list[Obj] = []
    try:
        async for page in pages:
            found += page
            if len(found) > limit:
                raise too_many_entries(folder, limit)
    finally:
        closing = getattr(pages, "aclose", None)
        if closing is not None:
            await closing()
    return found


def check_size(written: int, size: int | None) -> None:
    """``InvalidRequest`` when an upload that announced ``size`` bytes brought another
    count (None: nothing was announced, any count will do)."""
    if size is not None and written != size:
        raise InvalidRequest(f"upload size mismatch: got {written} bytes, want {size}")


def translate(exc: Exception, table: ErrorTable) -> ManifoldError | None:
    """The ``manifold.errors`` instance for a library's ``exc``, or None if unmapped.

    The most specific entry wins: the one whose class comes first in the exception's
    own class hierarchy, whatever order the table lists them in. A class entry is
    built with its default (AList's) message; a callable entry builds the error.
    """
    for cls in type(exc).__mro__:
        target: ErrorTarget | None = table.get(cls)
        if target is None:
            continue
        made: ManifoldError = target() if isinstance(target, type) else target(exc)
        return made
    return None


@contextmanager
def translating(table: ErrorTable) -> Iterator[None]:
    """Re-raise a library exception from the block as its ``manifold.errors`` class,
    keeping the cause; exceptions the table does not name pass through unchanged."""
    try:
        yield
    except ManifoldError:
        raise
    except Exception as exc:
        mapped = translate(exc, table)
        if mapped is None:
            raise
        raise mapped from exc


class FileSource:
    """An upload whose bytes are already a whole file on this machine (an offline
    download's result). Any driver reads it as the stream it is; a Local storage on
    the same file system links it into place instead of copying it.

    ``on_bytes`` hears how many bytes went, as they go (all at once when linked).
    """

    CHUNK = 1 << 20

    def __init__(self, path: str, on_bytes: Callable[[int], None] | None = None) -> None:
        self.path = path
        self._on_bytes = on_bytes or (lambda _: None)
        self._chunks: AsyncGenerator[bytes, None] | None = None

    def sent(self, count: int) -> None:
        """The bytes went another way (linked): tell the listener at once."""
        self._on_bytes(count)

    def __aiter__(self) -> FileSource:
        return self

    async def __anext__(self) -> bytes:
        if self._chunks is None:
            self._chunks = self._read()
        return await anext(self._chunks)

    async def aclose(self) -> None:
        if self._chunks is not None:
            await self._chunks.aclose()

    async def _read(self) -> AsyncGenerator[bytes, None]:
        file = await run_in(DISK_POOL, _open_unbuffered, self.path)
        try:
            while data := await run_in(DISK_POOL, file.read, self.CHUNK):
                self._on_bytes(len(data))
                yield data
        finally:
            file.close()


def _open_unbuffered(path: str) -> BinaryIO:
    return open(path, "rb", buffering=0)
