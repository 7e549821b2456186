"""One SMB storage's blocking work on its share, done in the storage's own threads.

smbclient (smbprotocol's high-level module) is synchronous: every function here
blocks, and the driver calls each one through ``Driver.run_blocking``. Paths given
here are the storage's own (``/a/b``, as users name them); ``names.Place`` makes them
UNC paths.

Connections: smbclient keeps its connections in a cache keyed by server and port;
this storage passes a dict of its own, so that no other storage ever shares its
sessions, and closes it when dropped. One connection carries all of the storage's
calls at once (SMB numbers its requests). Before each call a connection found closed
(the server went away: smbprotocol's reader saw the socket end) is dropped and a new
one made; a call failing because the connection or session broke under it drops it
too, and a call that is safe to repeat is made once more on a new one.
"""

from __future__ import annotations

import builtins
import errno
import posixpath
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import smbclient
from smbprotocol.exceptions import SMBException, SMBOSError
from smbprotocol.file_info import FileAttributes
from smbprotocol.header import NtStatus

from manifold.drivers.base import (
    Seen,
    Temporaries,
    is_temporary,
    made_progress,
    too_many_entries,
)
from manifold.errors import NotAFile, NotAFolder, ObjectExists, ObjectNotFound, ServerError
from manifold.models import DiskUsage, Obj, new_obj

from .failures import BROKEN_STATUSES, is_broken, status_of
from .meta import Addition
from .names import Place, from_wire, parse_address
from .watchdog import Watchdog, sever

T = TypeVar("T")

# Seconds to open the TCP connection and log in; smbclient waits 60 by default.
CONNECT_SECONDS = 10
# A folder changed this recently may change again within the same tick of its time,
# which a fingerprint taken now would not see.
_TICK_NS = 1_000_000_000
_DIRECTORY = FileAttributes.FILE_ATTRIBUTE_DIRECTORY
_REPARSE_POINT = FileAttributes.FILE_ATTRIBUTE_REPARSE_POINT
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A server that has no server-side copy answers one of these to its request.
_NO_SERVER_COPY = frozenset(
    {
        NtStatus.STATUS_NOT_SUPPORTED,
        NtStatus.STATUS_INVALID_DEVICE_REQUEST,
        NtStatus.STATUS_INVALID_PARAMETER,
    }
)


