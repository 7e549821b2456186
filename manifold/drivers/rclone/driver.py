"""The Rclone driver: a storage on one rclone remote, of any backend type, below a root.

Every call goes to the server's one rclone process (``process.Rclone``): the remote
is added to its config at ``init`` under a name of its own (``config/create``, which
obscures a plain password as rclone's own ``config create`` does), metadata calls are
``operations/*`` and ``sync/*``, reads are ranged GETs through ``--rc-serve``, and
uploads are fetched by rclone from a one-time loopback URL (``feeder``), with their
size and modification time.

``Obj.path`` is the object's path below the root, ``/`` first.

Writes are atomic for readers as far as the remote allows. On bucket-based remotes
(S3, GCS, Azure Blob, B2, Swift) an upload appears whole or not at all, so it goes
straight to its name; on the others (local disks, SFTP, FTP, SMB, WebDAV, cloud
drives) it is written under a ``RESERVED_PREFIX`` name and moved into place when
whole: a rename on a local disk, SFTP (OpenSSH's ``posix-rename``), WebDAV and the
cloud drives. A copy goes straight to its name, and is removed again if it fails.

When rclone refreshes an OAuth token it rewrites its config file; the driver notices
the file changed after its next call, reads its remote back, and saves the changed
keys into the storage's ``config`` (``Driver.save_options``). Every server process
runs its own rclone, and providers rotate refresh tokens: the other processes take
the saved token into theirs (``options_saved``), a process asks the database for a
newer one before a call that would refresh its own, and a save never puts back a
token older than the saved one (see ``tokens``).
"""

from __future__ import annotations

import builtins
import contextlib
import posixpath
import re
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from manifold.drivers.base import (
    FOLDER_MOVE,
    FOLDER_TIMES,
    Driver,
    LinkArgs,
    Seen,
    Temporaries,
    Upload,
    check_size,
    is_temporary,
    too_many_entries,
)
from manifold.drivers.rclone.process import ListingTooLong, Rclone, RcloneError, rclone_of
from manifold.drivers.rclone.section import Section, check, parse, updated
from manifold.drivers.rclone.tokens import changes, expires_soon, to_save, to_take
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotAFile,
    NotAFolder,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.models import DiskUsage, Link, Obj
from manifold.splice import claim

from .meta import Addition

