"""A deadline for each blocking smbclient call.

smbclient waits for its server's answers without any time limit: a server that
stops answering (a hung smbd, a host gone off the network with its TCP connection
still open) holds the calling thread for ever, and the storage's threads run out.
A call made under ``Watchdog.watch`` that outlives its seconds has its connection
severed from the watchdog's own thread: the socket is shut down, smbprotocol's
reader ends and wakes every call waiting on it, and the call fails as
``TemporaryFailure`` (the next call makes a new connection). One thread per storage,
asleep while no call is late.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from manifold.drivers import progress
from manifold.errors import TemporaryFailure


@dataclass(slots=True)
class _Watch:
    deadline: float
    sever: Callable[[], None]
    fired: bool = False


class Watchdog:
    """Severs the connection of a call past its deadline (see the module's doc)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._changed = threading.Condition()
        self._watches: dict[int, _Watch] = {}
        self._numbers = itertools.count()
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextmanager
    def watch(self, seconds: float, sever: Callable[[], None]) -> Iterator[None]:
        """The block within ``seconds``, or ``sever()`` called and the block's failure
        raised as ``TemporaryFailure``. 0 or less: no deadline. Each step the block
        says it made (``drivers.progress``) gives it ``seconds`` more: a folder
        removed entry by entry is as long as the folder is big."""
        if seconds <= 0:
            yield
            return
        watch = _Watch(time.monotonic() + seconds, sever)
        number = next(self._numbers)
        with self._changed:
            self._watches[number] = watch
            self._start()
            self._changed.notify()

        def renew() -> None:
            with self._changed:
                watch.deadline = time.monotonic() + seconds

        try:
            with progress.watching(renew):
                yield
        except Exception as exc:
            if watch.fired:
                raise TemporaryFailure(
                    f"the SMB server did not answer within {seconds:g}s"
                ) from exc
            raise
        finally:
            with self._changed:
                del self._watches[number]

    def close(self) -> None:
        """Stop the watchdog's thread (a watch after this starts it again)."""
        with self._changed:
            self._closed = True
            self._changed.notify()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        with self._changed:
            self._closed = False

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._changed:
                late = self._late()
            if late is None:
                return
            for watch in late:
                with suppress(Exception):  # severing is best effort; the call fails anyway
                    watch.sever()

    def _late(self) -> list[_Watch] | None:
        """Wait until some watch is past its deadline (marked fired), or the watchdog
        is closed (None). Called holding the lock."""
        while not self._closed:
            now = time.monotonic()
            pending = [w for w in self._watches.values() if not w.fired]
            late = [w for w in pending if w.deadline <= now]
            if late:
                for watch in late:
                    watch.fired = True
                return late
            soonest = min((w.deadline for w in pending), default=None)
            self._changed.wait(None if soonest is None else soonest - now)
        return None


def sever(connection: Any) -> None:
    """Close ``connection``'s socket at once, without a word to the server."""
    transport = connection.transport
    # The socket itself is shut down first: a send blocked on a server that reads no
    # more holds the transport's lock, and only this wakes it.
    sock = getattr(transport, "_sock", None)
    if isinstance(sock, socket.socket):
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    transport.close()
