"""The one rclone process a server runs for all its Rclone storages.

``rclone rcd`` answers the remote control API (``operations/*``, ``sync/*``,
``config/*``) and, with ``--rc-serve``, ranged GETs of any remote's objects. It is
started on first use, started again whenever it dies (a call meanwhile waits for it,
or fails as temporary), and stopped with the server: ``aclose`` ends it, and the
launcher makes Linux kill it should the server die without a word.

Nothing secret is on its command line, which every local user can read: the remotes
live in a config file this module creates 0600 in a private folder of the data
folder, and the API's random login goes through the environment. The API listens on
a loopback TCP port chosen at each start, which only that login opens; since every
request carries it, none is sent before ``/proc`` shows this rclone listening on the
port (``listening.py``: another local user could take a chosen port first). Its
memory is bounded by ``GOMEMLIMIT`` and rclone's own buffer flags.

Speed: ``--rc-serve`` streams as fast as ``rclone cat`` (curl on the socket, S3 and
SFTP remotes), and neither the buffer flags, larger pieces handed on, a task reading
ahead of the client (aiohttp already reads as data arrives) nor larger socket buffers
on this side change a download through this server measurably. What it loses against
``rclone cat`` on two loaded cores is CPU time: the relay adds this process, a second
copy through the kernel and the client to the pipeline (about 0.4 CPU-seconds per
256 MiB together).
Nor did a long read fetched as two 64 MiB ranges side by side (an SFTP remote
gained in some runs, lost in others; an S3 one on moto lost, each ranged GET starting
over at the object's first-byte latency). A unix socket, which the API used first,
was 8-9% slower than the loopback port (its sender's buffer, 208 KiB, bounds each of
rclone's writes): ``bench_remote``'s rc-sftp 0.85x -> 0.93x, rc-s3 0.72x -> 0.78x.
A download this server streams over plain HTTP skips the relay's copies: its body is
spliced from rclone's answer into the client's socket (``spliced``): rc-s3 0.76-0.79x ->
0.85-0.89x, rc-sftp 0.82-0.90x -> 0.90-0.93x of ``rclone cat`` on ``bench_remote``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from manifold.drivers.rclone.feeder import Feeder
from manifold.drivers.rclone.listening import free_port, listened_by
from manifold.drivers.rclone.spliced import Answer, open_body, relay
from manifold.drivers.resources import Resources
from manifold.drivers.transport import AiohttpTransport
from manifold.errors import TemporaryFailure
from manifold.splice import Sink

log = logging.getLogger("manifold.rclone")

# The pinned rclone installed beside this Python (never the system's older one).
RCLONE = str(Path(sys.executable).with_name("rclone"))
LAUNCHER = str(Path(__file__).with_name("launcher.py"))
# The Go runtime collects harder as it nears this; with the buffer flags below, a few
# dozen transfers at once stay well under it.
MEMORY_LIMIT = "512MiB"
FLAGS = (
    "--rc-serve",
    # An object store's own modification time: the time an upload set is metadata,
    # read with one request per object, which makes a big folder list for minutes.
    "--use-server-modtime",
    # Read-ahead per transfer (16 MiB by default), and all buffers together.
    "--buffer-size=1M",
    "--max-buffer-memory=256M",
    "--use-mmap",
    # A transfer may take hours; stalls are this server's to catch (its idle layer).
    "--rc-server-read-timeout=24h",
    "--rc-server-write-timeout=24h",
    "--log-level=NOTICE",
)
# Seconds a call waits for rclone to answer after a start, a metadata call may take,
# and rclone is given to stop before it is killed.
START_SECONDS = 30.0
CALL_SECONDS = 300.0
STOP_SECONDS = 5.0
# Seconds before a dead rclone is started again, doubled after each quick death.
FIRST_RESTART = 0.2
LONGEST_RESTART = 10.0
# A run this long resets the wait: it was no crash loop.
STEADY_SECONDS = 60.0
POLL_SECONDS = 0.05


class RcloneError(Exception):
    """An rc call rclone refused: its HTTP status and its error text (never the call's
    input, which rclone echoes and may hold passwords)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def rclone_of(resources: Resources) -> Rclone:
    """The server's one rclone (made on first use, closed with ``resources``): in a
    ``rclone`` folder of the data folder, or of a temporary one outside a server."""
    return resources.shared("rclone", lambda: Rclone(_base(resources) / "rclone"))


def _base(resources: Resources) -> Path:
    if resources.data_dir is not None:
        return resources.data_dir
    return Path(tempfile.gettempdir()) / "manifold"


class ListingTooLong(Exception):
    """A listing's answer holds more entries than asked for."""


