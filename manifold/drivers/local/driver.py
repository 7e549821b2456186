"""The Local driver: serves a folder of this machine, with ``Obj.path`` the host path.

Confinement: every path is resolved (following symlinks) and must lie inside the
resolved root folder, else ``PermissionDenied``. A symlink inside the root that
points outside is left out of listings and refused by every operation; a link
that stays inside is followed for reading and renamed, moved or removed as the
link itself. New names pass
``validate_name``. Every blocking call runs in a worker thread inside
``os_errors``, which maps ``OSError`` onto ``manifold.errors``.

Listing is one ``listdir`` of the open folder, each entry costing one ``fstatat`` by
name, in name order (as AList's Local lists); an entry whose stat did not change since
the folder's last scan is that scan's object again (``seen``), and an unchanged folder
gives the very same list.
With the ``thumbnail`` option, pictures (and videos, where ffmpeg is installed) carry
``/d<escaped virtual path>?type=thumb`` as ``thumb``, which the API makes absolute
and signs; a ``type=thumb`` link is the PNG ``thumbs`` makes.

Uploads and copies are written under a ``TEMP_PREFIX`` name in the target folder and
renamed into place when whole (without replacing anything unless asked). A process
killed meanwhile leaves its temporary behind, so temporaries are swept: those in the
root when the storage starts, those in any other folder when it is next listed
(listing reads every name anyway, so this costs nothing until one is found; walking
the whole tree at start would cost a big storage minutes); none is ever listed or
found by its name meanwhile (``vfs.names``). The process writing a temporary holds
it (``manifold.held``) until it is renamed or removed: a sweep, in this process or
in another sharing the folder, removes only what no live process holds.
"""

from __future__ import annotations

import asyncio
import builtins
import errno
import os
import shutil
import stat
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import replace
from datetime import UTC, datetime
from typing import IO, ClassVar, TypeVar

from manifold.concurrency import DISK_POOL, run_in
from manifold.drivers.base import (
    ATOMIC_REPLACE,
    RESERVED_PREFIX,
    Driver,
    ErrorTable,
    FileSource,
    LinkArgs,
    Upload,
    check_size,
    temporary_name,
    translating,
    validate_name,
)
from manifold.drivers.local.meta import DELETE_PERMANENTLY, Addition
from manifold.drivers.local.noreplace import rename_new
from manifold.drivers.local.seen import SEEN, Scan
from manifold.drivers.local.thumbs import (
    Thumbnailer,
    VideoPosition,
    extension,
    parse_concurrency,
)
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NameTooLong,
    NotAFile,
    NotAFolder,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    RelativePath,
    ServerError,
)
from manifold.held import hold, take_unheld
from manifold.localfs import TreeChanged, copy_tree, remove_tree
from manifold.models import THUMB_SELF, DiskUsage, Link, Obj, Storage, new_obj
from manifold.paths import name_bytes

T = TypeVar("T")

# Uploads and copies are written under this prefix and renamed into place when
# complete; listings leave such names out so a half-written file is never seen.
TEMP_PREFIX = RESERVED_PREFIX
# How long a resolved real path is reused (``real_paths``): a link made on the host
# counts for confinement within this time; and how many are kept at most.
REAL_PATH_SECONDS = 1.0
REAL_PATHS_KEPT = 4096


class _Moves:
    """How many renames, moves, copies and removals Local storages made in this process.

    Where links lead is reused for a second, but not across one of these: a rename can
    put a folder holding a link out where a folder found inside was, and the path
    checked a moment ago must not lead out through it. Counted for every storage, as
    two Local storages may show the same host folder.
    """

    count = 0

    @classmethod
    def made(cls) -> None:
        cls.count += 1


# Temporaries being written by this process, whichever storage (or an earlier
# instance of it, before an edit restarted it) writes them: never swept.
_IN_FLIGHT: set[str] = set()
# The descriptor holding each of them (``manifold.held``), once it exists.
_HELD: dict[str, int] = {}
_WRITE_BATCH = 1 << 20
_SYNC_EVERY = 32 << 20

_ERRNO_ERRORS: dict[int, type[ManifoldError]] = {
    errno.ENOENT: ObjectNotFound,
    errno.ENOTDIR: NotAFolder,
    errno.EEXIST: ObjectExists,
    errno.ENOTEMPTY: ObjectExists,
    errno.EISDIR: NotAFile,
    errno.EACCES: PermissionDenied,
    errno.EPERM: PermissionDenied,
    errno.EROFS: PermissionDenied,
}