def _time(ns: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ns // 1000)


def _stat_obj(path: str, st: Any) -> Obj:
    is_dir = bool(st.st_file_attributes & _DIRECTORY)
    size = 0 if is_dir else int(st.st_size)
    name = posixpath.basename(path)
    return Obj(name, size, is_dir, _time(st.st_mtime_ns), _time(st.st_ctime_ns), path)


def _status(exc: SMBOSError) -> int:
    return int(exc.ntstatus)


class Handle:
    """An open file on the share (smbclient's unbuffered file object); one call on it
    at a time, so that closing it waits for a read or write under way. Each call waits
    ``seconds`` at most for the server (0: no limit), then its connection is severed."""

    def __init__(self, raw: Any, watchdog: Watchdog | None = None, seconds: float = 0) -> None:
        self._raw = raw
        self._lock = threading.Lock()
        self._closed = False
        self._watchdog = watchdog or Watchdog("unused")
        self._seconds = seconds if watchdog is not None else 0

    def read(self, size: int) -> bytes:
        with self._lock, self._watched():
            data: bytes = self._raw.read(size)
            return data

    def write(self, data: bytes) -> None:
        with self._lock, self._watched():
            view = memoryview(data)
            while view:  # one SMB write carries at most the server's write size
                view = view[self._raw.write(view) :]

    def _watched(self) -> Any:
        return self._watchdog.watch(self._seconds, self._sever)

    def _sever(self) -> None:
        connection = getattr(getattr(self._raw, "fd", None), "connection", None)
        if connection is not None:
            sever(connection)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                with self._watched():
                    self._raw.close()
            except Exception:
                # The connection broke, and the server closed the file with it. The
                # library has no public way to say so: without this its object warns
                # of a leaked handle when collected.
                with suppress(AttributeError):
                    self._raw.fd._connected = False
                raise


@dataclass(slots=True)
class OpenUpload:
    """A file being uploaded under a temporary name until it is put in place; its
    lock keeps a late ``create`` (from an upload given up) from making it anew."""

    path: str
    lock: threading.Lock
    handle: Handle | None = None
    done: bool = False  # put in place, or given up: nothing left to clean


class Share:
    """Where one storage's files are, how it logs in, and its connections."""

    def __init__(
        self,
        options: Addition,
        temps: Temporaries,
        call_seconds: float = 0,
        block_seconds: float = 0,
    ) -> None:
        self.host, self.port = parse_address(options.address)
        # How long a call, and a read or write of one block, may wait on the server.
        self.call_seconds = call_seconds
        self.block_seconds = block_seconds
        self.watchdog = Watchdog(f"manifold-smb-watch-{self.host}:{self.port}")
        # A new connection is not severed by the watchdog (nothing holds it yet): its
        # own time limit is no longer than a call's.
        self._connect_seconds = min(CONNECT_SECONDS, call_seconds or CONNECT_SECONDS)
        self.place = Place(self.host, options.share_name, options.root_folder_path)
        self.username = options.username
        self._connections: dict[str, Any] = {}
        self._lock = threading.Lock()
        # This storage's temporaries: those the server was not there to remove are
        # removed once it is back (``_connect``).
        self.temps = temps
        # Every smbclient call gets these: this storage's credentials, port and cache.
        self._kwargs: dict[str, Any] = {
            "username": options.username or None,
            "password": options.password or None,
            "port": self.port,
            "connection_cache": self._connections,
            "connection_timeout": self._connect_seconds,
        }

    def __repr__(self) -> str:  # never the password
        return f"Share({self.place.root!r}, port={self.port}, user={self.username!r})"

    # --- connections ------------------------------------------------------------

    def call(
        self, func: Callable[..., T], args: tuple[Any, ...], again: bool, bounded: bool = True
    ) -> T:
        """``func(*args)`` on a live connection; once more on a new one when ``again``
        and the connection broke under the first try. ``bounded``: the call fails as
        temporary once it has waited ``call_seconds`` on the server (a copy, whose
        length depends on the data, is not)."""
        seconds = self.call_seconds if bounded else 0
        try:
            return self._once(func, args, seconds)
        except Exception as exc:
            if not again or not is_broken(exc):
                raise
        return self._once(func, args, seconds)

    def _once(self, func: Callable[..., T], args: tuple[Any, ...], seconds: float) -> T:
        with self.watchdog.watch(seconds, self._sever_all):
            connection = self._connect()
            try:
                return func(*args)
            except Exception as exc:
                if is_broken(exc):
                    self._forget(connection, exc)
                raise

    def _sever_all(self) -> None:
        """Sever every connection of this storage (its server stopped answering). Taken
        without the lock, which a call hung while connecting holds."""
        for connection in tuple(self._connections.values()):
            sever(connection)

    def _connect(self) -> Any:
        """The live connection to the server, logged in; made now if there is none."""
        with self._lock:
            for key, connection in list(self._connections.items()):
                if not connection.transport.connected:
                    del self._connections[key]
                    _close(connection)
            if not self._connections:
                kwargs = self._kwargs
                smbclient.register_session(
                    self.host,
                    username=kwargs["username"],
                    password=kwargs["password"],
                    port=self.port,
                    connection_timeout=self._connect_seconds,
                    connection_cache=self._connections,
                )
                self.temps.retry_now(self.remove_temporary)
            return next(iter(self._connections.values()))

    def remove_temporary(self, path: str, is_dir: bool) -> bool:
        """Remove a temporary that could not be removed while the server was away."""
        try:
            self._remove(self.place.unc(path), is_dir)
        except SMBOSError as exc:  # gone already, or refused: the listing's sweep tries again
            return bool(_status(exc) != NtStatus.STATUS_SHARING_VIOLATION)  # open: later
        return True

    def _forget(self, connection: Any, exc: Exception) -> None:
        """Drop ``connection``, which a call found broken: its session is gone, or its
        socket closed. A socket that is still open failed some older connection's
        handle (a download's), and is kept."""
        with self._lock:
            if status_of(exc) not in BROKEN_STATUSES and connection.transport.connected:
                return
            for key, kept in list(self._connections.items()):
                if kept is connection:
                    del self._connections[key]
                    _close(connection)

    def close(self) -> None:
        """Log off and close every connection of this storage; a server that does not
        answer has them severed."""
        try:
            with self.watchdog.watch(self.call_seconds, self._sever_all), self._lock:
                connections = self._connections
                smbclient.reset_connection_cache(fail_on_error=False, connection_cache=connections)
        finally:
            self.watchdog.close()

    # --- reading ----------------------------------------------------------------

    def check_root(self) -> None:
        """The share must exist, and the root folder be a folder in it."""
        places = [(self.place.share, "share"), (self.place.root, "root folder")]
        for unc, what in places[:1] if self.place.root == self.place.share else places:
            try:
                st = smbclient.stat(unc, **self._kwargs)
            except SMBOSError as exc:
                if exc.errno == errno.ENOENT:
                    raise ObjectNotFound(f"{what} not found: {unc}") from exc
                raise
        if not st.st_file_attributes & _DIRECTORY:
            raise NotAFolder(f"root folder is not a folder: {self.place.root}")

    def scan(self, path: str, limit: int) -> builtins.list[Obj]:
        """The entries of folder ``path``, in the server's order, temporaries left out
        (and those left over by a process that died, removed). The server hands them
        over a query-directory answer at a time; past ``limit`` the scan stops, refused
        (``too_many_entries``)."""
        folder = self.place.unc(path)
        prefix = path.rstrip("/") + "/"
        objs: builtins.list[Obj] = []
        temps: builtins.list[Seen] = []
        with smbclient.scandir(folder, **self._kwargs) as entries:
            for entry in entries:
                info = entry.smb_info
                is_dir = bool(info.file_attributes & _DIRECTORY)
                if is_temporary(info.file_name):
                    temps.append(Seen(prefix + info.file_name, is_dir, info.last_write_time))
                    continue
                name = from_wire(info.file_name)
                size = 0 if is_dir else info.end_of_file
                modified, created = info.last_write_time, info.creation_time
                objs.append(new_obj(name, size, is_dir, modified, created, prefix + name, ""))
                if len(objs) > limit:
                    raise too_many_entries(path, limit)
        for stale in self.temps.stale(temps):
            self._discard(self.place.unc(stale.path), stale.is_dir)
        self.temps.retry_now(self.remove_temporary)  # those the server held open before
        return objs

    def stat(self, path: str) -> Obj:
        """The object at ``path`` (``/``: the root folder, named ``""``)."""
        return _stat_obj(path, smbclient.stat(self.place.unc(path), **self._kwargs))

    def token(self, path: str) -> str | None:
        """Folder ``path``'s identity and times of change, which change whenever an
        entry is made, removed or renamed in it; None while it may change unseen."""
        st = smbclient.stat(self.place.unc(path), **self._kwargs)
        if not st.st_file_attributes & _DIRECTORY:
            raise NotAFolder()
        if time.time_ns() - max(st.st_mtime_ns, st.st_chgtime_ns) < _TICK_NS:
            return None
        return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_chgtime_ns}"

    def open(self, path: str, offset: int) -> Handle:
        """File ``path`` opened for reading at ``offset``. Others may still write,
        rename or remove it meanwhile: a download never holds up an upload."""
        raw = smbclient.open_file(
            self.place.unc(path), mode="rb", buffering=0, share_access="rwd", **self._kwargs
        )
        raw.seek(offset)
        return Handle(raw, self.watchdog, self.block_seconds)

    def usage(self) -> DiskUsage:
        volume = smbclient.stat_volume(self.place.root, **self._kwargs)
        # Samba answers the space a writer may use for both "available" figures;
        # the caller's is the one a write meets (a Windows quota included).
        return DiskUsage.of(int(volume.total_size), int(volume.caller_available_size))

    # --- changing -----------------------------------------------------------------

    def make_dir(self, path: str) -> Obj:
        try:
            smbclient.mkdir(self.place.unc(path), **self._kwargs)
        except SMBOSError as exc:
            if _status(exc) != NtStatus.STATUS_OBJECT_NAME_COLLISION:
                raise
        made = self.stat(path)
        if not made.is_dir:
            raise ObjectExists()
        return made

    def rename(self, path: str, new_path: str) -> Obj:
        """Give ``path`` the name ``new_path``; the server refuses a taken name."""
        smbclient.rename(self.place.unc(path), self.place.unc(new_path), **self._kwargs)
        return self.stat(new_path)

    def move_over(self, path: str, new_path: str) -> Obj:
        """Give the file ``path`` the name ``new_path``, replacing the file there with
        one rename (ReplaceIfExists); a folder there is never replaced."""
        if self.stat(path).is_dir:
            raise NotAFile()
        if path != new_path:
            target = self.place.unc(new_path)
            if self._is_folder(target):
                raise ObjectExists()
            self._replace(self.place.unc(path), target, posixpath.dirname(new_path))
        return self.stat(new_path)

    def remove(self, path: str, is_dir: bool) -> None:
        self._remove(self.place.unc(path), is_dir)

    def copy(self, path: str, dst_dir: str) -> Obj:
        """Copy ``path`` into ``dst_dir`` under a temporary name, then give the copy its
        name (which the server refuses if it is taken meanwhile). Files are copied by
        the server itself where it can; a failed copy leaves nothing."""
        source = self.stat(path)
        target = posixpath.join(dst_dir, source.name)
        if self._exists(target):
            raise ObjectExists()
        temp = self.temps.new(dst_dir, source.is_dir)
        unc = self.place.unc(temp.path)
        with self.temps.marked(temp):
            try:
                if source.is_dir:
                    self._copy_tree(self.place.unc(path), unc)
                else:
                    self._copy_file(self.place.unc(path), unc, source.modified)
                smbclient.rename(unc, self.place.unc(target), **self._kwargs)
            except BaseException:
                self._clean_or_remember(temp.path, source.is_dir)
                raise
        return self.stat(target)

    # --- uploads ------------------------------------------------------------------

    def create(self, temp: OpenUpload) -> None:
        """Make the temporary file, unless the upload was given up meanwhile."""
        with temp.lock:
            if temp.done:
                return
            unc = self.place.unc(temp.path)
            raw = smbclient.open_file(unc, mode="xb", buffering=0, **self._kwargs)
            temp.handle = Handle(raw, self.watchdog, self.block_seconds)

    def write(self, temp: OpenUpload, data: bytes) -> None:
        if temp.handle is None:
            raise ServerError("upload not started")
        temp.handle.write(data)

    def put_in_place(
        self, temp: OpenUpload, path: str, modified: datetime | None, overwrite: bool
    ) -> Obj:
        """Close the finished temporary and give it the name ``path``: replacing a file
        there when ``overwrite``, else only where the name is free."""
        with temp.lock:
            if temp.handle is None or temp.done:
                raise ServerError("upload not started, or given up")
            temp.handle.close()
            unc, target = self.place.unc(temp.path), self.place.unc(path)
            if modified is not None:
                seconds = modified.timestamp()
                smbclient.utime(unc, times=(seconds, seconds), **self._kwargs)
            if overwrite:
                self._replace(unc, target, posixpath.dirname(temp.path))
            else:
                smbclient.rename(unc, target, **self._kwargs)
            temp.done = True
        return self.stat(path)

    def discard(self, temp: OpenUpload) -> bool:
        """Give the upload up: close and remove the temporary, if it is still there.
        Waits for a call on it under way; whether it is gone (False: the server could
        not be reached). Never raises."""
        with temp.lock:
            if temp.done:
                return True
            temp.done = True
            if temp.handle is None:
                return True
            with suppress(Exception):
                temp.handle.close()
            return self._clean(temp.path, False)

    # --- helpers ------------------------------------------------------------------

    def _exists(self, path: str) -> bool:
        try:
            smbclient.stat(self.place.unc(path), **self._kwargs)
        except SMBOSError as exc:
            if exc.errno == errno.ENOENT:  # the name or a folder above it is missing
                return False
            raise
        return True

    def _is_folder(self, unc: str) -> bool:
        try:
            st = smbclient.stat(unc, **self._kwargs)
        except SMBOSError as exc:
            if exc.errno == errno.ENOENT:
                return False
            raise
        return bool(st.st_file_attributes & _DIRECTORY)

    def _replace(self, temp: str, target: str, folder: str) -> None:
        """Rename ``temp`` over ``target``. Samba and Windows refuse while someone has
        ``target`` open (a download): then it is renamed aside first and removed after
        (the reader keeps its bytes until it closes them)."""
        try:
            smbclient.replace(temp, target, **self._kwargs)
            return
        except SMBOSError as exc:
            if _status(exc) != NtStatus.STATUS_ACCESS_DENIED:
                raise
            refused = exc
        if self._is_folder(target):  # refused for being a folder: never set aside
            raise refused
        set_aside = self.temps.new(folder)
        aside = self.place.unc(set_aside.path)
        try:
            smbclient.rename(target, aside, **self._kwargs)
        except SMBOSError:
            raise refused from None
        try:
            smbclient.rename(temp, target, **self._kwargs)
        except BaseException:
            with suppress(SMBException, OSError):
                smbclient.rename(aside, target, **self._kwargs)
            raise
        self._clean_or_remember(set_aside.path, False)

    def _remove(self, unc: str, is_dir: bool) -> None:
        """Remove a file, or a folder with everything in it."""
        if not is_dir:
            try:
                smbclient.remove(unc, **self._kwargs)
                return
            except SMBOSError as exc:
                if _status(exc) != NtStatus.STATUS_FILE_IS_A_DIRECTORY:
                    raise
        try:
            self._remove_tree(unc)
        except SMBOSError as exc:
            if _status(exc) != NtStatus.STATUS_NOT_A_DIRECTORY:
                raise
            smbclient.remove(unc, **self._kwargs)

    def _remove_tree(self, unc: str) -> None:
        """Remove folder ``unc`` and everything below it, without recursion (no depth
        limit). A link to a folder is removed itself, never followed."""
        pending, folders = [unc], []
        while pending:
            folder = pending.pop()
            folders.append(folder)
            with smbclient.scandir(folder, **self._kwargs) as entries:
                found = [entry.smb_info for entry in entries]
            for info in found:
                child = rf"{folder}\{info.file_name}"
                if not info.file_attributes & _DIRECTORY:
                    smbclient.remove(child, **self._kwargs)
                elif info.file_attributes & _REPARSE_POINT:
                    smbclient.rmdir(child, **self._kwargs)
                else:
                    pending.append(child)
                made_progress()
        for folder in reversed(folders):
            smbclient.rmdir(folder, **self._kwargs)
            made_progress()

    def _discard(self, unc: str, is_dir: bool) -> bool:
        """Remove a temporary; whether it went. Never raises (one left behind is swept
        later)."""
        try:
            self._remove(unc, is_dir)
        except (SMBException, OSError):
            return False
        return True

    def _clean(self, path: str, is_dir: bool) -> bool:
        """Remove this storage's own temporary now, on a new connection if the old one
        broke; False when the server cannot be reached. Never raises."""
        try:
            self._connect()
            self._remove(self.place.unc(path), is_dir)
        except SMBOSError as exc:
            if _status(exc) == NtStatus.STATUS_SHARING_VIOLATION:
                # Still open on the server for a connection that went dark: the next
                # listing (or a reconnect) removes it once the server lets it go.
                self.temps.remember(path, is_dir)
            # Otherwise gone already, or refused: the listing's sweep tries again.
        except Exception:
            return False
        return True

    def _clean_or_remember(self, path: str, is_dir: bool) -> None:
        """``_clean``, or remembered to be removed once the server is back."""
        if not self._clean(path, is_dir):
            self.temps.remember(path, is_dir)

    def _copy_tree(self, source: str, target: str) -> None:
        smbclient.mkdir(target, **self._kwargs)
        pending = [(source, target)]
        while pending:
            src, dst = pending.pop()
            with smbclient.scandir(src, **self._kwargs) as entries:
                found = [entry.smb_info for entry in entries]
            for info in found:
                if is_temporary(info.file_name):
                    continue
                child_src, child_dst = rf"{src}\{info.file_name}", rf"{dst}\{info.file_name}"
                if info.file_attributes & _DIRECTORY:
                    smbclient.mkdir(child_dst, **self._kwargs)
                    pending.append((child_src, child_dst))
                else:
                    self._copy_file(child_src, child_dst, info.last_write_time)

    def _copy_file(self, source: str, target: str, modified: datetime) -> None:
        """Copy a file (by the server where it can, else through this machine) and
        keep its modification time."""
        try:
            smbclient.copyfile(source, target, **self._kwargs)
        except SMBOSError as exc:
            if _status(exc) not in _NO_SERVER_COPY:
                raise
            self._copy_through(source, target)
        seconds = modified.timestamp()
        smbclient.utime(target, times=(seconds, seconds), **self._kwargs)

    def _copy_through(self, source: str, target: str) -> None:
        kwargs = {"buffering": 0, **self._kwargs}
        with (
            smbclient.open_file(source, mode="rb", share_access="rwd", **kwargs) as src,
            smbclient.open_file(target, mode="wb", **kwargs) as dst,
        ):
            writer = Handle(dst)
            while data := src.read(COPY_BLOCK):
                writer.write(data)


# Bytes a copy through this machine moves per request.
COPY_BLOCK = 1 << 20


def _close(connection: Any) -> None:
    """Close a connection's socket without talking to the server any more."""
    with suppress(Exception):
        connection.disconnect(close=False)