class Rclone:
    """The process, its API client and its config file (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        # Private to this process: several server processes may share a data folder.
        self.folder = folder / str(os.getpid())
        self.config_path = self.folder / "rclone.conf"
        self.feeder = Feeder()
        self._port = 0  # rclone's API port on 127.0.0.1, chosen at each start
        self._login = (secrets.token_hex(16), secrets.token_hex(32))
        self._client: httpx.AsyncClient | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._up = asyncio.Event()
        self._closed = False
        self._providers: dict[str, dict[str, bool]] | None = None
        # How many times rclone was started (a restart counts).
        self.starts = 0

    @property
    def pid(self) -> int | None:
        """The running rclone's process id (None while it is not running)."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    @property
    def api_port(self) -> int | None:
        """The loopback port of rclone's API while the running rclone is known to be
        the one listening there (None meanwhile): nothing is sent anywhere else."""
        return self._port if self._up.is_set() else None

    # --- calls ---------------------------------------------------------------------

    async def call(
        self,
        command: str,
        params: dict[str, Any],
        seconds: float | None = CALL_SECONDS,
        *,
        limit: int = 0,
    ) -> dict[str, Any]:
        """Run an rc command; its answer, or ``RcloneError``. ``seconds`` None: a call
        as long as the transfer it makes (its stalls are caught elsewhere). ``limit``:
        a listing holding more entries is refused (``ListingTooLong``) as soon as its
        answer shows them, before it is all read."""
        client = await self.ready()
        request = client.build_request("POST", f"/{command}", json=params, timeout=seconds)
        try:
            response = await client.send(request, stream=True)
            try:
                body = await _answer(response, limit)
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            raise _unreachable() from exc
        if response.status_code != 200:
            raise RcloneError(response.status_code, str(body.get("error", "")))
        return body

    async def read(
        self,
        fs: str,
        remote: str,
        start: int,
        length: int | None,
        sink: Sink | None = None,
    ) -> AsyncGenerator[bytes, None]:
        """Bytes ``start`` to ``start + length`` (None: to the end) of a remote's file,
        streamed through ``--rc-serve``. ``RcloneError`` (404) when it is not there.
        ``sink``: the client's socket, into which the body is spliced when it can be
        (``drivers.rclone.spliced``)."""
        if length == 0:
            return
        client = await self.ready()
        end = "" if length is None else str(start + length - 1)
        url = "/" + quote(f"[{fs}]/{remote}", safe="/")
        ranged = f"bytes={start}-{end}"
        if sink is not None:
            answer = await self._spliceable(url, ranged)
            if answer is not None:
                async for data in relay(answer, sink):
                    yield data
                return
        request = client.build_request("GET", url, headers={"Range": ranged}, timeout=_READING)
        try:
            response = await client.send(request, stream=True)
        except httpx.TransportError as exc:
            raise _unreachable() from exc
        try:
            if response.status_code not in (200, 206):
                raise await _refusal(response)
            async for data in response.aiter_raw():
                yield data
        except httpx.TransportError as exc:  # rclone died or gave up mid-stream
            raise TemporaryFailure(f"rclone stopped sending the file: {exc}") from exc
        finally:
            await response.aclose()

    async def _spliceable(self, url: str, ranged: str) -> Answer | None:
        """The ranged GET on a connection of its own, its head read, for its body to
        be spliced; None when its answer is not one (read it the ordinary way)."""
        port = self.api_port
        if port is None:  # it died since ``ready``; the one it starts is not verified yet
            raise _unreachable()
        try:
            return await open_body(port, url, self._login, ranged)
        except OSError as exc:
            raise _unreachable() from exc

    async def providers(self) -> dict[str, dict[str, bool]]:
        """rclone's backend types, each with its options (True for a password)."""
        if self._providers is None:
            found = await self.call("config/providers", {})
            self._providers = {
                p["Prefix"]: {o["Name"]: bool(o.get("IsPassword")) for o in p["Options"]}
                for p in found.get("providers", [])
            }
        return self._providers

    def config_stamp(self) -> int:
        """When the config file last changed (rclone rewrites it to save a refreshed
        OAuth token); 0 when there is none."""
        with contextlib.suppress(OSError):
            return self.config_path.stat().st_mtime_ns
        return 0

    # --- the process -----------------------------------------------------------------

    async def ready(self) -> httpx.AsyncClient:
        """The API client once rclone answers: started here on first use, waited for
        while it starts again; ``TemporaryFailure`` when it does not answer in time."""
        if self._closed:
            raise TemporaryFailure("rclone is stopped: the server is stopping")
        if self._supervisor is None:
            self._prepare()
            self._supervisor = asyncio.create_task(self._supervise())
        try:
            await asyncio.wait_for(self._up.wait(), START_SECONDS)
        except TimeoutError:
            raise TemporaryFailure(
                f"rclone did not answer within {START_SECONDS:g}s of starting; "
                "it is started again, try again shortly"
            ) from None
        assert self._client is not None
        return self._client

    def _prepare(self) -> None:
        """A private folder with an empty config file (0600) for this process's rclone;
        the folders of server processes that died are removed (their config files held
        secrets)."""
        _sweep_dead(self.folder.parent)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        (self.folder / "tmp").mkdir(mode=0o700, exist_ok=True)
        descriptor = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(descriptor, 0o600)
        os.close(descriptor)
        transport = AiohttpTransport(limits=httpx.Limits())
        self._client = httpx.AsyncClient(
            base_url="http://127.0.0.1",
            transport=transport,
            auth=self._login,
            timeout=httpx.Timeout(CALL_SECONDS, connect=10.0),
            trust_env=False,
        )

    async def _supervise(self) -> None:
        """Run rclone, and run it again each time it ends until the server stops."""
        delay = FIRST_RESTART
        while not self._closed:
            began = time.monotonic()
            await self._run_once()
            if self._closed:
                return
            if time.monotonic() - began > STEADY_SECONDS:
                delay = FIRST_RESTART
            log.warning("rclone stopped; starting it again in %gs", delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, LONGEST_RESTART)

    async def _run_once(self) -> None:
        try:
            process = await self._spawn()
        except OSError as exc:
            log.error("rclone could not be started: %s", exc)
            return
        self._process, self.starts = process, self.starts + 1
        try:
            if await self._answering(process):
                self._up.set()
            else:  # it died, or hangs
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            await process.wait()
        finally:
            self._up.clear()

    async def _spawn(self) -> asyncio.subprocess.Process:
        assert self._client is not None
        self._port = free_port()
        self._client.base_url = httpx.URL(f"http://127.0.0.1:{self._port}")
        user, password = self._login
        env = {
            "PATH": os.defpath,
            "HOME": str(self.folder),
            "TMPDIR": str(self.folder / "tmp"),
            "GOMEMLIMIT": MEMORY_LIMIT,
            "RCLONE_CONFIG": str(self.config_path),
            "RCLONE_RC_USER": user,
            "RCLONE_RC_PASS": password,
        }
        argv = [sys.executable, "-I", LAUNCHER, str(os.getpid()), RCLONE, "rcd"]
        argv += [f"--rc-addr=127.0.0.1:{self._port}", *FLAGS]
        argv.append(f"--log-file={self.folder / 'rclone.log'}")
        return await asyncio.create_subprocess_exec(
            *argv,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            # Out of the server's process group: a terminal's Ctrl-C or a service
            # manager's signal to the group reaches the server, which then stops rclone
            # in order, instead of rclone dying first and being started again.
            start_new_session=True,
        )

    async def _answering(self, process: asyncio.subprocess.Process) -> bool:
        """Whether rclone answers a no-op within ``START_SECONDS`` (False: it died or
        hangs)."""
        assert self._client is not None
        deadline = time.monotonic() + START_SECONDS
        while process.returncode is None and time.monotonic() < deadline:
            # The login goes with every request: none is sent before the port is
            # known to be this rclone's (another local user may have taken it first).
            if not listened_by(process.pid, self._port):
                await asyncio.sleep(POLL_SECONDS)
                continue
            with contextlib.suppress(httpx.TransportError):
                response = await self._client.post("/rc/noop", json={}, timeout=5.0)
                if response.status_code == 200:
                    return True
            await asyncio.sleep(POLL_SECONDS)
        return False

    async def aclose(self) -> None:
        """Stop rclone (the server stops) and remove its folders, config included."""
        self._closed = True
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.gather(supervisor, return_exceptions=True)
        await self._stop_process()
        await self.feeder.aclose()
        if self._client is not None:
            await self._client.aclose()
        shutil.rmtree(self.folder, ignore_errors=True)

    async def _stop_process(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_SECONDS)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