def translate_os_error(exc: OSError) -> ManifoldError:
    """The ``manifold.errors`` instance for an ``OSError``; unknown errnos are ``ServerError``."""
    if exc.errno == errno.ENAMETOOLONG:
        # A lookup of a name longer than the file system holds (new names are refused
        # before they come here): a bad name, not a failure worth trying again.
        segments = os.fsdecode(exc.filename or "").split("/")
        return NameTooLong(max(segments, key=name_bytes))
    error_cls = _ERRNO_ERRORS.get(exc.errno or 0)
    return error_cls() if error_cls is not None else ServerError(exc.strerror or str(exc))


_OS_ERRORS: ErrorTable = {OSError: translate_os_error}


def os_errors() -> AbstractContextManager[None]:
    """Re-raise any ``OSError`` from the block as its ``manifold.errors`` class."""
    return translating(_OS_ERRORS)


_from_timestamp = datetime.fromtimestamp
# Linux reports no birth time through ``os.stat``; other systems do.
_HAS_BIRTH = hasattr(os.stat_result, "st_birthtime")
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_S_ISDIR = stat.S_ISDIR
_S_ISREG = stat.S_ISREG
_S_ISLNK = stat.S_ISLNK


def _birth(st: os.stat_result) -> float | None:
    birth: float | None = getattr(st, "st_birthtime", None)
    return birth


def _created(st: os.stat_result) -> datetime | None:
    birth = _birth(st)
    return _from_timestamp(birth, UTC) if birth is not None else None


def _obj(path: str, st: os.stat_result) -> Obj:
    is_dir = _S_ISDIR(st.st_mode)
    modified = _from_timestamp(st.st_mtime, UTC)
    created = _created(st) if _HAS_BIRTH else None
    return Obj(os.path.basename(path), 0 if is_dir else st.st_size, is_dir, modified, created, path)


# A folder changed this recently may change again within the same tick of its
# modification time, which a token taken now would not see.
_TICK_NS = 1_000_000_000


def _folder_token(path: str) -> str | None:
    """The folder's identity and modification time; None while it may still change
    unseen (modified within the last tick)."""
    st = os.stat(path)
    if time.time_ns() - st.st_mtime_ns < _TICK_NS:
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _disk_usage(path: str) -> DiskUsage:
    fs = os.statvfs(path)
    return DiskUsage.of(fs.f_blocks * fs.f_frsize, fs.f_bavail * fs.f_frsize)


def _is_served(st: os.stat_result) -> bool:
    # Pipes, sockets and devices could block a reader forever or never end.
    return stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)


def _refuse_taken(path: str) -> None:
    if os.path.lexists(path):
        raise ObjectExists()


def _parse_mode(text: str) -> int:
    try:
        return int(text or "777", 8)
    except ValueError:
        raise InvalidRequest(f"invalid mkdir_perm: {text}") from None


