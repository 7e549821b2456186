"""The SFTP driver: ``Obj.path`` is the file's absolute path on the server.

Every call goes over the storage's one SSH connection (``session.Connector``), which
reopens itself after a loss; a call that fails as the network fails is a
``TemporaryFailure`` and marks the connection lost, so the next call reconnects.

Listings follow symlinks (one ``stat`` each, side by side): a link whose target cannot
be read fails the listing, or is left out with ``ignore_symlink_error``. Pipes,
sockets and devices are left out: a read of one could block or never end.

Uploads and copies are written under a ``RESERVED_PREFIX`` name in the target folder
and renamed into place when whole. Without overwrite that is the plain SFTP rename,
which OpenSSH refuses over an existing name (it links the new name, which the kernel
refuses when taken): of racing writers one wins. With overwrite it is OpenSSH's
``posix-rename``, an atomic replace, as is a move or rename over a file
(``move_over``). Temporaries are ``Temporaries``': one that could not be removed
when a transfer failed (the connection was gone) is removed after the next
reconnect, and stale ones left by a process that died go when their folder is listed.

Copies run on the server with OpenSSH's ``copy-data`` extension, a part at a time so
that other requests on the connection are not held for a whole big file; a server
without it has the bytes read and written back through this one.
"""

from __future__ import annotations

import asyncio
import builtins
import posixpath
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar, cast

import asyncssh

from manifold.drivers.base import (
    EXCLUSIVE_CREATE,
    Driver,
    ErrorTable,
    LinkArgs,
    Seen,
    Temporaries,
    Temporary,
    Upload,
    check_size,
    is_temporary,
    made_progress,
    translating,
    validate_name,
)
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotAFile,
    NotAFolder,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.models import DiskUsage, Link, Obj, Storage, new_obj

from .lister import Listed
from .meta import Addition
from .session import KEEPALIVE_SECONDS, Connector, Credentials, parse_address

T = TypeVar("T")

# Bytes asked of the server per read and written per write; asyncssh splits each
# into the server's largest requests and keeps them in flight together.
READ_CHUNK = 2 << 20
WRITE_CHUNK = 2 << 20
# Bytes one copy-data request copies: other requests wait behind it on the server.
COPY_CHUNK = 16 << 20
# Entries per page of a listing (the server sends about a hundred per round trip).
PAGE_SIZE = 1000
# Removals and link lookups sent at once.
FAN_OUT = 16
# Seconds a file handle's close may take before it is left to the server.
CLOSE_SECONDS = 10.0

_DIR = asyncssh.FILEXFER_TYPE_DIRECTORY
_FILE = asyncssh.FILEXFER_TYPE_REGULAR
_LINK = asyncssh.FILEXFER_TYPE_SYMLINK
_SHOWN = (_FILE, _DIR)  # pipes, sockets and devices are left out
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SUBFOLDER = "the destination folder is a subfolder of the source folder"
# What a server answers when a folder will not open for listing: OpenSSH says "no such
# file" for a file too, another server may say "not a directory" or just "failure".
_NOT_LISTED = (asyncssh.SFTPNoSuchFile, asyncssh.SFTPNotADirectory, asyncssh.SFTPFailure)


def _gone(exc: Exception) -> ManifoldError:
    reason = getattr(exc, "reason", "") or getattr(exc, "strerror", "") or type(exc).__name__
    return TemporaryFailure(f"SFTP connection lost: {reason}")


def _failed(exc: Exception) -> ManifoldError:
    reason = getattr(exc, "reason", "") or type(exc).__name__
    return ServerError(f"SFTP server error: {reason}")


# What the library raises when the connection fails under a request.
NETWORK = (
    asyncssh.SFTPConnectionLost,
    asyncssh.SFTPNoConnection,
    asyncssh.DisconnectError,
    asyncssh.ChannelOpenError,
    OSError,
)