_READING = httpx.Timeout(None, connect=10.0)
# An entry of a listing, counted as the answer arrives: the key can only appear
# unescaped where an entry begins (a quote inside a name is escaped).
_ENTRY = b'"IsDir":'


def _unreachable() -> TemporaryFailure:
    return TemporaryFailure("rclone is not answering (it is started again); try again shortly")


async def _answer(response: httpx.Response, limit: int) -> dict[str, Any]:
    """The JSON answer (``{}`` when it is not JSON), its entries counted as it arrives
    when ``limit`` is set."""
    body, entries = bytearray(), 0
    counting = limit > 0 and response.status_code == 200
    async for data in response.aiter_raw():
        start = max(0, len(body) - len(_ENTRY) + 1)  # a key split between two pieces
        body += data
        if counting:
            entries += body.count(_ENTRY, start)
            if entries > limit:
                raise ListingTooLong()
    try:
        found = json.loads(body) if body else {}
    except ValueError:
        found = {"error": body.decode("utf-8", "replace")[:200]}
    return found if isinstance(found, dict) else {}


async def _refusal(response: httpx.Response) -> RcloneError:
    body = await response.aread()
    try:
        message = str(json.loads(body).get("error", ""))
    except ValueError:
        message = body.decode("utf-8", "replace")[:200]
    return RcloneError(response.status_code, message or f"HTTP {response.status_code}")


def _sweep_dead(parent: Path) -> None:
    """Remove the folders of server processes that are gone."""
    if not parent.is_dir():
        return
    for entry in parent.iterdir():
        if entry.name.isdigit() and not _alive(int(entry.name)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