class LocalDriver(Driver[Addition]):
    # ``put`` renames its temporary file over the old one (``os.replace``).
    PROMISES: ClassVar[frozenset[str]] = Driver.PROMISES | {ATOMIC_REPLACE}

    def __init__(self, storage: Storage, options: Addition) -> None:
        super().__init__(storage, options)
        self._root = ""
        self._dir_mode = 0o777
        self._recycle_bin = ""
        self._thumbs: Thumbnailer | None = None
        self._reals: dict[str, tuple[str | None, float, int]] = {}
        # The folder made last, as (storage path, real host path): a deep ``make_dir``
        # makes one level inside the last, and need not resolve the whole path again.
        self._last_made: tuple[str, str] | None = None
        # This storage's folders in ``SEEN``: one token per instance, so that a storage
        # edited (a new instance, maybe other options) never reuses the old one's objects.
        self._token = object()

    async def init(self) -> None:
        """Resolve the root (which must be an existing folder) and parse the options."""
        self._dir_mode = _parse_mode(self.options.mkdir_perm)
        position = VideoPosition.parse(self.options.video_thumb_pos)
        concurrency = parse_concurrency(self.options.thumb_concurrency)
        await self._run(self._setup)
        thumbs = Thumbnailer(self.options.thumb_cache_folder, concurrency, position, self._dir_mode)
        await self._run(thumbs.start)
        self._thumbs = thumbs

    async def drop(self) -> None:
        """Remove the private thumbnail folder; nothing else is held between calls."""
        SEEN.forget(self._token)
        thumbs, self._thumbs = self._thumbs, None
        if thumbs is not None:
            await self.run_blocking(thumbs.close)

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        return await self._run(self._list, dir.path)

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        """The resolved file, or with ``type=thumb`` its PNG thumbnail (SVG: itself)."""
        path = await self._run(self._file_path, file.path)
        if args.type != "thumb" or extension(file.name) == "svg":
            return Link(file_path=path)
        if self._thumbs is None:
            raise ServerError("storage not init")
        with os_errors():
            thumb = await self._thumbs.thumbnail(path, file.name)
        return Link(file_path=thumb, headers={"Content-Type": "image/png"})

    async def root_obj(self) -> Obj:
        root = await self._run(self._stat, self.options.root_folder_path)
        return replace(root, name="")

    async def real_path(self, path: str) -> str:
        return await self._run(self._real_path, path)

    async def real_paths(self, paths: Sequence[str]) -> builtins.list[str | None]:
        """Where links take ``paths``. Answers from the last second are reused without a
        thread hop: a user's every listing and fetch asks this for the same folders."""
        now, moves = time.monotonic(), _Moves.count
        kept = [self._reals.get(path) for path in paths]
        if all(k is not None and now - k[1] < REAL_PATH_SECONDS and k[2] == moves for k in kept):
            return [k[0] for k in kept if k is not None]
        found = await self._run(self._real_paths, paths)
        if len(self._reals) > REAL_PATHS_KEPT:
            self._reals.clear()
        for path, real in zip(paths, found, strict=True):
            self._reals[path] = (real, now, moves)
        return found

    async def get(self, path: str) -> Obj:
        return await self._run(self._stat, self._host_path(path))

    async def fingerprint(self, dir: Obj) -> str | None:
        return await self._run(_folder_token, dir.path)

    async def details(self) -> DiskUsage:
        """The space of the file system holding the root folder."""
        return await self._run(_disk_usage, self._root)

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        return await self._run(self._make_dir, parent.path, validate_name(name))

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        return await self._moving(self._move, src.path, dst_dir.path)

    async def rename(self, src: Obj, new_name: str) -> Obj:
        return await self._moving(self._rename, src.path, validate_name(new_name))

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        return await self._moving(self._copy, src.path, dst_dir.path)

    async def remove(self, obj: Obj) -> None:
        """Delete ``obj``, or move it into the recycle bin when one is configured."""
        await self._moving(self._remove, obj.path)

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        name, stream = validate_name(upload.name), upload.stream
        if not isinstance(stream, FileSource):
            head, whole = await _read_ahead(stream, _WRITE_BATCH)
            if whole:  # small: the folder check, the write and the rename in one trip
                check_size(len(head), upload.size)
                return await self._run(
                    self._put_whole, dst_dir.path, name, head, upload.modified, upload.overwrite
                )
            stream = _prefixed(head, stream)
        folder = await self._run(self._folder, dst_dir.path)
        temp = os.path.join(folder, temporary_name())
        target = os.path.join(folder, name)
        if isinstance(stream, FileSource):
            with _in_flight(temp):
                try:
                    linked = await self._run(_link_or_copy, stream.path, temp, upload.size)
                    stream.sent(linked)
                    await self._run(_place, temp, target, upload.modified, upload.overwrite)
                except BaseException:
                    _discard_path(temp)
                    raise
            return await self._run(self._stat, os.path.join(dst_dir.path, name))
        with _in_flight(temp):
            file = await self._new_temp(temp)
            try:
                check_size(await _write_stream(file, stream), upload.size)
                await self._run(_commit, file, temp, target, upload.modified, upload.overwrite)
            except BaseException:
                # Synchronous on purpose: this also runs when the task is being cancelled.
                _discard(file, temp)
                raise
        return await self._run(self._stat, os.path.join(dst_dir.path, name))

    async def move_over(self, src: Obj, dst_dir: Obj, name: str, replaced: Obj) -> Obj:
        """``os.replace``: the kernel gives the name to the new file in one step."""
        return await self._moving(self._move_over, src.path, dst_dir.path, validate_name(name))

    async def _new_temp(self, temp: str) -> IO[bytes]:
        """The temporary file ``temp``, opened. A cancellation that lands while a worker
        thread makes it does not stop the thread: the file is then waited for and
        removed before the cancellation goes on, so none is left behind."""
        making = asyncio.ensure_future(self._run(_create, temp))
        try:
            return await asyncio.shield(making)
        except asyncio.CancelledError:
            with suppress(Exception):
                _discard(await making, temp)
            raise

    # --- blocking helpers, run in a worker thread -------------------------------

    async def _run(self, func: Callable[..., T], *args: object) -> T:
        with os_errors():
            return await self.run_blocking(func, *args)

    async def _moving(self, func: Callable[..., T], *args: object) -> T:
        """``func``, which puts objects (links among them) at new paths."""
        try:
            return await self._run(func, *args)
        finally:
            _Moves.made()

    def _put_whole(
        self, dst_dir: str, name: str, data: bytes, modified: datetime | None, overwrite: bool
    ) -> Obj:
        folder = self._folder(dst_dir)
        temp = os.path.join(folder, temporary_name())
        with _in_flight(temp):
            file = _create(temp)
            try:
                file.write(data)
                _commit(file, temp, os.path.join(folder, name), modified, overwrite)
            except BaseException:
                _discard(file, temp)
                raise
        return self._stat(os.path.join(dst_dir, name))

    def _setup(self) -> None:
        root = os.path.abspath(self.options.root_folder_path)
        if not os.path.isdir(root):
            raise ObjectNotFound(f"root folder {root} not exists")
        self.options = self.options.model_copy(update={"root_folder_path": root})
        self._root = os.path.realpath(root)
        recycle = self.options.recycle_bin_path.strip()
        self._recycle_bin = "" if recycle in ("", DELETE_PERMANENTLY) else os.path.abspath(recycle)
        with os.scandir(self._root) as entries:
            _sweep(self._root, [e.name for e in entries if e.name.startswith(TEMP_PREFIX)])

    def _inside(self, path: str) -> str:
        """``path`` resolved; ``PermissionDenied`` unless that lies inside the root."""
        if not self._root:
            raise ServerError("storage not init")
        real = os.path.realpath(path)
        prefix = self._root.rstrip(os.sep) + os.sep
        if real != self._root and not real.startswith(prefix):
            raise PermissionDenied()
        return real

    def _entry(self, path: str) -> str:
        """The entry ``path`` names, unresolved, with its folder resolved inside the root.

        The entry must itself resolve inside the root and must not be the root.
        """
        parent, name = os.path.split(os.path.normpath(path))
        entry = os.path.join(self._inside(parent), name)
        if self._inside(entry) == self._root and not os.path.islink(entry):
            raise PermissionDenied()
        return entry

    def _real_path(self, path: str) -> str:
        rel = os.path.relpath(self._inside(self._host_path(path)), self._root)
        return "/" if rel == "." else "/" + rel.replace(os.sep, "/")

    def _real_paths(self, paths: Sequence[str]) -> builtins.list[str | None]:
        found: builtins.list[str | None] = []
        for path in paths:
            try:
                found.append(self._real_path(path))
            except PermissionDenied:
                found.append(None)
        return found

    def _host_path(self, path: str) -> str:
        segments = [s for s in path.split("/") if s]
        for segment in segments:
            if segment in (".", "..") or "\x00" in segment:
                raise RelativePath()
        return os.path.join(self.options.root_folder_path, *segments)

    def _stat(self, path: str) -> Obj:
        st = os.stat(self._inside(path))
        if not _is_served(st):
            raise ObjectNotFound()
        return _obj(os.path.normpath(path), st)

    def _folder(self, path: str) -> str:
        real = self._inside(path)
        if not os.path.isdir(real):
            os.stat(real)  # raises ObjectNotFound when missing
            raise NotAFolder()
        return real

    def _file_path(self, path: str) -> str:
        real = self._inside(path)
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFile()
        return real

    def _list(self, path: str) -> builtins.list[Obj]:
        """The folder's entries in name order, as AList's Local lists them (Go's
        ``os.ReadDir`` sorts by name, byte by byte; code point order is the same).

        One ``listdir`` of the open folder and one ``lstat`` by name an entry. A first
        scan (or one after names came or went) sorts the names and makes the objects
        in name order, the order every later pass reads them (filters, encoding), which
        keeps those passes within the processor's caches. A rescan of the same names
        reads them in the system's order (cheaper for it than any other) and reuses
        every object whose stat did not change (``seen``): an unchanged folder gives
        the very list of its last scan.
        """
        real = self._folder(path)
        last = SEEN.get(self._token, path)
        fd = os.open(real, _DIR_FLAGS)
        try:
            found = os.listdir(fd)
            scan = last if found == last.found else self._names(found)
            objs = self._restat(fd, real, path, last) if scan is last and last.objs else None
            if objs is None:
                objs = self._scan(fd, real, path, scan, last)
        finally:
            os.close(fd)
        if scan.temps:
            _sweep(real, scan.temps)
        return objs

    def _scan(self, fd: int, real: str, path: str, scan: Scan, last: Scan) -> builtins.list[Obj]:
        """Every entry read in name order, reusing the last scan's unchanged objects."""
        objs, stamps, reused = self._stat_all(fd, real, path, scan.names, last)
        if reused == len(objs) == len(last.objs):
            objs, stamps = last.objs, last.stamps  # the very list of the last scan
        if scan is not last or objs is not last.objs:
            SEEN.put(self._token, path, replace(scan, objs=objs, stamps=stamps, places=None))
        return objs

    def _names(self, found: builtins.list[str]) -> Scan:
        """The names to look at, in the order found and sorted, with the temporaries
        apart."""
        show_hidden = self.options.show_hidden
        looked: builtins.list[str] = []
        temps: builtins.list[str] = []
        for name in found:
            if name[0] == ".":
                if name.startswith(TEMP_PREFIX):
                    temps.append(name)
                    continue
                if not show_hidden:
                    continue
            looked.append(name)
        return Scan(found, looked, sorted(looked), temps)

    def _restat(self, fd: int, real: str, path: str, last: Scan) -> builtins.list[Obj] | None:
        """The last scan's objects, with those whose stat changed made anew, reading the
        entries in the system's order; None when an entry was left out then and is not
        now, or the other way round (the caller scans afresh)."""
        places = last.places
        if places is None:
            where = {obj.name: index for index, obj in enumerate(last.objs)}
            places = [where.get(name, -1) for name in last.looked]
            last = replace(last, places=places)
            SEEN.put(self._token, path, last)
        last_objs, last_stamps = last.objs, last.stamps
        changed: builtins.list[tuple[int, str, os.stat_result]] = []
        lstat = os.lstat
        for name, place in zip(last.looked, places, strict=True):
            try:
                st = lstat(name, dir_fd=fd)
                if _S_ISLNK(st.st_mode):
                    if not self._stays_inside(real, name):
                        raise OSError  # left out, like an entry that vanished
                    st = os.stat(name, dir_fd=fd)
            except OSError:
                if place >= 0:
                    return None
                continue
            mode = st.st_mode
            if _S_ISREG(mode):
                size, is_dir = st.st_size, False
            elif _S_ISDIR(mode):
                size, is_dir = 0, True
            elif place >= 0:
                return None
            else:
                continue
            if place < 0:
                return None
            stamp = st.st_mtime_ns if not _HAS_BIRTH else (st.st_mtime_ns, _birth(st))
            before = last_objs[place]
            if last_stamps[place] != stamp or before.size != size or before.is_dir != is_dir:
                changed.append((place, name, st))
        if not changed:
            return last_objs
        objs, stamps = list(last_objs), list(last_stamps)
        for place, name, st in changed:
            objs[place], stamps[place] = self._made(path, name, st)
        SEEN.put(self._token, path, replace(last, objs=objs, stamps=stamps))
        return objs

    def _made(self, path: str, name: str, st: os.stat_result) -> tuple[Obj, object]:
        """A new object for an entry of ``path`` (a regular file or a folder)."""
        is_dir = _S_ISDIR(st.st_mode)
        thumbs = self._thumbs if self.options.thumbnail else None
        thumb = THUMB_SELF if thumbs is not None and not is_dir and thumbs.offers(name) else ""
        created = _created(st) if _HAS_BIRTH else None
        modified = _from_timestamp(st.st_mtime, UTC)
        prefix = path if path.endswith(os.sep) else path + os.sep
        size = 0 if is_dir else st.st_size
        made = new_obj(name, size, is_dir, modified, created, prefix + name, thumb)
        return made, st.st_mtime_ns if not _HAS_BIRTH else (st.st_mtime_ns, _birth(st))

    def _stat_all(
        self, fd: int, real: str, path: str, names: builtins.list[str], last: Scan
    ) -> tuple[builtins.list[Obj], builtins.list[object], int]:
        """An object an entry (or the last scan's, unchanged), and how many were reused.

        ``names`` and the last scan's objects are both in name order: the last object
        for a name is found by walking the two together.
        """
        prefix = path if path.endswith(os.sep) else path + os.sep
        thumbs = self._thumbs if self.options.thumbnail else None
        last_objs, last_stamps = last.objs, last.stamps
        known = len(last_objs)
        at = 0  # the last scan's first object whose name is not before the current one
        reused = 0
        objs: builtins.list[Obj] = []
        stamps: builtins.list[object] = []
        append, stamped, lstat = objs.append, stamps.append, os.lstat
        for name in names:
            try:
                st = lstat(name, dir_fd=fd)
                if _S_ISLNK(st.st_mode):
                    if not self._stays_inside(real, name):
                        continue
                    st = os.stat(name, dir_fd=fd)
            except OSError:
                # Dangles, loops or vanished meanwhile: one odd entry must not make
                # the whole folder unlistable.
                continue
            mode = st.st_mode
            if _S_ISREG(mode):
                size, is_dir = st.st_size, False
            elif _S_ISDIR(mode):
                size, is_dir = 0, True
            else:
                continue  # pipes, sockets, devices
            stamp = st.st_mtime_ns if not _HAS_BIRTH else (st.st_mtime_ns, _birth(st))
            if at < known:
                before = last_objs[at]
                while before.name < name and at + 1 < known:
                    at += 1
                    before = last_objs[at]
                if (
                    before.name == name
                    and last_stamps[at] == stamp
                    and before.size == size
                    and before.is_dir == is_dir
                ):
                    reused += 1
                    append(before)
                    stamped(stamp)
                    continue
            thumb = THUMB_SELF if thumbs is not None and not is_dir and thumbs.offers(name) else ""
            created = _created(st) if _HAS_BIRTH else None
            modified = _from_timestamp(st.st_mtime, UTC)
            append(new_obj(name, size, is_dir, modified, created, prefix + name, thumb))
            stamped(stamp)
        return objs, stamps, reused

    def _stays_inside(self, folder: str, name: str) -> bool:
        """Whether a symlink in ``folder`` resolves inside the root."""
        try:
            self._inside(os.path.join(folder, name))
        except PermissionDenied:
            return False
        return True

    def _make_dir(self, parent: str, name: str) -> Obj:
        target = os.path.join(self._made_folder(parent) or self._folder(parent), name)
        # Idempotent: an existing name is fine, the stat below tells a folder from a file.
        with suppress(FileExistsError):
            os.mkdir(target, self._dir_mode)
        path = os.path.normpath(os.path.join(parent, name))
        st = os.lstat(target)
        if not _S_ISDIR(st.st_mode):
            made = self._stat(path)  # a link is followed only inside the root
            if not made.is_dir:
                raise ObjectExists()
            return made
        self._last_made = (path, target)
        return _obj(path, st)

    def _made_folder(self, parent: str) -> str | None:
        """The real folder of ``parent`` when it is the folder made last, still a folder.

        Each level of a deep path is made inside the one before: resolving the whole
        path again for each would cost the square of its depth in lookups.
        """
        made = self._last_made
        if made is None or made[0] != os.path.normpath(parent):
            return None
        try:
            st = os.lstat(made[1])
        except OSError:
            return None
        return made[1] if _S_ISDIR(st.st_mode) else None

    def _rename(self, path: str, new_name: str) -> Obj:
        old = self._entry(path)
        new = os.path.join(os.path.dirname(old), new_name)
        if new != old:
            _refuse_taken(new)
            os.rename(old, new)
        return self._stat(os.path.join(os.path.dirname(os.path.normpath(path)), new_name))

    def _move(self, path: str, dst_dir: str) -> Obj:
        old = self._entry(path)
        target_dir = self._folder(dst_dir)
        new = os.path.join(target_dir, os.path.basename(old))
        if new != old:
            self._refuse_into_itself(old, target_dir)
            _refuse_taken(new)
            _move_entry(old, new)
        return self._stat(os.path.join(dst_dir, os.path.basename(old)))

    def _move_over(self, path: str, dst_dir: str, name: str) -> Obj:
        old = self._entry(path)
        if os.path.isdir(old):
            raise NotAFile()
        target = os.path.join(self._folder(dst_dir), name)
        if target != old:
            if os.path.isdir(target):
                raise ObjectExists()
            kept = self._keep_replaced(target)
            try:
                _replace_entry(old, target)
            except BaseException:
                if kept is not None:
                    _discard_path(kept)
                raise
        return self._stat(os.path.join(dst_dir, name))

    def _keep_replaced(self, target: str) -> str | None:
        """With a recycle bin, the file at ``target`` linked (or copied) into it before
        it is replaced, as a removal would have moved it there; where it went."""
        if not self._recycle_bin or not os.path.lexists(target):
            return None
        kept = self._recycle_target(os.path.basename(target))
        try:
            os.link(target, kept, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in _NO_LINK:
                raise
            shutil.copy2(target, kept, follow_symlinks=False)
        return kept

    def _copy(self, path: str, dst_dir: str) -> Obj:
        source = self._inside(path)
        name = os.path.basename(os.path.normpath(path))
        target_dir = self._folder(dst_dir)
        _refuse_taken(os.path.join(target_dir, name))
        self._refuse_into_itself(source, target_dir)
        temp = os.path.join(target_dir, temporary_name())
        with _in_flight(temp):
            try:
                _copy_entry(source, temp)
                rename_new(temp, os.path.join(target_dir, name))
            except BaseException:
                _discard_tree(temp)
                raise
        return self._stat(os.path.join(dst_dir, name))

    def _refuse_into_itself(self, source: str, target_dir: str) -> None:
        if os.path.islink(source) or not os.path.isdir(source):
            return
        real = os.path.realpath(source)
        if target_dir == real or target_dir.startswith(real.rstrip(os.sep) + os.sep):
            raise ServerError("the destination folder is a subfolder of the source folder")

    def _remove(self, path: str) -> None:
        entry = self._entry(path)
        st = os.lstat(entry)
        if self._recycle_bin:
            _move_entry(entry, self._recycle_target(os.path.basename(entry)))
        elif stat.S_ISDIR(st.st_mode):
            remove_tree(entry)
        else:
            os.remove(entry)

    def _recycle_target(self, name: str) -> str:
        os.makedirs(self._recycle_bin, exist_ok=True)
        target = os.path.join(self._recycle_bin, name)
        if os.path.lexists(target):
            target = f"{target}_{datetime.now():%Y%m%d%H%M%S}"
        return target


def _commit(
    file: IO[bytes], temp: str, target: str, modified: datetime | None, overwrite: bool
) -> None:
    file.flush()
    os.fsync(file.fileno())
    file.close()
    _place(temp, target, modified, overwrite)


def _link_or_copy(source: str, temp: str, size: int | None) -> int:
    """Put the regular file ``source`` at ``temp``: a hard link where both are on one
    file system (no byte is copied), else a copy by the kernel; synced to the disk
    either way. Returns the file's size."""
    st = os.lstat(source)
    if not stat.S_ISREG(st.st_mode):
        raise InvalidRequest("the source is not a regular file")
    check_size(st.st_size, size)
    try:
        os.link(source, temp, follow_symlinks=False)
        _hold(temp)
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        with open(source, "rb") as src, _create(temp) as dst:
            shutil.copyfileobj(src, dst)  # sendfile/copy_file_range where the OS has them
    fd = os.open(temp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return st.st_size


_NO_LINK = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.EACCES})