# The library's exceptions onto ``manifold.errors``. OpenSSH speaks SFTP version 3,
# whose one ``SFTPFailure`` covers a taken name, a folder not empty and more: the
# methods that can meet a taken name look at the target to tell.
ERRORS: ErrorTable = {
    asyncssh.SFTPNoSuchFile: ObjectNotFound,
    asyncssh.SFTPNoSuchPath: ObjectNotFound,
    asyncssh.SFTPPermissionDenied: PermissionDenied,
    asyncssh.SFTPWriteProtect: PermissionDenied,
    asyncssh.SFTPFileAlreadyExists: ObjectExists,
    asyncssh.SFTPDirNotEmpty: ObjectExists,
    asyncssh.SFTPNotADirectory: NotAFolder,
    asyncssh.SFTPFileIsADirectory: NotAFile,
    asyncssh.SFTPOpUnsupported: NotSupported,
    asyncssh.SFTPConnectionLost: _gone,
    asyncssh.SFTPNoConnection: _gone,
    asyncssh.SFTPError: _failed,
    asyncssh.DisconnectError: _gone,
    asyncssh.ChannelOpenError: _gone,
    OSError: _gone,  # reset, broken pipe, timeouts
}


def _time(attrs: asyncssh.SFTPAttrs) -> datetime:
    return datetime.fromtimestamp(attrs.mtime, UTC) if attrs.mtime is not None else _EPOCH


def _stamp(mtime: int | None) -> datetime | None:
    return None if mtime is None else datetime.fromtimestamp(mtime, UTC)


def _obj(name: str, path: str, attrs: asyncssh.SFTPAttrs) -> Obj:
    is_dir = attrs.type == _DIR
    size = 0 if is_dir else attrs.size or 0
    return new_obj(name, size, is_dir, _time(attrs), None, path, "")


def _listed(name: str, attrs: asyncssh.SFTPAttrs) -> Listed:
    return Listed(name, attrs.type, attrs.size or 0, attrs.mtime)


