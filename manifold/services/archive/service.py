"""Archives in the file tree: their contents, one member's bytes, and extraction.

AList v3.45's archive endpoints over libarchive (``reader``): the member tree of a
zip, tar (plain or compressed), 7z, rar, iso or cpio file on any storage, read by
ranges without copying the archive first; one member streamed (``/ae``); and the
``decompress`` task, which extracts into the data folder's temporary area and hands
the result to ``decompress_upload`` tasks that store it, one task per entry, into
any storage, each file renamed into place only once it is whole.

Differences from AList, each deliberate: the task name never shows the archive's
password; extracting needs write permission in the destination as well as the
decompress bit, and access to the archive's folder (a folder password blocks it);
each extracted entry passes the checks an upload of its path passes (the base path
across links, folder passwords with the request's password only, hide rules, write
permission), and an entry that fails them is skipped and named in its task's
status; an existing file is replaced only when the request asks (``overwrite``);
reading an archive stops at the size and ratio limits of the settings
(``archive_*``); ``/ad`` and ``/ap`` serve a member as ``/ae`` does, since no back
end here extracts by itself.

A storage whose back end reads archives itself (AList V3 with
``forward_archive_requests``: ``Driver.archive_*``) is asked instead of reading the
archive's bytes here: its meta, its listings, a member's link, and an extraction
into the same storage, which the back end then does as its own work (no task here,
and the entries are not checked one by one as an extraction here checks them; the
write permission in the destination is). A back end that declines
(``NotSupported``) has its archives read here as any other's.

All the work on an archive's bytes runs in the archive pool, never in the threads
other requests share.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from manifold.concurrency import ARCHIVE_POOL, SingleFlight, run_in
from manifold.config import make_private
from manifold.drivers.base import ArchiveEntry
from manifold.errors import (
    BadRequest,
    Forbidden,
    InvalidRequest,
    NotAFile,
    NotAFolder,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    StorageNotFound,
)
from manifold.localfs import discard_tree, stale_entries
from manifold.models import Link, LinkArgs, Obj, Perm, User
from manifold.paths import child_path, clean_path, is_sub_path, split_path, validate_name
from manifold.services.admin.metas import MetaService
from manifold.services.admin.settings import SettingsService
from manifold.services.archive.reader import (
    Catalog,
    Limits,
    Member,
    Source,
    clean_inner,
    extract,
    member_stream,
    scan,
)
from manifold.services.auth.service import Caller
from manifold.services.auth.sign import Signer
from manifold.services.fs.read import GuardedReader
from manifold.services.fs.streams import file_stream
from manifold.services.fs.tree import Place
from manifold.services.fs.write import GuardedWriter
from manifold.services.runner import LEFTOVER_SECONDS, TaskContext, TaskService

# The extensions the page offers to open as archives: those libarchive reads here.
EXTENSIONS = (
    ".zip",
    ".tar",
    ".tgz",
    ".tbz2",
    ".txz",
    ".gz",
    ".bz2",
    ".xz",
    ".zst",
    ".lz4",
    ".lz",
    ".lzma",
    ".7z",
    ".rar",
    ".iso",
    ".cpio",
    ".cab",
)
CATALOGS_KEPT = 64
WORK_PREFIX = "decompress-"
# Extracted files live in one instance's data folder; another cannot upload them.
EXTRACTED_GONE = "the extracted files are gone: their instance stopped; decompress again"
# What a folder named as an archive answers (400: AList answers 500 "not a file").
_FOLDER = "not a file: a folder is not an archive"
# The settings that bound the work of reading one archive, and their defaults.
LIST_MAX_SIZE = ("archive_list_max_size", 4 << 30)
EXTRACT_MAX_SIZE = ("archive_extract_max_size", 64 << 30)
MAX_RATIO = ("archive_max_ratio", 250)
MAX_ENTRIES = ("archive_max_entries", 200_000)


@dataclass(frozen=True, slots=True)
class Opened:
    """An archive the caller may read, and what it holds."""

    path: str
    catalog: Catalog
    signed: bool
    # Whether ``catalog`` holds the member tree (a back end may send none).
    tree: bool = True
    # Where the archive is when its back end reads it (``listing`` asks it), and the
    # archive's password to ask with.
    forwarded: Place | None = None
    password: str = ""


class ArchiveService:
    def __init__(
        self,
        fs: GuardedReader,
        metas: MetaService,
        writer: GuardedWriter,
        temp_dir: Path,
        settings: SettingsService | None = None,
    ) -> None:
        self._fs = fs
        self._settings = settings
        self._metas = metas
        self._writer = writer
        self._temp_dir = temp_dir
        self._catalogs: OrderedDict[tuple[str, int, datetime], Catalog] = OrderedDict()
        self._scans: SingleFlight[Catalog] = SingleFlight()

    async def start(self, tasks: TaskService, alone: bool = False) -> None:
        """Drop what extractions left before a restart that no task will upload (one
        still to run, here or on another instance sharing the data folder, does).
        Unless ``alone`` on the data folder, a young one may be another process's
        extraction under way, and stays."""
        kept = await tasks.files_in_use("decompress_upload", "file")
        idle = 0.0 if alone else LEFTOVER_SECONDS
        await run_in(ARCHIVE_POOL, self._drop_leftovers, kept, idle)

    def _drop_leftovers(self, kept: set[str], idle: float) -> None:
        self._temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        make_private(self._temp_dir)
        for entry in stale_entries(self._temp_dir, WORK_PREFIX, kept, idle):
            discard_tree(entry)
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()

    def register(self, tasks: TaskService) -> None:
        tasks.register(
            "decompress",
            self.run_decompress,
            max_retry=2,
            threads_setting="decompress_download_task_threads_num",
            recheck=self._writer.task_recheck(
                Perm.DECOMPRESS, "src", write_into="dst_dir", unlock_with="dst_password"
            ),
        )
        tasks.register(
            "decompress_upload",
            self.run_upload,
            max_retry=2,
            threads_setting="decompress_upload_task_threads_num",
            recheck=self._writer.task_recheck(
                Perm.DECOMPRESS, write_into="dst_dir", unlock_with="dst_password"
            ),
        )

    # -- reading --------------------------------------------------------------------

    async def open(
        self, caller: Caller, path: str, password: str, archive_pass: str, refresh: bool
    ) -> Opened:
        """The archive at ``path`` after AList's checks: bit 12, the folder password."""
        if not caller.user.can(Perm.READ_ARCHIVES):
            raise PermissionDenied()
        full = self._fs.resolve(caller, path)
        meta = await self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        if full == "/":  # an empty path: what AList answers for the root
            raise StorageNotFound(f"failed get storage: {StorageNotFound.none_added().message}")
        signed = self._fs.needs_sign(full, meta)
        place = await self._fs.storage_place(full)
        try:
            told = await place.ops.archive_meta(place.sub_path, archive_pass)
        except NotSupported:
            catalog = await self.catalog(full, archive_pass, refresh)
            return Opened(full, catalog, signed)
        root = Member("", True, children={e.name: _member(e) for e in told.tree or ()})
        catalog = Catalog(root, told.encrypted, told.comment)
        return Opened(full, catalog, signed, told.tree is not None, place, archive_pass)

    async def listing(self, opened: Opened, inner: str) -> list[Member]:
        place = opened.forwarded
        if place is not None:
            told = await place.ops.archive_list(place.sub_path, opened.password, clean_inner(inner))
            return [_member(entry) for entry in told]
        node = opened.catalog.find(clean_inner(inner))
        if node is None:
            raise ObjectNotFound()
        if node.children is None:
            raise NotAFolder()
        return node.child_list()

    async def catalog(self, path: str, password: str, refresh: bool = False) -> Catalog:
        source, obj = await self._source(path)
        key = (path, obj.size, obj.modified)
        if not refresh and key in self._catalogs:
            self._catalogs.move_to_end(key)
            return self._catalogs[key]
        limits = self._limits(LIST_MAX_SIZE)
        # Clients asking for the same archive at once share one scan of it.
        flight = f"{path}\0{obj.size}\0{obj.modified.isoformat()}\0{password}"
        found = await self._scans.run(
            flight, lambda: run_in(ARCHIVE_POOL, scan, source, password, limits)
        )
        self._catalogs[key] = found
        while len(self._catalogs) > CATALOGS_KEPT:
            self._catalogs.popitem(last=False)
        return found

    def _limits(self, max_size: tuple[str, int]) -> Limits:
        """The limits of one reading, from the settings (a value below 0 is no limit)."""

        def value(item: tuple[str, int]) -> int:
            if self._settings is None:
                return item[1]
            return max(0, self._settings.get_int(item[0], item[1]))

        return Limits(value(max_size), value(MAX_ENTRIES), value(MAX_RATIO), max_size[0])

    async def _source(self, path: str) -> tuple[Source, Obj]:
        try:
            obj, link, _ = await self._fs.link(path, LinkArgs())
        except NotAFile as exc:  # a folder: the client asked for the wrong thing
            raise InvalidRequest(_FOLDER) from exc
        if obj.is_dir:
            raise InvalidRequest(_FOLDER)
        loop = asyncio.get_running_loop()
        return Source(link, obj.size, obj.name, loop, self._fs.tree.pool_for(link)), obj

    def check_sign(self, path: str, sign: str, signer: Signer) -> None:
        """``/ae`` links carry an archive sign where ``/d`` links of the path carry one."""
        if signer.needed(self._fs.needs_sign(path, self._metas.nearest(path))):
            signer.verify(path, sign.removesuffix("/"))

    async def member(self, path: str, inner: str, password: str) -> tuple[Obj, Link]:
        """One file of the archive at ``path``, as a link read by ranges (``/ae``)."""
        inner = clean_inner(inner)
        forwarded = await self._forwarded_member(path, inner, password)
        if forwarded is not None:
            return forwarded
        catalog = await self.catalog(path, password)
        node = catalog.find(inner)
        if node is None or node.children is not None:
            raise ObjectNotFound()
        source, _ = await self._source(path)
        if catalog.encrypted:
            # A wrong password shows on reading, not listing: try it before any answer.
            probe = member_stream(source, password, inner, 0, 1)
            async for _ in probe:
                pass

        def reader(offset: int, length: int | None) -> Any:
            fresh = Source(source.link, source.size, source.name, source.loop, source.client)
            return member_stream(fresh, password, inner, offset, length)

        obj = Obj(name=node.name, size=node.size, is_dir=False, modified=node.modified)
        return obj, Link(reader=reader)

    async def _forwarded_member(
        self, path: str, inner: str, password: str
    ) -> tuple[Obj, Link] | None:
        """The member from the back end's own link, where the back end reads archives."""
        place = await self._fs.storage_place(path)
        folder, name = split_path(inner)
        try:
            told = await place.ops.archive_list(place.sub_path, password, folder)
        except NotSupported:
            return None
        entry = next((e for e in told if e.name == name), None)
        if entry is None or entry.is_dir:
            raise ObjectNotFound()
        link = await place.ops.archive_link(place.sub_path, password, inner)
        return Obj(name=entry.name, size=entry.size, is_dir=False, modified=entry.modified), link

    # -- extracting -----------------------------------------------------------------

    async def decompress(
        self,
        caller: Caller,
        src_dir: str,
        dst_dir: str,
        names: list[str],
        archive_pass: str,
        inner_path: str,
        put_into_new_dir: bool,
        overwrite: bool = False,
        password: str = "",
    ) -> list[Any]:
        """One ``decompress`` task per archive; ``password`` opens folder passwords in
        the destination (and nothing else: members are never written below a folder
        whose password the request did not give)."""
        if not caller.user.can(Perm.DECOMPRESS):
            raise PermissionDenied()
        folder = self._fs.resolve(caller, src_dir)
        sources = [await self._writer.child(caller, folder, name) for name in names]
        target = await self._writer.folder(caller, dst_dir, password)
        if not self._writer.can_write_in(caller, target):
            raise PermissionDenied()
        inner = clean_inner(inner_path)
        tasks = []
        for src in sources:
            args = (archive_pass, inner, put_into_new_dir, overwrite)
            if await self._decompressed_there(src, target, *args):
                continue
            catalog = await self.catalog(src, archive_pass)
            node = catalog.find(inner)
            if node is None:
                raise ObjectNotFound()
            place, into = self._writer.place(src), self._writer.place(target)
            shown = "<***>" if archive_pass else "<>"
            title = (
                f"decompress [{place.mount_path}]({place.sub_path})[{inner}] to "
                f"[{into.mount_path}]({into.sub_path}) with password {shown}"
            )
            payload = {
                "src": src,
                "dst_dir": target,
                "inner": inner,
                "password": archive_pass,
                "new_dir": put_into_new_dir,
                "overwrite": overwrite,
                "dst_password": password,
            }
            tasks.append(
                await self._writer.tasks.submit(
                    "decompress", title, caller.user, payload, _size(node)
                )
            )
        return tasks

    async def _decompressed_there(
        self, src: str, target: str, password: str, inner: str, new_dir: bool, overwrite: bool
    ) -> bool:
        """Whether the back end holding both the archive and the destination took the
        extraction on itself (AList extracts on one storage this way too)."""
        place, into = await self._fs.storage_place(src), self._writer.place(target)
        if not place.same_storage(into):
            return False
        try:
            await place.ops.archive_decompress(
                place.sub_path, into.sub_path, password, inner, new_dir, overwrite
            )
        except NotSupported:
            return False
        return True

    async def run_decompress(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        src, dst_dir = str(payload["src"]), str(payload["dst_dir"])
        inner, password = str(payload.get("inner", "/")), str(payload.get("password", ""))
        ctx.set_status("getting src object")
        catalog = await self.catalog(src, password)
        node = catalog.find(inner)
        if node is None:
            raise ObjectNotFound()
        total = _size(node)
        ctx.set_total(total)
        source, _ = await self._source(src)
        work = self._temp_dir / f"{WORK_PREFIX}{secrets.token_hex(12)}"
        await run_in(ARCHIVE_POOL, work.mkdir, 0o700)
        loop = asyncio.get_running_loop()
        done = 0

        def progress(written: int) -> None:
            nonlocal done
            step, done = written - done, written
            loop.call_soon_threadsafe(ctx.add_done, step)

        ctx.set_status("walking and decompressing")
        limits = self._limits(EXTRACT_MAX_SIZE)
        clashes: list[str] = []
        try:
            work_args = (source, password, inner, str(work), progress, limits, clashes)
            await run_in(ARCHIVE_POOL, extract, *work_args)
        except BaseException:
            source.cancelled.set()
            await run_in(ARCHIVE_POOL, discard_tree, work)
            raise
        for clash in clashes[:20]:
            ctx.set_status(f"skipped {clash}: an earlier member of the archive has its name")
        name = split_path(src)[1]
        stem = name.rsplit(".", 1)[0] if "." in name else name
        into = self._writer.place(dst_dir)
        await ctx.spawn(
            "decompress_upload",
            f"upload {stem} to [{into.mount_path}]({into.sub_path})",
            {
                "file": str(work),
                "name": stem,
                "dst_dir": dst_dir,
                "in_place": not payload.get("new_dir", False),
                "overwrite": bool(payload.get("overwrite", False)),
                "dst_password": str(payload.get("dst_password", "")),
            },
        )
        ctx.set_progress(100)

    async def run_upload(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        """Store one extracted entry: a file is uploaded; a folder is made (unless its
        contents go in place) and a task spawned for each of its entries.

        The entry's path passes the checks an upload of that path passes, for the
        task's creator as they are now; an entry refused by them is skipped, and the
        task's status says which and why (in the creator's own paths).
        """
        file, name, dst_dir = str(payload["file"]), str(payload["name"]), str(payload["dst_dir"])
        if not await run_in(ARCHIVE_POOL, os.path.exists, file):
            raise ObjectNotFound(EXTRACTED_GONE)
        entry = _Entry(
            ctx.creator,
            child_path(dst_dir, name),
            bool(payload.get("overwrite", False)),
            str(payload.get("dst_password", "")),
        )
        try:
            if await run_in(ARCHIVE_POOL, os.path.isdir, file):
                await self._upload_folder(ctx, file, entry, bool(payload.get("in_place")))
            else:
                await self._upload_file(ctx, file, entry)
        except (Forbidden, BadRequest, ObjectExists) as exc:
            ctx.set_status(f"skipped {entry.shown()}: {exc.message}")
        finally:
            await run_in(ARCHIVE_POOL, _remove, file)

    async def _upload_file(self, ctx: TaskContext, file: str, entry: _Entry) -> None:
        place, _ = await self._writer.upload_target(
            entry.caller(), entry.relative(), entry.password, entry.overwrite
        )
        size = (await run_in(ARCHIVE_POOL, os.stat, file)).st_size
        ctx.set_status("uploading")
        ctx.set_total(size)
        stream = _counted(file_stream(file), ctx)
        await self._writer.store(place, stream, size, None, entry.overwrite)

    async def _upload_folder(
        self, ctx: TaskContext, folder: str, entry: _Entry, in_place: bool
    ) -> None:
        ctx.set_status("src object is dir, listing objs")
        target = split_path(entry.path)[0] if in_place else entry.path
        if in_place:
            await self._check_folder(entry.at(target))
        else:
            await self._make_folder(entry)
        into = self._writer.place(target)
        for name in sorted(await run_in(ARCHIVE_POOL, os.listdir, folder)):
            owned = self._temp_dir / f"{WORK_PREFIX}{secrets.token_hex(12)}"
            await run_in(ARCHIVE_POOL, os.rename, os.path.join(folder, name), owned)
            await ctx.spawn(
                "decompress_upload",
                f"upload {name} to [{into.mount_path}]({into.sub_path})",
                {
                    "file": str(owned),
                    "name": name,
                    "dst_dir": target,
                    "in_place": False,
                    "overwrite": entry.overwrite,
                    "dst_password": entry.password,
                },
            )

    async def _check_folder(self, entry: _Entry) -> None:
        """The destination is still one the creator may write in, as they are now."""
        caller = entry.caller()
        folder = await self._writer.folder(caller, entry.relative(), entry.password)
        if not self._writer.can_write_in(caller, folder):
            raise PermissionDenied()

    async def _make_folder(self, entry: _Entry) -> None:
        """The folder at ``entry.path``, made unless there, after the checks of a mkdir
        of it; a file of that name refuses it."""
        validate_name(split_path(entry.path)[1])
        made = await self._writer.mkdir(entry.caller(), entry.relative(), entry.password)
        if not made.is_dir:
            raise ObjectExists()


@dataclass(frozen=True, slots=True)
class _Entry:
    """Where one extracted entry goes, and for whom."""

    creator: User | None
    path: str  # the full path
    overwrite: bool
    password: str

    def caller(self) -> Caller:
        if self.creator is None:
            raise PermissionDenied()
        return Caller(self.creator, "")

    def relative(self) -> str:
        """``path`` as the creator names it: below their base path as it is now."""
        base = self.caller().user.base_path
        if not is_sub_path(base, self.path):
            raise PermissionDenied()
        return clean_path("/" + self.path[len(base.rstrip("/")) :])

    def at(self, path: str) -> _Entry:
        return _Entry(self.creator, path, self.overwrite, self.password)

    def shown(self) -> str:
        """The path for a status line: the creator's own, never a server path."""
        try:
            return self.relative()
        except PermissionDenied:
            return split_path(self.path)[1]


def _member(entry: ArchiveEntry) -> Member:
    """A member as a back end that reads archives told it (a folder's children when
    it sent them)."""
    if not entry.is_dir:
        return Member(entry.name, False, entry.size, entry.modified)
    children = {child.name: _member(child) for child in entry.children or ()}
    return Member(entry.name, True, 0, entry.modified, children)


def _size(node: Member) -> int:
    total, stack = 0, [node]
    while stack:
        member = stack.pop()
        if member.children is None:
            total += member.size
        else:
            stack.extend(member.children.values())
    return total


async def _counted(stream: Any, ctx: TaskContext) -> Any:
    async for data in stream:
        ctx.add_done(len(data))
        yield data


def _remove(path: str) -> None:
    if os.path.isdir(path):
        discard_tree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
