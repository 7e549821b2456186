"""The FTP server: aioftp's connection handling, with Manifold's commands over
``GuardedOps`` and the one credential check.

aioftp runs each connection (greeting, a task per command, the ordered replies,
``ABOR``, ``REST``, ``QUIT``; ``connections`` ends one quietly when the client goes);
the commands that touch the tree, the login, TLS and the data connections are this
module's, registered as ``ftp_<verb>`` methods, and every error they meet is answered
through ``replies.CODES``. The data connections and their transfers are ``data``'s.

TLS as AList offers it: implicit (the listener speaks TLS from the first byte) or
explicit (``AUTH TLS`` upgrades the control connection in place; ``PROT P`` protects
the data connections), and ``ftp_mandatory_tls`` refuses a login before ``AUTH TLS``.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aioftp import Connection, ThrottleStreamIO

from manifold.errors import ManifoldError, NotAFile
from manifold.models import Obj
from manifold.protocols.ftp.channel import DataChannel
from manifold.protocols.ftp.connections import GONE, ControlConnections
from manifold.protocols.ftp.data import NoFreePort, open_passive, start_transfer
from manifold.protocols.ftp.listing import facts, list_line, stamp
from manifold.protocols.ftp.ports import PortPair
from manifold.protocols.ftp.replies import reply_of
from manifold.protocols.ftp.session import Session
from manifold.services.auth.credentials import Credentials
from manifold.services.fs.ops import GuardedOps

GREETING = "AList FTP Endpoint"
GUESTS = {"anonymous", "guest"}
IDLE_SECONDS = 900  # AList's idle_timeout
BLOCK = 1 << 20
FEATURES = ("UTF8", "SIZE", "MDTM", "REST STREAM", "MLST type*;size*;modify*;perm*;",
            "EPSV", "PASV", "TVFS")  # fmt: skip
# Commands a client may send before logging in.
_OPEN = {"user", "pass", "auth", "pbsz", "prot", "feat", "opts", "syst", "noop", "quit"}


@dataclass(slots=True)
class FtpOptions:
    """What the settings say, read once when the server starts."""

    public_host: str = ""  # the IPv4 address PASV answers; empty: the server's own
    ports: list[PortPair] = field(default_factory=list)
    tls: ssl.SSLContext | None = None
    mandatory_tls: bool = False
    implicit_tls: bool = False


@dataclass(slots=True)
class State:
    """One control connection's own state besides aioftp's."""

    tls: bool = False
    protect: bool = False
    username: str | None = None
    session: Session | None = None
    rename_from: str | None = None


Command = Callable[["FtpServer", Connection, State, str], Awaitable[None]]
Handler = Callable[[Connection, str], Awaitable[bool]]


class FtpServer(ControlConnections):
    def __init__(self, ops: GuardedOps, credentials: Credentials, options: FtpOptions) -> None:
        super().__init__(
            idle_timeout=IDLE_SECONDS,
            wait_future_timeout=30,
            ssl=options.tls if options.implicit_tls else None,
            welcome_message=GREETING,
        )
        self.ops = ops
        self.credentials = credentials
        self.options = options
        for name in dir(self):
            if name.startswith("ftp_"):
                self.commands_mapping[name[4:]] = self._answering(name[4:], getattr(self, name))
        self.commands_mapping["xpwd"] = self.commands_mapping["pwd"]
        self.commands_mapping["xmkd"] = self.commands_mapping["mkd"]
        self.commands_mapping["xrmd"] = self.commands_mapping["rmd"]

    @property
    def port(self) -> int:
        return self.address[1]

    async def greeting(self, connection: Connection, rest: str | object) -> bool:
        connection.state = State(tls=self.options.implicit_tls)
        return await super().greeting(connection, "")

    def _answering(
        self, verb: str, command: Callable[[Connection, State, str], Awaitable[None]]
    ) -> Handler:
        async def handle(connection: Connection, rest: str) -> bool:
            state: State = connection.state
            if state.session is None and verb not in _OPEN:
                connection.response("530", "please log in with USER and PASS first")
                return True
            try:
                await command(connection, state, rest)
            except ManifoldError as exc:
                connection.response(*reply_of(exc))
            return True

        return handle

    # --- login and TLS ----------------------------------------------------------------

    async def ftp_auth(self, connection: Connection, state: State, rest: str) -> None:
        if self.options.tls is None:
            connection.response("502", "TLS is not set up on this server")
        elif rest.strip().upper() not in ("TLS", "TLS-C", "SSL"):
            connection.response("504", f"AUTH {rest} is not supported")
        elif state.tls:
            connection.response("503", "the connection is already protected")
        else:
            try:
                await self._start_tls(connection.command_connection, self.options.tls)
            except GONE:
                # The handshake failed: nothing more can be said on this connection,
                # and closing it ends it as the client leaving does.
                connection.command_connection.close()
                return
            state.tls = True

    @staticmethod
    async def _start_tls(stream: ThrottleStreamIO, context: ssl.SSLContext) -> None:
        # The 234 goes out in clear text right before the handshake, with no turn of the
        # loop between (so no queued reply can follow it, nor a byte be read as text).
        stream.writer.write(b"234 AUTH TLS successful\r\n")
        await stream.writer.start_tls(context, ssl_handshake_timeout=30)

    async def ftp_pbsz(self, connection: Connection, state: State, rest: str) -> None:
        connection.response("200", "PBSZ=0")

    async def ftp_prot(self, connection: Connection, state: State, rest: str) -> None:
        level = rest.strip().upper()
        if level == "P" and self.options.tls is not None and state.tls:
            state.protect = True
            connection.response("200", "data connections are protected")
        elif level == "C" and not self.options.mandatory_tls:
            state.protect = False
            connection.response("200", "data connections are clear")
        else:
            connection.response("536", f"protection level {rest} is not available")

    async def ftp_user(self, connection: Connection, state: State, rest: str) -> None:
        if self.options.mandatory_tls and not state.tls:
            connection.response("530", "TLS is required: send AUTH TLS first")
        elif state.session is not None:
            connection.response("503", "already logged in")
        else:
            state.username = rest
            connection.response("331", "password required")

    async def ftp_pass(self, connection: Connection, state: State, rest: str) -> None:
        if state.session is not None:
            connection.response("503", "already logged in")
            return
        if state.username is None:
            connection.response("503", "send USER first")
            return
        name, client = state.username, connection.client_host
        try:
            if name.lower() in GUESTS:
                caller = await self.credentials.guest("ftp", client)
                session = Session(self.ops, caller, rest)  # the folder password, as AList
            else:
                caller = await self.credentials.password(name, rest, client, "ftp")
                session = Session(self.ops, caller)
        except ManifoldError as exc:
            state.username = None
            connection.response("530", " ".join(exc.message.split()))
            return
        state.session = session
        connection.logged = True
        connection.response("230", "logged in")

    async def ftp_feat(self, connection: Connection, state: State, rest: str) -> None:
        extra = ("AUTH TLS", "PBSZ", "PROT") if self.options.tls is not None else ()
        lines = ["Features:", *(f" {f}" for f in FEATURES + extra), "End"]
        # Continuation lines start with a space (RFC 2389), so they are written as is.
        connection.response("211", lines, True)

    async def ftp_opts(self, connection: Connection, state: State, rest: str) -> None:
        option = rest.strip().upper()
        if option in ("UTF8 ON", "UTF8", "UTF-8 ON") or option.startswith("MLST"):
            connection.response("200", "OK")
        else:
            connection.response("501", f"option {rest} is not understood")

    async def ftp_noop(self, connection: Connection, state: State, rest: str) -> None:
        connection.response("200", "OK")

    # --- navigation and small questions ------------------------------------------------

    async def ftp_pwd(self, connection: Connection, state: State, rest: str) -> None:
        cwd = _session(state).cwd.replace('"', '""')
        connection.response("257", f'"{cwd}" is the current folder')

    async def ftp_cwd(self, connection: Connection, state: State, rest: str) -> None:
        session = _session(state)
        path = session.path(rest)
        await session.folder(path)
        session.cwd = path
        connection.response("250", f"now in {path}")

    async def ftp_cdup(self, connection: Connection, state: State, rest: str) -> None:
        await self.ftp_cwd(connection, state, "..")

    async def ftp_size(self, connection: Connection, state: State, rest: str) -> None:
        found = await _file(state, rest)
        connection.response("213", str(found.size))

    async def ftp_mdtm(self, connection: Connection, state: State, rest: str) -> None:
        found = await _session(state).stat(_session(state).path(rest))
        connection.response("213", stamp(found.modified))

    async def ftp_mlst(self, connection: Connection, state: State, rest: str) -> None:
        session = _session(state)
        path = session.path(rest)
        found = await session.stat(path)
        connection.response("250", [f"Listing {path}", facts(found, path), "End"], True)

    async def ftp_type(self, connection: Connection, state: State, rest: str) -> None:
        # Bytes go as they are in either type, as AList sends them.
        ok = rest.strip().upper() in ("A", "A N", "I", "L 8", "L8")
        connection.response(
            *(("200", f"type set to {rest}") if ok else ("504", "type not supported"))
        )

    async def ftp_mode(self, connection: Connection, state: State, rest: str) -> None:
        ok = rest.strip().upper() == "S"
        connection.response(*(("200", "mode S") if ok else ("504", "only stream mode")))

    async def ftp_stru(self, connection: Connection, state: State, rest: str) -> None:
        ok = rest.strip().upper() == "F"
        connection.response(*(("200", "structure F") if ok else ("504", "only file structure")))

    async def ftp_allo(self, connection: Connection, state: State, rest: str) -> None:
        connection.response("202", "no need to allocate")

    async def ftp_site(self, connection: Connection, state: State, rest: str) -> None:
        verb, _, argument = rest.strip().partition(" ")
        if verb.upper() == "SIZE" and argument.strip().isdigit():
            # AList's hint of the next upload's size; uploads here need none.
            connection.response("200", "size noted")
        else:
            connection.response("504", f"SITE {verb} is not supported")

    # --- changes ----------------------------------------------------------------------

    async def ftp_mkd(self, connection: Connection, state: State, rest: str) -> None:
        session = _session(state)
        path = session.path(rest)
        await session.mkdir(path)
        connection.response("257", f'"{path.replace(chr(34), chr(34) * 2)}" created')

    async def ftp_rmd(self, connection: Connection, state: State, rest: str) -> None:
        session = _session(state)
        await session.remove(session.path(rest), folder=True)
        connection.response("250", "folder removed")

    async def ftp_dele(self, connection: Connection, state: State, rest: str) -> None:
        session = _session(state)
        await session.remove(session.path(rest), folder=False)
        connection.response("250", "file removed")

    async def ftp_rnfr(self, connection: Connection, state: State, rest: str) -> None:
        session = _session(state)
        path = session.path(rest)
        await session.stat(path)
        state.rename_from = path
        connection.response("350", "ready for RNTO")

    async def ftp_rnto(self, connection: Connection, state: State, rest: str) -> None:
        source, state.rename_from = state.rename_from, None
        if source is None:
            connection.response("503", "send RNFR first")
            return
        session = _session(state)
        await session.rename(source, session.path(rest))
        connection.response("250", "renamed")

    # --- data connections -------------------------------------------------------------

    async def ftp_pasv(self, connection: Connection, state: State, rest: str) -> None:
        host = self.options.public_host or connection.server_host
        if ":" in host:
            connection.response("522", "use EPSV on this connection")
            return
        port = await self._passive(connection, state)
        if port:
            numbers = [*host.split("."), str(port >> 8), str(port & 0xFF)]
            connection.response("227", f"Entering Passive Mode ({','.join(numbers)})")

    async def ftp_epsv(self, connection: Connection, state: State, rest: str) -> None:
        if rest.strip() and rest.strip().upper() not in ("1", "2", "ALL"):
            connection.response("522", "unknown network protocol, use (1,2)")
            return
        port = await self._passive(connection, state)
        if port:
            connection.response("229", f"Entering Extended Passive Mode (|||{port}|)")

    async def _passive(self, connection: Connection, state: State) -> int:
        if self.options.mandatory_tls and not state.protect:
            connection.response("521", "data connections must be protected: send PROT P")
            return 0
        tls = self.options.tls if state.protect else None
        try:
            return await open_passive(connection, self.options.ports, tls)
        except (NoFreePort, OSError):
            connection.response("425", "no free passive port")
            return 0

    async def ftp_list(self, connection: Connection, state: State, rest: str) -> None:
        now = datetime.now(UTC)
        entries = await self._entries(state, rest)
        text = "".join(list_line(obj, now) + "\r\n" for obj in entries)
        start_transfer(connection, f"LIST {rest}", _sender(text.encode()), _nothing)

    async def ftp_nlst(self, connection: Connection, state: State, rest: str) -> None:
        entries = await self._entries(state, rest)
        text = "".join(obj.name + "\r\n" for obj in entries)
        start_transfer(connection, f"NLST {rest}", _sender(text.encode()), _nothing)

    async def ftp_mlsd(self, connection: Connection, state: State, rest: str) -> None:
        session = _session(state)
        path = session.path(rest)
        await session.folder(path)
        entries = await session.list(path)
        text = "".join(facts(obj) + "\r\n" for obj in entries)
        start_transfer(connection, f"MLSD {path}", _sender(text.encode()), _nothing)

    async def _entries(self, state: State, rest: str) -> list[Obj]:
        """What LIST or NLST shows: a folder's entries, or the one file named."""
        session = _session(state)
        argument = rest.strip()
        while argument.startswith("-"):  # ls options some clients add (-a, -la)
            _, _, argument = argument.partition(" ")
            argument = argument.lstrip()
        path = session.path(argument)
        found = await session.stat(path)
        return await session.list(path) if found.is_dir else [found]

    async def ftp_retr(self, connection: Connection, state: State, rest: str) -> None:
        offset = connection.restart_offset
        path = _session(state).path(rest)
        handle = await _session(state).reader(path)
        if handle.obj.is_dir:
            await handle.aclose()
            raise NotAFile()

        async def send(channel: DataChannel) -> None:
            async for data in handle.stream(offset):
                await channel.write(data)

        start_transfer(connection, f"RETR {path}", send, handle.aclose)

    async def ftp_stor(self, connection: Connection, state: State, rest: str) -> None:
        await self._store(connection, state, rest, append=False)

    async def ftp_appe(self, connection: Connection, state: State, rest: str) -> None:
        await self._store(connection, state, rest, append=True)

    async def _store(self, connection: Connection, state: State, rest: str, append: bool) -> None:
        offset = 0 if append else connection.restart_offset
        session = _session(state)
        path = session.path(rest)
        handle = await session.writer(path, append, offset)

        async def receive(channel: DataChannel) -> None:
            # Put in place only after the client's clean end: a read past an unclean
            # one raises, and the handle is then aborted (nothing under the name).
            while data := await channel.read(BLOCK):
                await handle.write(handle.offset, data)
            await handle.close()

        start_transfer(connection, f"{'APPE' if append else 'STOR'} {path}", receive, handle.abort)


def _session(state: State) -> Session:
    assert state.session is not None  # commands other than _OPEN run logged in only
    return state.session


async def _file(state: State, rest: str) -> Obj:
    session = _session(state)
    found = await session.stat(session.path(rest))
    if found.is_dir:
        raise NotAFile()
    return found


def _sender(data: bytes) -> Callable[[DataChannel], Awaitable[None]]:
    async def send(channel: DataChannel) -> None:
        await channel.write(data)

    return send


async def _nothing() -> None:
    return None
