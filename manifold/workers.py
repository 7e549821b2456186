"""``manifold server --workers N``: N processes on one machine serving one port.

The parent binds the port once, brings the database up to date and creates the first
users (so that happens once, and the first admin password is printed once), then
starts N workers with the ``spawn`` method. Each worker listens on a socket of its own
bound to the same port (``SO_REUSEPORT``), and the kernel hands each new connection to
one of them by a hash of its addresses: on one socket shared by all, the worker that
woke first accepted every connection waiting (of 50 connections opened one after the
other, one worker took 40), and a second worker added a quarter, not double. The
parent's own socket holds the port (bound, never listening, so it is given no
connections) while workers come and go. A worker's death drops the connections still
waiting in its own queue; the clients connect again. The parent serves
nothing itself: it restarts a worker that dies (after a pause if it died young) and, on
SIGTERM or SIGINT, passes SIGTERM on to every worker, waits for them to finish their
requests (``shutdown_seconds``, plus a margin) and kills what is left.

The protocol servers on ports of their own (FTP, SFTP, S3) run in worker 0 only: one
socket each, so they never compete for their port; if worker 0 dies they come back with
it. Every worker reads the same configuration, so they sign and check tokens with the
same ``jwt_secret``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from manifold import logs
from manifold.config import Config

log = logging.getLogger("manifold.workers")
# A worker that ends sooner than this after its start is restarted after a pause.
YOUNG_SECONDS = 5.0
RESTART_PAUSE = 2.0
# Beyond ``shutdown_seconds``: time for the lifespan's shutdown (tasks released).
STOP_MARGIN = 10.0
PR_SET_PDEATHSIG = 1


async def prepare(config: Config) -> str | None:
    """Migrate and create the default users, once, before any worker starts.

    Returns the generated admin password, if one was made (to be shown once).
    """
    from manifold.container import Services

    services = Services.build(config)
    try:
        return await services.prepare()
    finally:
        await services.close_engine()


class Supervisor:
    def __init__(self, config: Config, sock: socket.socket, count: int) -> None:
        self.config = config
        self.sock = sock  # holds the port; each worker listens on a socket of its own
        self.count = count
        self.context = multiprocessing.get_context("spawn")
        self.workers: dict[int, BaseProcess] = {}
        self.started: dict[int, float] = {}
        self.stopping = False

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        for index in range(self.count):
            self._start(index)
        while not self.stopping:
            sentinels = [p.sentinel for p in self.workers.values()]
            wait(sentinels, timeout=1.0)
            if not self.stopping:
                self._restart_dead()
        self._stop_all()
        return 0

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping = True

    def _start(self, index: int) -> None:
        process = self.context.Process(
            target=worker_main,
            args=(self.config, index, self.sock.getsockname()[1]),
            name=f"manifold-worker-{index}",
            daemon=False,
        )
        process.start()
        self.workers[index] = process
        self.started[index] = time.monotonic()

    def _restart_dead(self) -> None:
        from manifold.metrics import worker_gone

        for index, process in list(self.workers.items()):
            if process.is_alive():
                continue
            if process.pid is not None:
                worker_gone(process.pid)
            log.warning("worker %d (pid %s) ended with %s; restarting it",
                        index, process.pid, process.exitcode)  # fmt: skip
            if time.monotonic() - self.started[index] < YOUNG_SECONDS:
                time.sleep(RESTART_PAUSE)
            if not self.stopping:
                self._start(index)

    def _stop_all(self) -> None:
        for process in self.workers.values():
            if process.is_alive() and process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + max(self.config.shutdown_seconds, 0) + STOP_MARGIN
        for process in self.workers.values():
            process.join(max(deadline - time.monotonic(), 0.1))
        for process in self.workers.values():
            if process.is_alive():
                log.error("worker pid %s did not stop in time; killing it", process.pid)
                process.kill()
                process.join()
        self.sock.close()


def worker_main(config: Config, index: int, port: int) -> None:
    """One worker: the app on a socket of its own on ``port`` (the parent's port, see the
    module's docstring), protocol servers in worker 0 only."""
    import uvicorn

    from manifold.app import create_app
    from manifold.container import Services
    from manifold.server import bound_socket, tune_collector, uvicorn_config

    _die_with_parent()
    logs.setup(config.log_level, config.log_format)
    sock = bound_socket(config.address, port, shared_port=True)
    services = Services.build(config)
    services.migrate_on_start = False  # the parent did it
    app = create_app(config, services, listeners=index == 0)
    server = uvicorn.Server(uvicorn_config(app, config))
    tune_collector()
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    sys.exit(0 if server.started else 1)


def _die_with_parent() -> None:
    """Ask Linux to send SIGTERM to this worker if the parent dies (killed, say)."""
    with contextlib.suppress(OSError, AttributeError):
        libc: Any = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def run(config: Config, count: int) -> int:
    """Serve with ``count`` workers until SIGTERM or SIGINT; the exit status."""
    from manifold.metrics import prepare_multiprocess
    from manifold.server import bound_socket

    if config.metrics:
        prepare_multiprocess(config.data_dir)
    sock = bound_socket(config.address, config.port, shared_port=True)
    created = asyncio.run(prepare(config))
    if created:
        sys.stdout.write(
            f"Successfully created the admin user and the initial password is: {created}\n"
        )
        sys.stdout.flush()
    return Supervisor(config, sock, count).run()
