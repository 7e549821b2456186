"""Progress of a call whose length depends on the data: a folder removed entry by
entry, a folder renamed by copying its objects one by one.

Such a call says ``made_progress()`` after each round trip to its back end, and
whoever watches the call (``vfs.layers.TimeoutLayer``, SMB's watchdog) gives it more
time: it fails when its back end stops answering, not because the folder is big. A
call no one watches: ``made_progress`` does nothing. A driver's threads may say it
too (``run_blocking`` runs them in the caller's context); a watcher is told in the
thread that says it, so it must be safe to call from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_watchers: ContextVar[tuple[Callable[[], None], ...]] = ContextVar("progress", default=())


@contextmanager
def watching(on_progress: Callable[[], None]) -> Iterator[None]:
    """``on_progress()`` after each step the block's calls make, as well as the
    watchers around it (a layer's deadline and a connection's watchdog both move)."""
    token = _watchers.set((*_watchers.get(), on_progress))
    try:
        yield
    finally:
        _watchers.reset(token)


def made_progress() -> None:
    """One more step of the call under way is done: tell whoever watches it."""
    for on_progress in _watchers.get():
        on_progress()