def _listed_obj(entry: Listed, prefix: str, times: dict[int | None, datetime]) -> Obj:
    """A listed file or folder as an ``Obj``; ``prefix`` is its folder's path and "/".
    ``times`` keeps the times made so far: the entries of a folder share a few."""
    is_dir = entry.kind == _DIR
    when = times.get(entry.mtime)
    if when is None:
        when = times[entry.mtime] = _stamp(entry.mtime) or _EPOCH
    size = 0 if is_dir else entry.size
    return new_obj(entry.name, size, is_dir, when, None, prefix + entry.name, "")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class SftpDriver(Driver[Addition]):
    # Seconds between keepalives on a quiet connection; a server that misses three is
    # taken as gone (a class attribute, so a storage with short limits can shorten it).
    KEEPALIVE_SECONDS: ClassVar[float] = KEEPALIVE_SECONDS

    def __init__(self, storage: Storage, options: Addition) -> None:
        super().__init__(storage, options)
        self._connector: Connector | None = None
        self._root = "/"
        self._root_modified = _EPOCH
        self._promises = self.PROMISES
        self._temps = Temporaries(f"sftp://{options.address}", self._remove_temp)

    async def init(self) -> None:
        """Connect and log in, pin the host key on first use, and check the root."""
        options = self.options
        host, port = parse_address(options.address)
        if not options.username:
            raise InvalidRequest("username is required")
        credentials = Credentials(
            host, port, options.username, options.password, options.private_key, options.passphrase
        )
        self._connector = Connector(
            credentials, self._pinned, self._pin, self._remove_leftovers, self.KEEPALIVE_SECONDS
        )
        try:
            await self._find_root()
        except BaseException:
            await self.drop()
            raise
        if "OpenSSH" not in self._connector.server_version:
            # Only OpenSSH's server is known to refuse a rename over a taken name
            # atomically; another may check and rename as two steps.
            self._promises = self.PROMISES - {EXCLUSIVE_CREATE}

    async def drop(self) -> None:
        with suppress(Exception):
            await self._temps.drain(CLOSE_SECONDS)
        connector, self._connector = self._connector, None
        if connector is not None:
            with suppress(Exception):
                await connector.close()

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        return [obj async for page in self.list_pages(dir) for obj in page]

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        return Link(reader=lambda offset, length: self._read(file.path, offset, length))

    def promises(self) -> frozenset[str]:
        return self._promises

    async def root_obj(self) -> Obj:
        return Obj(name="", size=0, is_dir=True, modified=self._root_modified, path=self._root)

    async def list_pages(self, dir: Obj) -> AsyncGenerator[builtins.list[Obj], None]:
        assert self._connector is not None
        sftp, lister = await self._connector.lister()
        scan = _scan(sftp, dir.path) if lister is None else lister.scan(dir.path)
        pages = _pages(scan, PAGE_SIZE)
        try:
            first = True
            while True:
                with self._errors(sftp):
                    try:
                        names = await _next_bounded(pages)
                    except _NOT_LISTED:
                        if first:
                            await self._refuse_missing_folder(sftp, dir.path)
                        raise
                    objs = await self._objs(sftp, dir.path, names)
                first = False
                if objs:
                    yield objs
                if len(names) < PAGE_SIZE:
                    return
        finally:
            await _close_scan(pages)  # the pages first: they hold the scan
            await _close_scan(scan)

    def folder_at(self, path: str) -> Obj | None:
        # A listing tells a file and nothing from a folder itself (its first page).
        inside = path.strip("/")
        if not inside:
            return None
        full = posixpath.join(self._root, inside)
        return new_obj(posixpath.basename(full), 0, True, _EPOCH, None, full, "")

    async def get(self, path: str) -> Obj:
        inside = path.strip("/")
        if not inside:
            return await self.root_obj()
        full = posixpath.join(self._root, inside)
        sftp = await self._client()
        with self._errors(sftp):
            attrs = await sftp.stat(full)
        return _obj(posixpath.basename(full), full, attrs)

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        path = posixpath.join(parent.path, validate_name(name))
        sftp = await self._client()
        with self._errors(sftp):
            # A taken name: a folder is returned as it is, anything else refused below.
            with suppress(asyncssh.SFTPFailure):
                await sftp.mkdir(path)
            attrs = await sftp.stat(path)
        if attrs.type != _DIR:
            raise ObjectExists()
        return _obj(posixpath.basename(path), path, attrs)

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        if posixpath.dirname(src.path) == posixpath.normpath(dst_dir.path):
            return src
        if src.is_dir and _inside(dst_dir.path, src.path):
            raise ServerError(_SUBFOLDER)
        target = posixpath.join(dst_dir.path, src.name)
        await self._rename_new(src.path, target)
        return replace(src, path=target)

    async def rename(self, src: Obj, new_name: str) -> Obj:
        name = validate_name(new_name)
        target = posixpath.join(posixpath.dirname(src.path), name)
        if target != src.path:
            await self._rename_new(src.path, target)
        return replace(src, name=name, path=target)

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        sftp = await self._client()
        target = posixpath.join(dst_dir.path, src.name)
        with self._errors(sftp):
            attrs = await sftp.stat(src.path)
            is_dir = attrs.type == _DIR
            if is_dir and _inside(dst_dir.path, src.path):
                raise ServerError(_SUBFOLDER)
            if await _exists(sftp, target):
                raise ObjectExists()
        temp = self._temps.new(dst_dir.path, is_dir)
        temp.made = True
        async with self._temps.writing(temp):
            with self._errors(sftp):
                if is_dir:
                    await self._copy_tree(sftp, src.path, temp.path)
                    await self._place_folder(sftp, temp.path, target)
                else:
                    await self._copy_file(sftp, src.path, temp.path, attrs)
                    await _place_file(sftp, temp.path, target, overwrite=False)
        with self._errors(sftp):
            placed = await sftp.stat(target)
        return _obj(src.name, target, placed)

    async def remove(self, obj: Obj) -> None:
        sftp = await self._client()
        with self._errors(sftp):
            attrs = await sftp.lstat(obj.path)
            if attrs.type == _DIR:
                await _remove_tree(sftp, obj.path)
            else:
                await sftp.remove(obj.path)

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        name = validate_name(upload.name)
        target = posixpath.join(dst_dir.path, name)
        temp = self._temps.new(dst_dir.path)
        sftp, file = await self._twice(lambda sftp: self._create(sftp, temp))
        temp.made = True
        async with self._temps.writing(temp):
            try:
                written = await self._write(sftp, file, upload.stream)
            except BaseException:
                await _close(file)
                raise
            with self._errors(sftp):
                await file.close()
            check_size(written, upload.size)
            with self._errors(sftp):
                if upload.modified is not None:
                    stamp = upload.modified.timestamp()
                    await sftp.utime(temp.path, (stamp, stamp))
                await _place_file(sftp, temp.path, target, upload.overwrite)
        with self._errors(sftp):
            attrs = await sftp.stat(target)
        return _obj(name, target, attrs)

    async def move_over(self, src: Obj, dst_dir: Obj, name: str, replaced: Obj) -> Obj:
        """OpenSSH's ``posix-rename``, a rename(2) on the server: the name changes hands
        in one step. ``NotSupported`` from a server without the extension."""
        target = posixpath.join(dst_dir.path, validate_name(name))
        sftp = await self._client()
        with self._errors(sftp):
            if (await sftp.stat(src.path)).type == _DIR:
                raise NotAFile()
            if target != src.path:
                try:
                    await sftp.posix_rename(src.path, target)
                except asyncssh.SFTPFailure as exc:  # rename(2) refuses a folder there
                    if await _is_folder(sftp, target):
                        raise ObjectExists() from exc
                    raise
            placed = await sftp.stat(target)
        return _obj(posixpath.basename(target), target, placed)

    async def details(self) -> DiskUsage:
        sftp = await self._client()
        with self._errors(sftp):
            fs = await sftp.statvfs(self._root)
        return DiskUsage.of(fs.blocks * fs.frsize, fs.bavail * fs.frsize)

    # --- connection ----------------------------------------------------------------

    async def _client(self) -> asyncssh.SFTPClient:
        if self._connector is None:
            raise ServerError("storage not init")
        return await self._connector.client()

    @contextmanager
    def _errors(self, sftp: asyncssh.SFTPClient) -> Iterator[None]:
        """Translate the library's errors; one of the network's gives the connection up."""
        try:
            with translating(ERRORS):
                yield
        except TemporaryFailure:
            if self._connector is not None:
                self._connector.lost(sftp)
            raise

    async def _twice(
        self, call: Callable[[asyncssh.SFTPClient], Awaitable[T]]
    ) -> tuple[asyncssh.SFTPClient, T]:
        """``call`` on the connection, or again on a new one if that one proved dead.

        A connection the server dropped while idle is found dead only by the next
        request. For the first request of a transfer (opening its file), which the
        layers do not repeat (they retry calls, not transfers), this is a second try.
        """
        sftp = await self._client()
        try:
            with self._errors(sftp):
                return sftp, await call(sftp)
        except TemporaryFailure:
            pass
        sftp = await self._client()  # a new connection
        with self._errors(sftp):
            return sftp, await call(sftp)

    async def _create(self, sftp: asyncssh.SFTPClient, temp: Temporary) -> asyncssh.SFTPClientFile:
        """Make and open the new file ``temp``. A request whose answer was lost with
        its connection (or its caller) may have made it: it is remembered, and the
        reconnect removes it before the second try makes it anew."""
        try:
            return await sftp.open(temp.path, "xb")
        except (*NETWORK, asyncio.CancelledError):
            self._temps.remember(temp.path)
            raise

    def _pinned(self) -> str:
        return self.options.host_key_fingerprint.strip()

    async def _pin(self, fingerprint: str) -> None:
        """Trust on first use: the key offered now is the one required from now on."""
        self.options.host_key_fingerprint = fingerprint
        await self.save_options()

    async def _find_root(self) -> None:
        sftp = await self._client()
        root = self.options.root_folder_path.strip() or "/"
        with self._errors(sftp):
            if not root.startswith("/"):
                root = await sftp.realpath(root)  # relative to the login folder
            root = posixpath.normpath(root)
            try:
                attrs = await sftp.stat(root)
            except asyncssh.SFTPNoSuchFile:
                raise ObjectNotFound(f"root folder {root} not exists") from None
        if attrs.type != _DIR:
            raise NotAFolder(f"root folder {root} is not a folder")
        self._root, self._root_modified = root, _time(attrs)

    # --- listing -------------------------------------------------------------------

    async def _objs(
        self, sftp: asyncssh.SFTPClient, folder: str, names: builtins.list[Listed]
    ) -> builtins.list[Obj]:
        """A page of entries as objects, in one pass over them (a listing's most
        frequent work): temporaries swept, links followed side by side and put where
        they were listed, pipes, sockets and devices left out."""
        prefix = folder.rstrip("/") + "/"
        times: dict[int | None, datetime] = {}
        objs: builtins.list[Obj] = []
        temps: builtins.list[Listed] = []
        links: builtins.list[tuple[int, str]] = []
        for entry in names:
            name = entry.name
            if name == "." or name == "..":
                continue
            if is_temporary(name):
                temps.append(entry)
            elif entry.kind == _LINK:
                links.append((len(objs), name))
            elif entry.kind in _SHOWN:
                objs.append(_listed_obj(entry, prefix, times))
        if temps:
            await self._sweep(sftp, folder, temps)
        if links:
            await self._add_links(sftp, folder, objs, links, times)
        return objs

    async def _add_links(
        self,
        sftp: asyncssh.SFTPClient,
        folder: str,
        objs: builtins.list[Obj],
        links: builtins.list[tuple[int, str]],
        times: dict[int | None, datetime],
    ) -> None:
        """Put each link's target in ``objs`` under the link's name, at the place it was
        listed (before ``objs[index]``); broken ones skipped, or the listing failed."""
        prefix = folder.rstrip("/") + "/"
        followed = await _fan_out([self._follow(sftp, folder, name) for _, name in links])
        added = 0
        for (index, _), seen in zip(links, followed, strict=True):
            if seen is not None and seen.kind in _SHOWN:
                objs.insert(index + added, _listed_obj(seen, prefix, times))
                added += 1

    async def _follow(self, sftp: asyncssh.SFTPClient, folder: str, name: str) -> Listed | None:
        """A link's target as an entry of its name; None for a broken link that is
        skipped."""
        path = posixpath.join(folder, name)
        try:
            return _listed(name, await sftp.stat(path))
        except NETWORK:
            raise
        except asyncssh.SFTPError as exc:
            if self.options.ignore_symlink_error:
                return None
            raise ServerError(
                f"failed to follow the symlink {path}: {exc.reason} "
                "(ignore_symlink_error leaves such links out)"
            ) from exc

    async def _refuse_missing_folder(self, sftp: asyncssh.SFTPClient, path: str) -> None:
        """OpenSSH answers "no such file" for a listing of a file (others a failure):
        tell a file, nothing and a folder that would not open apart."""
        try:
            attrs = await sftp.stat(path)
        except asyncssh.SFTPNoSuchFile:
            raise ObjectNotFound() from None
        if attrs.type != _DIR:
            raise NotAFolder()

    # --- reading -------------------------------------------------------------------

    async def _read(self, path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
        """Bytes ``[offset, offset + length)`` of ``path``; the next chunk is already
        being fetched while the caller takes one, so the connection never idles."""
        sftp, file = await self._twice(lambda sftp: sftp.open(path, "rb"))
        end = None if length is None else offset + length

        def fetch(at: int) -> asyncio.Future[bytes | str] | None:
            want = READ_CHUNK if end is None else min(READ_CHUNK, end - at)
            return asyncio.ensure_future(file.read(want, at)) if want > 0 else None

        ahead = fetch(offset)
        try:
            while ahead is not None:
                with self._errors(sftp):
                    data = await ahead
                ahead = None
                if not data:
                    return
                if not isinstance(data, bytes):
                    raise ServerError("the SFTP client returned text for a binary read")
                offset += len(data)
                ahead = fetch(offset)
                yield data
        finally:  # also when the reader is closed early: the handle is released
            if ahead is not None:
                await _settle(ahead)
            await _close(file)

    # --- writing -------------------------------------------------------------------

    async def _write(
        self, sftp: asyncssh.SFTPClient, file: asyncssh.SFTPClientFile, stream: AsyncIterator[bytes]
    ) -> int:
        """Write every chunk of ``stream`` in batches, the next one gathered while the
        last is being written. The stream's own errors propagate unchanged, only the
        server's are translated."""
        written = 0
        batch = bytearray()
        writing: asyncio.Future[int] | None = None
        try:
            async for chunk in stream:
                batch += chunk
                if len(batch) >= WRITE_CHUNK:
                    with self._errors(sftp):
                        if writing is not None:
                            await writing
                        writing = asyncio.ensure_future(file.write(bytes(batch), written))
                    written += len(batch)
                    batch.clear()
            with self._errors(sftp):
                if writing is not None:
                    await writing
                writing = None
                if batch:
                    await file.write(bytes(batch), written)
                    written += len(batch)
        except BaseException:
            if writing is not None:
                await _settle(writing)
            raise
        return written

    async def _rename_new(self, old: str, new: str) -> None:
        """Rename without replacing: OpenSSH refuses a taken name (``ObjectExists``)."""
        sftp = await self._client()
        with self._errors(sftp):
            try:
                await sftp.rename(old, new)
            except asyncssh.SFTPFailure as exc:
                if await _exists(sftp, new):
                    raise ObjectExists() from exc
                raise

    async def _place_folder(self, sftp: asyncssh.SFTPClient, temp: str, target: str) -> None:
        """Put a finished folder copy in place, refusing a taken name even under a race.

        OpenSSH renames a folder after checking the name is free, two steps another
        rename can slip between (and a rename onto an empty folder replaces it). So
        the name is claimed first by making it (exactly one ``mkdir`` succeeds), then
        the copy replaces the empty claim in one ``posix-rename``.
        """
        try:
            await sftp.mkdir(target)
        except asyncssh.SFTPFailure as exc:
            if await _exists(sftp, target):
                raise ObjectExists() from exc
            raise
        try:
            await sftp.posix_rename(temp, target)
        except asyncssh.SFTPOpUnsupported:
            await sftp.rmdir(target)
            await sftp.rename(temp, target)
        except BaseException:
            with suppress(asyncssh.SFTPError):
                await sftp.rmdir(target)
            raise

    async def _copy_tree(self, sftp: asyncssh.SFTPClient, source: str, target: str) -> None:
        """Copy folder ``source`` to ``target`` (which must not exist), any depth;
        links stay links, pipes and devices are left out."""
        pending = [(source, target)]
        while pending:
            src, dst = pending.pop()
            await sftp.mkdir(dst)
            for entry in await sftp.readdir(src):
                name = str(entry.filename)
                if name in (".", ".."):
                    continue
                src_path, dst_path = posixpath.join(src, name), posixpath.join(dst, name)
                kind = entry.attrs.type
                if kind == _DIR:
                    pending.append((src_path, dst_path))
                elif kind == _LINK:
                    await sftp.symlink(await sftp.readlink(src_path), dst_path)
                elif kind == _FILE:
                    await self._copy_file(sftp, src_path, dst_path, entry.attrs)
            attrs = await sftp.stat(src)
            await sftp.utime(dst, (attrs.atime or 0, attrs.mtime or 0))

    async def _copy_file(
        self, sftp: asyncssh.SFTPClient, source: str, target: str, attrs: asyncssh.SFTPAttrs
    ) -> None:
        """Copy file ``source`` to the new file ``target``, keeping its times."""
        async with await sftp.open(source, "rb") as src, await sftp.open(target, "xb") as dst:
            size = (await src.stat()).size or 0
            if self._connector is not None and self._connector.copy_data:
                for start in range(0, size, COPY_CHUNK):
                    part = min(COPY_CHUNK, size - start)
                    await sftp.remote_copy(src, dst, start, part, start)
            else:
                for start in range(0, size, READ_CHUNK):
                    data = await src.read(READ_CHUNK, start)
                    if not data:
                        break
                    await dst.write(data, start)
        await sftp.utime(target, (attrs.atime or 0, attrs.mtime or 0))

    # --- temporaries -----------------------------------------------------------------

    async def _remove_temp(self, path: str, tree: bool) -> bool:
        """Remove a failed transfer's temporary, on a live connection."""
        return await _remove_quietly(await self._client(), path, tree)

    async def _remove_leftovers(self, sftp: asyncssh.SFTPClient) -> None:
        await self._temps.retry(lambda path, tree: _remove_quietly(sftp, path, tree))

    async def _sweep(
        self, sftp: asyncssh.SFTPClient, folder: str, names: builtins.list[Listed]
    ) -> None:
        """Remove the stale temporaries a listing met (a process died writing them)."""
        seen = [
            Seen(posixpath.join(folder, n.name), n.kind == _DIR, _stamp(n.mtime))
            for n in names
            if is_temporary(n.name)
        ]
        if seen:
            await self._temps.sweep(seen, lambda path, tree: _remove_quietly(sftp, path, tree))


async def _scan(sftp: asyncssh.SFTPClient, path: str) -> AsyncIterator[builtins.list[Listed]]:
    """A folder's entries through the library's own listing, for a server that allows
    one channel per connection (no ``Lister``)."""
    scan = cast(AsyncGenerator[asyncssh.SFTPName, None], sftp.scandir(path))
    try:
        async for name in scan:
            yield [_listed(str(name.filename), name.attrs)]
    finally:
        await scan.aclose()


async def _pages(
    scan: AsyncIterator[builtins.list[Listed]], size: int
) -> AsyncGenerator[builtins.list[Listed], None]:
    """The scan's entries in pages of ``size``; the last one is shorter (maybe empty)."""
    page: builtins.list[Listed] = []
    async for names in scan:
        page += names
        while len(page) >= size:
            yield page[:size]
            page = page[size:]
    yield page


async def _next_bounded(
    pages: AsyncGenerator[builtins.list[Listed], None],
) -> builtins.list[Listed]:
    """The next page, but a page cut off by its time limit does not wait past
    ``CLOSE_SECONDS`` for the folder handle's close, which the library's scan awaits
    as it unwinds: a server that stopped answering would hold the call until the
    keepalive gives its connection up."""
    taking = asyncio.ensure_future(anext(pages))
    try:
        return await asyncio.shield(taking)
    except asyncio.CancelledError:
        taking.cancel()
        # Its outcome is retrieved whenever it comes: the cancellation is what counts.
        taking.add_done_callback(lambda done: done.cancelled() or done.exception())
        await asyncio.wait([taking], timeout=CLOSE_SECONDS)
        raise


async def _fan_out(calls: builtins.list[Any]) -> builtins.list[Any]:
    """Await ``calls`` (coroutines) at most ``FAN_OUT`` at a time, results in order."""
    slots = asyncio.Semaphore(FAN_OUT)

    async def limited(call: Any) -> Any:
        async with slots:
            return await call

    return builtins.list(await asyncio.gather(*(limited(call) for call in calls)))


async def _exists(sftp: asyncssh.SFTPClient, path: str) -> bool:
    try:
        await sftp.lstat(path)
    except asyncssh.SFTPNoSuchFile:
        return False
    return True


async def _is_folder(sftp: asyncssh.SFTPClient, path: str) -> bool:
    try:
        return (await sftp.stat(path)).type == _DIR
    except asyncssh.SFTPError:
        return False


async def _settle(fetch: asyncio.Future[Any]) -> None:
    """Let a read nobody wants any more end (cancelled if slow); never raises but for
    the caller's own cancellation."""
    await asyncio.wait([fetch], timeout=CLOSE_SECONDS)
    if not fetch.done():
        fetch.cancel()
        await asyncio.wait([fetch])
    if not fetch.cancelled():
        fetch.exception()  # retrieved: the reader is closing anyway


async def _close_scan(scan: AsyncIterator[Any]) -> None:
    """Close a listing's folder handle, also when its page was cut off by the time
    limit: a server that stopped answering is not waited for past ``CLOSE_SECONDS``
    (the keepalive gives its connection up later)."""
    with suppress(Exception):
        async with asyncio.timeout(CLOSE_SECONDS):
            await cast(AsyncGenerator[Any, None], scan).aclose()


async def _close(file: asyncssh.SFTPClientFile) -> None:
    """Close a handle on a way out that is already failing: never raises or hangs."""
    with suppress(Exception):
        async with asyncio.timeout(CLOSE_SECONDS):
            await file.close()


async def _place_file(sftp: asyncssh.SFTPClient, temp: str, target: str, overwrite: bool) -> None:
    """Rename the finished ``temp`` to ``target``; a folder there is never replaced."""
    try:
        if overwrite:
            await _replace(sftp, temp, target)
        else:
            await sftp.rename(temp, target)
    except asyncssh.SFTPFailure as exc:
        if await _exists(sftp, target):
            raise ObjectExists() from exc
        raise


async def _replace(sftp: asyncssh.SFTPClient, temp: str, target: str) -> None:
    try:
        await sftp.posix_rename(temp, target)
    except asyncssh.SFTPOpUnsupported:
        # No atomic replace on this server: the old file goes first.
        with suppress(asyncssh.SFTPNoSuchFile):
            if (await sftp.lstat(target)).type != _DIR:
                await sftp.remove(target)
        await sftp.rename(temp, target)


async def _remove_tree(sftp: asyncssh.SFTPClient, root: str) -> None:
    """Remove folder ``root`` and everything in it: files first, then the folders from
    the deepest up. Links are removed, never followed."""
    folders: builtins.list[str] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        folders.append(folder)
        files: builtins.list[str] = []
        for entry in await sftp.readdir(folder):
            name = str(entry.filename)
            if name in (".", ".."):
                continue
            path = posixpath.join(folder, name)
            (pending if entry.attrs.type == _DIR else files).append(path)
        made_progress()
        await _fan_out([_remove_file(sftp, path) for path in files])
    for folder in reversed(folders):
        await sftp.rmdir(folder)
        made_progress()


async def _remove_file(sftp: asyncssh.SFTPClient, path: str) -> None:
    with suppress(asyncssh.SFTPNoSuchFile):  # gone meanwhile: what was wanted
        await sftp.remove(path)
    made_progress()


async def _remove_quietly(sftp: asyncssh.SFTPClient, path: str, tree: bool) -> bool:
    """Remove ``path``; whether it is gone now. Never raises."""
    try:
        attrs = await sftp.lstat(path)
        if tree and attrs.type == _DIR:
            await _remove_tree(sftp, path)
        else:
            await sftp.remove(path)
    except asyncssh.SFTPNoSuchFile:
        return True
    except Exception:
        return False
    return True


DRIVER = SftpDriver
