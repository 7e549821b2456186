"""The FTP driver: a folder of an FTP server, ``Obj.path`` the server's absolute path.

Every call borrows a logged-in connection from the storage's pool (``pool``) and
gives it back; connections that broke are dropped, so a server that restarted is
reached again by the next call. Listings use MLSD where the server offers it (sizes
and UTC times for files and folders), else ``LIST``; the lines are parsed in batches
as they arrive, in the storage's threads, and a folder past the server's
``max_listing_entries`` is refused once that many have come. Downloads are range readers:
``REST`` then ``RETR`` on a pooled connection, ended with ``ABOR`` once the range is
read, so many small reads (an archive's) keep reusing a few connections. A download
the HTTP server streams over plain HTTP is spliced from the data connection into the
client's socket (``spliced``) unless the data connection is FTPS.

Uploads go to a temporary name in the target folder (``Temporaries``), are checked
for their byte count and renamed into place; a failed or cancelled one deletes its
temporary file, on a connection of its own, and when even that fails (the server is
down) the name is remembered and deleted by the next connection made. Temporary names
never show in listings, and ones left for a day (a process killed mid-upload; FTP
times may be the server's local time) are deleted when their folder is listed.
"""

from __future__ import annotations

import builtins
import posixpath
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import aioftp

from manifold.drivers import reach
from manifold.drivers.base import (
    FOLDER_MOVE,
    Driver,
    LinkArgs,
    Seen,
    Temporaries,
    Temporary,
    Upload,
    check_size,
    is_temporary,
    made_progress,
    too_many_entries,
    validate_name,
)
from manifold.drivers.ftp.errors import ftp_errors
from manifold.drivers.ftp.listing import LINK, Entry, parse_list, parse_mlsx
from manifold.drivers.ftp.meta import CONFIG, Addition
from manifold.drivers.ftp.pool import ConnectionPool
from manifold.drivers.ftp.protocol import Connection, DataChannel, Endpoint, ReplyError
from manifold.drivers.ftp.settings import clean_root, endpoint
from manifold.drivers.ftp.spliced import spliced
from manifold.drivers.ftp.transfer import transfer
from manifold.errors import (
    InvalidRequest,
    NotAFile,
    NotAFolder,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    ServerError,
    TemporaryFailure,
)
from manifold.models import DiskUsage, Link, Obj, Storage, new_obj
from manifold.splice import Step, claim