def _place(temp: str, target: str, modified: datetime | None, overwrite: bool) -> None:
    """Rename the finished ``temp`` to ``target`` (with its modified time)."""
    if modified is not None:
        seconds = modified.timestamp()
        os.utime(temp, (seconds, seconds))
    if not overwrite:
        rename_new(temp, target)
        return
    if os.path.isdir(target) and not os.path.islink(target):
        raise ObjectExists()
    os.replace(temp, target)


@contextmanager
def _in_flight(temp: str) -> Iterator[None]:
    """``temp`` is this process's while the block runs: never swept, and held (once
    ``_hold`` was called) for other processes until it ends."""
    _IN_FLIGHT.add(temp)
    try:
        yield
    finally:
        _IN_FLIGHT.discard(temp)
        held = _HELD.pop(temp, None)
        if held is not None:
            os.close(held)


def _hold(temp: str) -> None:
    """Hold the temporary just made at ``temp`` until its ``_in_flight`` block ends.
    A block already over (a cancelled call whose thread went on) holds nothing: what
    the thread made is left to the sweeps."""
    held = hold(temp)
    if temp in _IN_FLIGHT:
        _HELD[temp] = held
    else:
        os.close(held)


def _sweep(folder: str, names: builtins.list[str]) -> None:
    """Remove the temporaries ``names`` in ``folder`` that no live process holds."""
    for name in names:
        path = os.path.join(folder, name)
        if path in _IN_FLIGHT:
            continue
        with suppress(OSError):
            take_unheld(path, _discard_tree)