# rclone's answers on an unreachable remote (the text of Go's network errors).
_UNREACHABLE = (
    "connection refused",
    "connection reset",
    "i/o timeout",
    "timed out",
    "timeout",
    "no route to host",
    "no such host",
    "couldn't connect",
    "unexpected eof",
    "broken pipe",
)
_MISSING = ("not found", "doesn't exist", "does not exist", "no such file")
_REFUSED = ("permission denied", "access denied", "forbidden", "unauthorized", "401", "403")
_NANOS = re.compile(r"(\.\d{6})\d+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# rclone refreshes a token about to expire; this far ahead a process first asks the
# database for a newer one another process saved, at most once per ASK_SECONDS (a
# folder listed entry by entry asks once).
AHEAD_SECONDS = 60.0
ASK_SECONDS = 2.0


def translated(exc: RcloneError) -> ManifoldError:
    """rclone's refusal as a ``manifold.errors`` class, its text kept."""
    text = exc.message.lower()
    if exc.status == 404 or any(word in text for word in _MISSING):
        return ObjectNotFound(f"rclone: {exc.message}")
    if "is a file not a directory" in text or "not a directory" in text:
        return NotAFolder(f"rclone: {exc.message}")
    if any(word in text for word in _REFUSED):
        return PermissionDenied(f"rclone: {exc.message}")
    if any(word in text for word in _UNREACHABLE):
        return TemporaryFailure(f"the remote did not answer: {exc.message}")
    return ServerError(f"rclone: {exc.message}")


@contextlib.contextmanager
def translating() -> Iterator[None]:
    try:
        yield
    except RcloneError as exc:
        raise translated(exc) from exc


class RcloneDriver(Driver[Addition]):
    _rclone: Rclone | None = None
    _name = ""
    _fs = ""
    # The section as this process last saved or took it from the saved config.
    _section: Section | None = None
    _stamp = 0
    _asked = 0.0
    _promises: frozenset[str] = frozenset()
    # Uploads go straight to their name (an object store), else through a temporary.
    _direct = False
    _temps: Temporaries

    # --- life ----------------------------------------------------------------------

    async def init(self) -> None:
        section = parse(self.options.config)
        root = self.options.root_folder_path.strip()
        if "]" in root:
            raise InvalidRequest("root_folder_path may not hold ']'")
        rclone = self._rclone = rclone_of(self.resources)
        check(section, await rclone.providers())
        self._name = f"manifold{self.storage.id}_{secrets.token_hex(4)}"
        params = {"name": self._name, "type": section.type, "parameters": section.values}
        await self._call("config/create", {**params, "opt": {"nonInteractive": True}})
        self._section, self._stamp = section, rclone.config_stamp()
        self._fs = f"{self._name}:{root}"
        self._temps = Temporaries(f"rclone://{self._fs}", self._delete_temp)
        await self._learn_features()
        await self._check_root()

    async def _learn_features(self) -> None:
        info = await self._call("operations/fsinfo", {"fs": self._fs})
        features: dict[str, Any] = info.get("Features") or {}
        bucket = bool(features.get("BucketBased"))
        self._direct = bucket or not features.get("Move")
        promises = set()
        if features.get("DirMove"):
            promises.add(FOLDER_MOVE)
        if not bucket:
            promises.add(FOLDER_TIMES)
        self._promises = frozenset(promises)

    async def _check_root(self) -> None:
        with translating():
            await self._rclone_call("operations/list", self._params("/", dirsOnly=True))

    async def drop(self) -> None:
        rclone, self._rclone = self._rclone, None
        if rclone is None or not self._name:
            return
        with contextlib.suppress(Exception):
            await self._temps.drain(5.0)
        with contextlib.suppress(Exception):
            await rclone.call("config/delete", {"name": self._name}, 10.0)

    def promises(self) -> frozenset[str]:
        return self._promises

    # --- reading -------------------------------------------------------------------

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        if not dir.is_dir:
            raise NotAFolder()
        limit = self.resources.max_listing_entries
        try:
            items = await self._listing(dir.path, limit)
        except ObjectNotFound:
            if dir.path != "/":  # a file's path lists as nothing on some back ends
                await self._must_be_folder(dir.path)
            raise
        if len(items) > limit:
            raise too_many_entries(dir.path, limit)
        if not items and dir.path != "/":
            await self._must_be_folder(dir.path)
        seen = [_seen(dir.path, item) for item in items if is_temporary(item["Name"])]
        if seen:
            await self._temps.sweep(seen)
        return [_obj(dir.path, item) for item in items if not is_temporary(item["Name"])]

    async def _listing(self, path: str, limit: int) -> builtins.list[dict[str, Any]]:
        """The folder's entries; refused with ``too_many_entries`` as soon as the answer
        holds more than ``limit`` of them, before it is all read."""
        params = self._params(path, noMimeType=True)
        try:
            with translating():
                body = await self._rclone_call("operations/list", params, limit=limit)
        except ListingTooLong:
            raise too_many_entries(path, limit) from None
        found: builtins.list[dict[str, Any]] = body.get("list") or []
        return found

    async def _must_be_folder(self, path: str) -> None:
        """An empty listing on an object store is also what a missing folder gives."""
        found = await self._stat(path)
        if found is None:
            raise ObjectNotFound()
        if not found.is_dir:
            raise NotAFolder()

    async def get(self, path: str) -> Obj:
        found = await self._stat(path)
        if found is None:
            raise ObjectNotFound()
        return found

    async def _stat(self, path: str) -> Obj | None:
        if path == "/":
            return await self.root_obj()
        with translating():
            body = await self._rclone_call("operations/stat", self._params(path))
        item = body.get("item")
        return _obj(posixpath.dirname(path), item) if item else None

    def folder_at(self, path: str) -> Obj | None:
        # A listing empty or refused asks rclone what is there (``_must_be_folder``).
        if path == "/":
            return None
        modified = self.storage.modified or _EPOCH
        return Obj(name=posixpath.basename(path), size=0, is_dir=True, modified=modified, path=path)

    async def root_obj(self) -> Obj:
        modified = self.storage.modified or _EPOCH
        return Obj(name="", size=0, is_dir=True, modified=modified, path="/")

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        return Link(reader=lambda offset, length: self._read(file.path, offset, length), relay=self)

    async def _read(self, path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
        sink = claim(self, offset, length)
        await self._newest_token()
        reading = self._live().read(self._fs, _remote(path), offset, length, sink)
        # Closed here, not when collected: a client gone early stops rclone's read now.
        async with contextlib.aclosing(reading):
            with translating():
                async for data in reading:
                    yield data

    async def details(self) -> DiskUsage:
        with translating():
            about = await self._rclone_call("operations/about", {"fs": self._fs})
        total, used, free = about.get("total"), about.get("used"), about.get("free")
        if total is None or free is None:
            raise ServerError("the remote does not report its space")
        return DiskUsage(int(total), int(used if used is not None else total - free), int(free))

    # --- writing -------------------------------------------------------------------

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        path = _join(parent.path, name)
        found = await self._stat(path)
        if found is not None:
            if not found.is_dir:
                raise ObjectExists()
            return found
        await self._call("operations/mkdir", self._params(path))
        made = await self._stat(path)
        if made is None:  # an object store without folder markers keeps no empty folder
            raise ServerError("the remote keeps no empty folders (S3: directory_markers)")
        return made

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        path = _join(dst_dir.path, upload.name)
        await self._may_take(path, upload.overwrite)
        if self._direct:
            await self._upload(path, upload)
            return await self.get(path)
        temp = self._temps.new(dst_dir.path)
        async with self._temps.writing(temp):
            temp.made = True
            await self._upload(temp.path, upload)
            made = await self.get(temp.path)
            await self._may_take(path, upload.overwrite)
            await self._taking(temp.path, path, False, upload.overwrite)
        # As the upload left it: another writer may already be replacing it.
        return replace(made, name=upload.name, path=path)

    async def _may_take(self, path: str, overwrite: bool) -> None:
        found = await self._stat(path)
        if found is not None and (found.is_dir or not overwrite):
            raise ObjectExists()

    async def _upload(self, path: str, upload: Upload) -> None:
        rclone = self._live()
        async with rclone.feeder.offering(upload) as (url, offer):
            params = {**self._params(path), "url": url}
            try:
                await self._rclone_call("operations/copyurl", params, seconds=None)
            except RcloneError as exc:
                if offer.failure is not None:
                    raise offer.failure from None
                if offer.miscounted:
                    check_size(offer.sent, upload.size)
                raise translated(exc) from exc
        if offer.failure is not None:
            raise offer.failure
        check_size(offer.sent, upload.size)

    async def rename(self, src: Obj, new_name: str) -> Obj:
        return await self._relocate(src, _join(posixpath.dirname(src.path), new_name))

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        if _clean(posixpath.dirname(src.path)) == _clean(dst_dir.path):
            return src
        return await self._relocate(src, _join(dst_dir.path, src.name))

    async def _relocate(self, src: Obj, path: str) -> Obj:
        if path == src.path:
            return src
        _not_inside(src, path)
        await self._may_take(path, overwrite=False)
        await self._place(src.path, path, src.is_dir)
        return await self.get(path)

    async def _place_file(self, temp: str, path: str, overwrite: bool) -> None:
        """Move the whole file ``temp`` to ``path``. rclone's move removes a file in the
        way first, and a failed rename would then have lost it: such a file is set
        aside instead, put back if the rename fails, and removed once it succeeded."""
        found = await self._stat(path)
        if found is None:
            await self._move_file(temp, path)
            return
        if found.is_dir or not overwrite:
            raise ObjectExists()
        aside = self._temps.new(posixpath.dirname(path))
        await self._move_file(path, aside.path)
        try:
            await self._move_file(temp, path)
        except BaseException:
            with contextlib.suppress(Exception):
                await self._move_file(aside.path, path)
            raise
        await self._temps.discard(aside)

    async def _move_file(self, src: str, dst: str) -> None:
        await self._call("operations/movefile", self._files(src, dst), None)

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        path = _join(dst_dir.path, src.name)
        _not_inside(src, path)
        await self._may_take(path, overwrite=False)
        if self._direct:
            await self._copy_direct(src, path)
            return await self.get(path)
        temp = self._temps.new(dst_dir.path, src.is_dir)
        async with self._temps.writing(temp):
            temp.made = True
            await self._copy_to(src, temp.path)
            made = await self.get(temp.path)
            await self._may_take(path, overwrite=False)
            await self._taking(temp.path, path, src.is_dir, False)
        return replace(made, name=src.name, path=path)

    async def _copy_direct(self, src: Obj, path: str) -> None:
        """A copy on an object store: a file's appears whole (a server-side copy); a
        folder's, key by key, is removed again if it fails."""
        try:
            await self._copy_to(src, path)
        except BaseException:
            if src.is_dir:
                with contextlib.suppress(Exception):
                    await self._delete(path, True)
            raise

    async def _copy_to(self, src: Obj, path: str) -> None:
        if src.is_dir:
            # sync/copy makes no folder for a source with nothing in it.
            await self._call("operations/mkdir", self._params(path))
            params = {**self._pair(src.path, path), "createEmptySrcDirs": True}
            await self._call("sync/copy", params, None)
        else:
            await self._call("operations/copyfile", self._files(src.path, path), None)

    async def _taking(self, temp: str, path: str, is_dir: bool, overwrite: bool) -> None:
        """``_place`` for a name checked free a moment ago: another writer that took it
        meanwhile makes this one fail as ``ObjectExists``, whatever rclone said. That
        includes a name found missing while our temporary is still whole: rclone's move
        removes what is in its way, and another writer's move got there first."""
        try:
            await self._place(temp, path, is_dir, overwrite)
        except ManifoldError as exc:
            if not overwrite and await self._contested(exc, temp, path):
                raise ObjectExists() from exc
            raise

    async def _contested(self, exc: ManifoldError, temp: str, path: str) -> bool:
        if await self._stat(path) is not None:
            return True
        return isinstance(exc, ObjectNotFound) and await self._stat(temp) is not None

    async def _place(self, temp: str, path: str, is_dir: bool, overwrite: bool = False) -> None:
        """Move a whole temporary into place (a rename where the remote has one)."""
        if is_dir:
            params = {**self._pair(temp, path), "deleteEmptySrcDirs": True}
            await self._call("sync/move", {**params, "createEmptySrcDirs": True}, None)
            # An object store's folder markers outlive the move: the emptied source goes.
            with contextlib.suppress(ManifoldError):
                await self._call("operations/rmdirs", self._params(temp))
        else:
            await self._place_file(temp, path, overwrite)

    async def remove(self, obj: Obj) -> None:
        if obj.path == "/":
            raise PermissionDenied("the storage's root cannot be removed")
        if await self._stat(obj.path) is None:
            raise ObjectNotFound()
        await self._delete(obj.path, obj.is_dir)

    async def _delete(self, path: str, is_dir: bool) -> None:
        command = "operations/purge" if is_dir else "operations/deletefile"
        await self._call(command, self._params(path), None)

    async def _delete_temp(self, path: str, is_dir: bool) -> bool:
        try:
            await self._delete(path, is_dir)
        except ObjectNotFound:
            return True
        return True

    # --- rc calls ------------------------------------------------------------------

    def _live(self) -> Rclone:
        if self._rclone is None:
            raise TemporaryFailure("the storage is not started")
        return self._rclone

    def _params(self, path: str, **opt: bool) -> dict[str, Any]:
        params: dict[str, Any] = {"fs": self._fs, "remote": _remote(path)}
        if opt:
            params["opt"] = opt
        return params

    def _files(self, src: str, dst: str) -> dict[str, Any]:
        # Every time: rclone would skip a move or copy onto a file of the same size and
        # time as if done, and the new bytes would be lost.
        return {
            "srcFs": self._fs,
            "srcRemote": _remote(src),
            "dstFs": self._fs,
            "dstRemote": _remote(dst),
            "_config": {"IgnoreTimes": True},
        }

    def _pair(self, src: str, dst: str) -> dict[str, Any]:
        return {
            "srcFs": _below(self._fs, src),
            "dstFs": _below(self._fs, dst),
            "_config": {"IgnoreTimes": True},
        }

    async def _call(
        self, command: str, params: dict[str, Any], seconds: float | None = 300.0
    ) -> dict[str, Any]:
        with translating():
            return await self._rclone_call(command, params, seconds=seconds)

    async def _rclone_call(
        self,
        command: str,
        params: dict[str, Any],
        *,
        seconds: float | None = 300.0,
        limit: int = 0,
    ) -> dict[str, Any]:
        rclone = self._live()
        await self._newest_token()
        try:
            answer = await rclone.call(command, params, seconds, limit=limit)
        except (RcloneError, ListingTooLong):
            await self._keep_token(rclone)  # a refused call may have refreshed it too
            raise
        await self._keep_token(rclone)
        return answer

    async def _keep_token(self, rclone: Rclone) -> None:
        """Save what rclone changed in this remote's section (a refreshed OAuth token)
        into the storage's ``config``, once the config file says it changed."""
        stamp = rclone.config_stamp()
        if stamp == self._stamp or self._section is None or not self._name:
            return
        self._stamp = stamp
        with contextlib.suppress(RcloneError, ManifoldError):
            current = await rclone.call("config/get", {"name": self._name}, 10.0)
            found = changes(parse(self.options.config), current, await self._passwords())
            if found:
                self.options.config = updated(self.options.config, found)
                await self.save_options()  # the server merges it (``options_to_save``)
                self._section = parse(self.options.config)

    async def _passwords(self) -> dict[str, bool]:
        assert self._section is not None
        return (await self._live().providers()).get(self._section.type, {})

    def options_to_save(self, stored: str, addition: str) -> str:
        """The saved options with this process's renewed keys over them, each only if
        it is no older than the saved one (two processes refreshed at once)."""
        if self._section is None:
            return addition
        mine = Addition.model_validate_json(addition)
        try:
            theirs = Addition.model_validate_json(stored)
            config = to_save(self._section, parse(mine.config), theirs.config)
        except (ValueError, InvalidRequest):
            return addition
        return theirs.model_copy(update={"config": config}).model_dump_json(by_alias=True)

    async def options_saved(self, addition: str) -> None:
        """Another process saved a renewed key (its rclone refreshed the token): this
        process's rclone takes it, unless its own is newer, with no restart; a transfer
        under way goes on (rclone reads a token from its config again when it renews)."""
        if self._rclone is None or self._section is None:
            return
        with contextlib.suppress(ValueError, InvalidRequest, RcloneError, ManifoldError):
            stored = parse(Addition.model_validate_json(addition).config)
            take = to_take(parse(self.options.config), stored, await self._passwords())
            if take:
                # Not ``config_refresh_token``: an OAuth backend would start a login.
                params = {**take, "config_refresh_token": "false"}
                body = {"name": self._name, "parameters": params, "opt": {"nonInteractive": True}}
                await self._rclone.call("config/update", body, 10.0)
                self.options.config = updated(self.options.config, take)
            self._section = stored

    async def _newest_token(self) -> None:
        """Before a call on which rclone would refresh a token about to expire: a newer
        one saved by another process is taken first, whether its message came or not."""
        if not expires_soon(self.options.config, AHEAD_SECONDS):
            return
        if time.monotonic() - self._asked < ASK_SECONDS:
            return
        self._asked = time.monotonic()
        stored = await self.saved_options()
        if stored is not None:
            await self.options_saved(stored)


def _clean(path: str) -> str:
    return "/" + path.strip("/")


def _remote(path: str) -> str:
    return path.strip("/")


def _join(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"


def _below(fs: str, path: str) -> str:
    """The fs string of a folder below ``fs``'s root."""
    name, _, root = fs.partition(":")
    inner = _remote(path)
    if not root:
        return f"{name}:{inner}"
    return f"{name}:{root.rstrip('/')}/{inner}"


def _not_inside(src: Obj, path: str) -> None:
    if src.is_dir and (path + "/").startswith(src.path.rstrip("/") + "/"):
        raise InvalidRequest("a folder cannot be moved or copied into itself")


def _time(text: str | None) -> datetime:
    if not text:
        return _EPOCH
    try:
        when = datetime.fromisoformat(_NANOS.sub(r"\1", text.replace("Z", "+00:00")))
    except ValueError:
        return _EPOCH
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _obj(folder: str, item: dict[str, Any]) -> Obj:
    size = int(item.get("Size") or 0)
    return Obj(
        name=item["Name"],
        size=max(size, 0) if not item.get("IsDir") else 0,
        is_dir=bool(item.get("IsDir")),
        modified=_time(item.get("ModTime")),
        path=_join(folder, item["Name"]),
        id=str(item.get("ID") or ""),
    )


def _seen(folder: str, item: dict[str, Any]) -> Seen:
    return Seen(_join(folder, item["Name"]), bool(item.get("IsDir")), _time(item.get("ModTime")))


DRIVER = RcloneDriver