CHUNK = 4 << 20
# Seconds ``drop`` waits for deletions of temporaries still under way.
CLEANUP_SECONDS = 10.0
# A temporary this old is left over from a process that died mid-upload.
STALE_AFTER = timedelta(days=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _join(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"


def _name(name: str) -> str:
    validate_name(name)
    if "\r" in name or "\n" in name:
        raise InvalidRequest("FTP cannot carry a line break in a name")
    return name


class FtpDriver(Driver[Addition]):
    # Neither promise is kept. FTP's RNTO replaces whatever holds the name, so a put
    # without overwrite is checked just before the rename, a best effort the server
    # does not decide (no EXCLUSIVE_CREATE; Manifold's services serialise racing puts).
    # Folder times come only from MLSD, which vsftpd and many others lack (no
    # FOLDER_TIMES). A folder moves in one RNFR/RNTO (FOLDER_MOVE).
    PROMISES = frozenset({FOLDER_MOVE})

    def __init__(self, storage: Storage, options: Addition) -> None:
        super().__init__(storage, options)
        # Public for its counters: ``logins`` (connections made) and ``reuses``.
        self.pool = ConnectionPool(self._open, CONFIG.max_concurrency)
        self._endpoint: Endpoint | None = None
        self._root = ""
        # One that could not be deleted is deleted by the next connection made.
        self._temps = Temporaries(
            f"ftp://{options.address}", self._delete_temp, join=_join, stale_after=STALE_AFTER
        )

    async def init(self) -> None:
        """Check the options, log in and find the root folder."""
        self._endpoint = endpoint(self.options)
        self._root = await self.pool.run(self._find_root)

    async def drop(self) -> None:
        with suppress(Exception):
            await self._temps.drain(CLEANUP_SECONDS)
        self.pool.close()

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        return await self.pool.run(lambda conn: self._list(conn, dir.path))

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        """A range reader: the server streams the bytes through this one (only_local)."""
        if file.is_dir:
            raise NotAFile()
        path = file.path
        return Link(reader=lambda offset, length: self._read(path, offset, length), relay=self)

    async def root_obj(self) -> Obj:
        root = self._root or clean_root(self.options.root_folder_path)
        modified = self.storage.modified or _EPOCH
        return Obj(name="", size=0, is_dir=True, modified=modified, path=root)

    def folder_at(self, path: str) -> Obj | None:
        # A listing refused tells a file and nothing apart itself (``_entries``).
        inside = path.strip("/")
        if not inside:
            return None
        target = _join(self._root, inside)
        return new_obj(posixpath.basename(target), 0, True, _EPOCH, None, target, "")

    async def get(self, path: str) -> Obj:
        if path.strip("/") == "":
            return await self.root_obj()
        target = _join(self._root, path.strip("/"))
        entry = await self.pool.run(lambda conn: self._stat(conn, target))
        if entry is None:
            raise ObjectNotFound()
        return _obj(posixpath.dirname(target), entry)

    async def details(self) -> DiskUsage:
        """The free space, where the server answers ``AVBL`` (a draft extension some
        servers have; its size it never tells): ``NotSupported`` elsewhere."""
        reply = await self.pool.run(lambda conn: conn.ask(f"AVBL {self._root}"))
        free = reply.text.split(" ")[0]
        if reply.code != "213" or not free.isdigit():
            raise NotSupported("the FTP server does not tell its free space (AVBL)")
        return DiskUsage(0, 0, int(free))

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        path = _join(parent.path, _name(name))
        return await self.pool.run(lambda conn: self._make_dir(conn, parent.path, path))

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        if posixpath.dirname(src.path) == dst_dir.path:
            return src
        inside = dst_dir.path == src.path or dst_dir.path.startswith(src.path.rstrip("/") + "/")
        if src.is_dir and inside:
            raise ServerError("the destination folder is a subfolder of the source folder")
        target = _join(dst_dir.path, posixpath.basename(src.path))
        await self.pool.run(lambda conn: self._rename(conn, src.path, target))
        return replace(src, path=target)

    async def rename(self, src: Obj, new_name: str) -> Obj:
        name = _name(new_name)
        target = _join(posixpath.dirname(src.path), name)
        if target != src.path:
            await self.pool.run(lambda conn: self._rename(conn, src.path, target))
        return replace(src, name=name, path=target)

    async def remove(self, obj: Obj) -> None:
        await self.pool.run(lambda conn: self._remove(conn, obj.path))

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        name = _name(upload.name)
        target = _join(dst_dir.path, name)
        temp = self._temps.new(dst_dir.path)
        async with self._temps.writing(temp):
            written = await self.pool.run(
                lambda conn: self._store(conn, temp, target, upload), "write"
            )
        modified = upload.modified or datetime.now(UTC)
        return Obj(name=name, size=written, is_dir=False, modified=modified, path=target)

    # --- connections ---------------------------------------------------------------

    async def _open(self) -> Connection:
        """A new logged-in connection, which first deletes the temporaries left over."""
        if self._endpoint is None:
            raise ServerError("storage not init")
        with ftp_errors():
            conn = await _connected(self._endpoint)
            try:
                await self._temps.retry(lambda path, _: _delete(conn, path))
            except BaseException:
                conn.close()
                raise
        return conn

    async def _find_root(self, conn: Connection) -> str:
        root = clean_root(self.options.root_folder_path)
        with ftp_errors():
            if not root.startswith("/"):  # relative to the folder the login starts in
                reply = await conn.do("PWD")
                start = str(aioftp.Client.parse_directory_response(reply.text))
                root = posixpath.normpath(_join(start, root))
            entry = await conn.stat(root)
        if entry is None or not entry.is_dir:
            raise ObjectNotFound(f"root folder {root} not exists")
        return root

    # --- what each call does on its connection ---------------------------------------

    async def _list(self, conn: Connection, path: str) -> builtins.list[Obj]:
        with ftp_errors():
            entries = await self._entries(conn, path)
            if not entries and path != self._root:
                # A server may answer a listing of nothing with no lines rather than
                # a refusal: an empty one is checked (``folder_at``).
                await self._refuse_missing_folder(conn, path)
            objs, temps = [], []
            for entry in entries:
                if is_temporary(entry.name):
                    temps.append(Seen(_join(path, entry.name), entry.is_dir, entry.modified))
                    continue
                if entry.kind == LINK:
                    resolved = await conn.stat(_join(path, entry.name))
                    if resolved is None:
                        continue  # a link that leads nowhere
                    entry = resolved._replace(name=entry.name, modified=entry.modified)
                objs.append(_obj(path, entry))
            for temp in self._temps.stale(temps):
                await conn.ask(f"DELE {temp.path}")
        return objs

    async def _entries(self, conn: Connection, path: str) -> builtins.list[Entry]:
        """Every entry of folder ``path``, temporaries included; ``ObjectNotFound`` or
        ``NotAFolder`` when it is not a folder."""
        entries: builtins.list[Entry] = []
        limit = self.resources.max_listing_entries
        now = datetime.now(UTC)

        async def take(lines: builtins.list[bytes], machine: bool) -> None:
            # Parsed in this storage's threads: 200,000 lines never hold the event loop.
            entries.extend(await self.run_blocking(_parsed, lines, machine, conn.decode, now))
            if len(entries) > limit:
                raise too_many_entries(path, limit)

        try:
            await conn.listing(path, take)
        except ReplyError as exc:
            if exc.code.startswith("5"):
                await self._refuse_missing_folder(conn, path)
            raise
        return entries

    async def _refuse_missing_folder(self, conn: Connection, path: str) -> None:
        entry = await conn.stat(path)
        if entry is None:
            raise ObjectNotFound()
        if not entry.is_dir:
            raise NotAFolder()

    async def _stat(self, conn: Connection, path: str) -> Entry | None:
        with ftp_errors():
            return await conn.stat(path, times=True)

    async def _make_dir(self, conn: Connection, parent: str, path: str) -> Obj:
        with ftp_errors():
            reply = await conn.ask(f"MKD {path}")
            if reply.ok():
                return Obj(path.rsplit("/", 1)[1], 0, True, datetime.now(UTC), path=path)
            entry = await conn.stat(path)
            if entry is not None:
                if not entry.is_dir:
                    raise ObjectExists()
                return _obj(parent, entry)  # idempotent: the folder is there already
            if reply.code.startswith("5"):
                await self._refuse_missing_folder(conn, parent)
            raise ReplyError("MKD", reply)

    async def _rename(self, conn: Connection, src: str, target: str) -> None:
        with ftp_errors():
            if await conn.stat(target) is not None:
                raise ObjectExists()
            await conn.do(f"RNFR {src}", "3")
            await conn.do(f"RNTO {target}")

    async def _remove(self, conn: Connection, path: str) -> None:
        """DELE first, whatever the caller thinks ``path`` is: it removes a file, and a
        link to a folder as the link itself. A real folder is emptied then removed."""
        with ftp_errors():
            reply = await conn.ask(f"DELE {path}")
            if reply.ok():
                return
            entry = await conn.stat(path)
            if entry is None:
                raise ObjectNotFound()
            if not entry.is_dir:
                raise ReplyError("DELE", reply)
            await self._remove_tree(conn, path)

    async def _remove_tree(self, conn: Connection, top: str) -> None:
        """Empty and remove folder ``top``, deepest folders first, without recursion.
        A listed folder is tried with DELE first: MLSD follows links, and a link to a
        folder must go as a link, never by emptying the folder it leads to."""
        folders, order = [top], []
        while folders:
            folder = folders.pop()
            order.append(folder)
            for entry in await self._entries(conn, folder):
                child = _join(folder, entry.name)
                if entry.is_dir and not (await conn.ask(f"DELE {child}")).ok():
                    folders.append(child)
                elif not entry.is_dir:
                    await conn.do(f"DELE {child}")
                made_progress()
        for folder in reversed(order):
            await conn.do(f"RMD {folder}")
            made_progress()

    async def _store(self, conn: Connection, temp: Temporary, target: str, upload: Upload) -> int:
        with ftp_errors():
            await self._refuse_taken(conn, target, upload.overwrite)
            temp.made = True
            data = await conn.open_data(f"STOR {temp.path}")
        written = await _send(conn, data, upload)
        with ftp_errors():
            try:
                await data.shut()
            except BaseException:
                conn.broken = True
                raise
            await conn.final()
            await _check_stored(conn, temp.path, written)
            if upload.modified is not None and conn.features.mfmt:
                await conn.ask(f"MFMT {upload.modified.astimezone(UTC):%Y%m%d%H%M%S} {temp.path}")
            # Best effort: RNTO replaces, so the name is looked at just before; the
            # services serialise racing puts to one name.
            await self._refuse_taken(conn, target, upload.overwrite)
            await conn.do(f"RNFR {temp.path}", "3")
            await conn.do(f"RNTO {target}")
        return written

    async def _refuse_taken(self, conn: Connection, target: str, overwrite: bool) -> None:
        entry = await conn.stat(target)
        if entry is not None and (entry.is_dir or not overwrite):
            raise ObjectExists()

    async def _delete_temp(self, path: str, is_dir: bool) -> bool:
        """Delete an upload's temporary, on a connection of the pool's."""
        return await self.pool.run(lambda conn: _delete(conn, path))

    # --- downloads -------------------------------------------------------------------

    async def _read(self, path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
        """Bytes ``[offset, offset + length)`` of ``path`` from a pooled connection,
        which goes back to the pool in step however the reading ends."""
        if length == 0:
            return
        sink = claim(self, offset, length)
        if sink is not None and self._endpoint is not None and self._endpoint.tls is None:
            source = transfer(
                self.pool,
                path,
                offset,
                length,
                Connection.open_socket,
                spliced(sink),
                announce=True,
            )
        else:
            source = transfer(self.pool, path, offset, length, Connection.open_data, _chunk)
        try:
            async for piece in source:
                yield piece
        finally:
            await source.aclose()  # now, not when collected: the connection goes back


async def _delete(conn: Connection, path: str) -> bool:
    """DELE ``path``; whether it is gone now (550: it was not there)."""
    with ftp_errors():
        reply = await conn.ask(f"DELE {path}")
    return reply.ok() or reply.code == "550"


async def _chunk(conn: Connection, data: DataChannel, remaining: int | None) -> Step:
    """The next piece of a transfer read through Python, ``CHUNK`` at most."""
    want = CHUNK if remaining is None else min(CHUNK, remaining)
    try:
        with ftp_errors():
            chunk = await data.read(want)
    except BaseException:
        conn.broken = True  # the transfer is cut: its replies are unknown
        raise
    return Step(len(chunk), not chunk, chunk)


async def _send(conn: Connection, data: DataChannel, upload: Upload) -> int:
    """Write the upload's stream to ``data``; the stream's own errors pass unchanged,
    and a wrong byte count raises ``InvalidRequest`` (a long one as soon as it shows)."""
    written = 0
    try:
        async for chunk in upload.stream:
            written += len(chunk)
            if upload.size is not None and written > upload.size:
                check_size(written, upload.size)
            if chunk:
                with ftp_errors():
                    await data.write(chunk)
        check_size(written, upload.size)
    except BaseException:
        data.close()
        conn.broken = True  # the server still owes the STOR's reply
        raise
    return written


async def _check_stored(conn: Connection, path: str, written: int) -> None:
    """The server's size of the finished temporary (where it tells) must be ours."""
    reply = await conn.ask(f"SIZE {path}")
    if reply.code == "213" and reply.text.isdigit() and int(reply.text) != written:
        raise TemporaryFailure(f"the FTP server stored {reply.text} of {written} bytes")


def _parsed(
    lines: builtins.list[bytes],
    machine: bool,
    decode: Callable[[bytes], str | None],
    now: datetime,
) -> builtins.list[Entry]:
    """The entries of a batch of listing lines (MLSD's when ``machine``); a line that
    does not decode or parse is left out."""
    entries = []
    for raw in lines:
        line = decode(raw)
        if line is None:
            continue
        entry = parse_mlsx(line) if machine else parse_list(line, now)
        if entry is not None:
            entries.append(entry)
    return entries


def _obj(folder: str, entry: Entry) -> Obj:
    modified = entry.modified or _EPOCH
    path = _join(folder, entry.name)
    return new_obj(entry.name, entry.size, entry.is_dir, modified, None, path, "")


DRIVER = FtpDriver


async def _connected(where: Endpoint) -> Connection:
    """A connection to ``where``; a socket that cannot be opened names the host and port
    the admin typed and why (TLS and timeouts keep the error table's own words)."""
    try:
        return await Connection.open(where)
    except (ssl.SSLError, TimeoutError):
        raise
    except OSError as exc:
        host = f"[{where.host}]" if ":" in where.host else where.host
        raise reach.unreachable("FTP", f"{host}:{where.port}", exc) from exc