async def _write_stream(file: IO[bytes], stream: AsyncIterator[bytes]) -> int:
    """Write every chunk of ``stream``, batching small chunks into fewer thread hops.

    Written data is flushed to the disk in the background every ``_SYNC_EVERY`` bytes
    (one flush at a time, never awaited while receiving), so the final ``fsync``
    before the rename has only the tail left instead of the whole file.
    """
    written = synced_at = 0
    batch = bytearray()
    syncing: asyncio.Task[None] | None = None
    try:
        async for chunk in stream:
            batch += chunk
            written += len(chunk)
            if len(batch) >= _WRITE_BATCH:
                await _write(file, bytes(batch))
                batch.clear()
                if written - synced_at >= _SYNC_EVERY and (syncing is None or syncing.done()):
                    await _synced(syncing)
                    syncing = asyncio.create_task(run_in(DISK_POOL, os.fdatasync, file.fileno()))
                    synced_at = written
        if batch:
            await _write(file, bytes(batch))
        await _synced(syncing)
    except BaseException:
        if syncing is not None:
            await asyncio.wait([syncing])  # the file is closed next; let the flush end
            if not syncing.cancelled():
                syncing.exception()  # retrieved: the upload failed anyway
        raise
    return written


async def _read_ahead(stream: AsyncIterator[bytes], limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes or more of ``stream``, and whether that was all of it."""
    head = bytearray()
    async for chunk in stream:
        head += chunk
        if len(head) >= limit:
            return bytes(head), False
    return bytes(head), True


async def _prefixed(head: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield head
    async for chunk in rest:
        yield chunk


async def _synced(syncing: asyncio.Task[None] | None) -> None:
    if syncing is not None:
        with os_errors():
            await syncing


async def _write(file: IO[bytes], data: bytes) -> None:
    # Only the disk's errors are translated; the stream's own propagate unchanged.
    with os_errors():
        await run_in(DISK_POOL, file.write, data)


def _create(path: str) -> IO[bytes]:
    """The new temporary ``path``, open for writing and held (see ``_hold``)."""
    file = open(path, "xb")  # noqa: SIM115 - closed by _commit or _discard
    try:
        _hold(path)
    except BaseException:
        file.close()
        raise
    return file


def _discard(file: IO[bytes], temp: str) -> None:
    with suppress(OSError):
        file.close()
    _discard_path(temp)


def _discard_path(temp: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(temp)


def _discard_tree(path: str) -> None:
    with suppress(OSError, TreeChanged):
        if os.path.isdir(path) and not os.path.islink(path):
            remove_tree(path)
        else:
            os.unlink(path)


def _move_entry(old: str, new: str) -> None:
    try:
        os.rename(old, new)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        if not os.path.isdir(old) or os.path.islink(old):
            shutil.move(old, new)  # another file system: copy, then delete
            return
        try:
            copy_tree(old, new)  # any depth, as removal
        except BaseException:
            _discard_tree(new)
            raise
        remove_tree(old)


def _replace_entry(old: str, new: str) -> None:
    """Rename the file ``old`` over the file ``new``. From another file system (a mount
    inside the root) it is copied beside ``new`` first and that copy renamed over it,
    so the name still changes hands in one step; ``old`` goes after."""
    try:
        os.replace(old, new)
        return
    except IsADirectoryError as exc:  # a folder took the name meanwhile
        raise ObjectExists() from exc
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    temp = os.path.join(os.path.dirname(new), temporary_name())
    with _in_flight(temp):
        try:
            shutil.copy2(old, temp, follow_symlinks=False)
            _hold(temp)
            os.replace(temp, new)
        except BaseException:
            _discard_path(temp)
            raise
    os.unlink(old)


def _copy_entry(source: str, target: str) -> None:
    """Copy ``source`` to the temporary ``target``, made and held first."""
    # Links inside a copied folder stay links, as ``cp -a`` keeps them; a link
    # that leaves the root stays unreadable through this driver in the copy too.
    if os.path.isdir(source):
        os.mkdir(target, 0o700)
        _hold(target)
        copy_tree(source, target, made=True)  # any depth: no recursion, no long path
    else:
        _create(target).close()
        shutil.copy2(source, target)  # into the file made and held, the same inode


DRIVER = LocalDriver
