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
``/ad`` and ``/ap`` serve a member as ``/ae`` does, since no back end here extracts
by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from manifold.config import make_private
from manifold.errors import NotAFolder, ObjectNotFound, PermissionDenied, ServerError
from manifold.models import Link, LinkArgs, Obj, Perm
from manifold.services.admin.metas import MetaService
from manifold.services.archive.reader import (
    Catalog,
    Member,
    Source,
    clean_inner,
    extract,
    member_stream,
    scan,
)
from manifold.services.auth.service import Caller
from manifold.services.auth.sign import Signer
from manifold.services.fs.read import FsService
from manifold.services.fs.streams import file_stream
from manifold.services.fs.write import FsWriter
from manifold.tasks.service import TaskContext, TaskService
from manifold.vfs.paths import clean_path, split_path

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


@dataclass(frozen=True, slots=True)
class Opened:
    """An archive the caller may read, and what it holds."""

    path: str
    catalog: Catalog
    signed: bool


class ArchiveService:
    def __init__(
        self,
        fs: FsService,
        metas: MetaService,
        writer: FsWriter,
        temp_dir: Path,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._fs = fs
        self._metas = metas
        self._writer = writer
        self._temp_dir = temp_dir
        self._http = http
        self._catalogs: OrderedDict[tuple[str, int, datetime], Catalog] = OrderedDict()

    async def start(self) -> None:
        """Drop what extractions left before a restart: their tasks can't resume."""
        await asyncio.to_thread(self._drop_leftovers)

    def _drop_leftovers(self) -> None:
        self._temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        make_private(self._temp_dir)
        for entry in self._temp_dir.glob(f"{WORK_PREFIX}*"):
            shutil.rmtree(entry, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()

    def register(self, tasks: TaskService) -> None:
        tasks.register(
            "decompress",
            self.run_decompress,
            max_retry=2,
            threads_setting="decompress_download_task_threads_num",
            recheck=self._writer.task_recheck(Perm.DECOMPRESS, "src", write_into="dst_dir"),
        )
        tasks.register(
            "decompress_upload",
            self.run_upload,
            max_retry=2,
            threads_setting="decompress_upload_task_threads_num",
            recheck=self._writer.task_recheck(Perm.DECOMPRESS, write_into="dst_dir"),
        )

    # -- reading --------------------------------------------------------------------

    async def open(
        self, caller: Caller, path: str, password: str, archive_pass: str, refresh: bool
    ) -> Opened:
        """The archive at ``path`` after AList's checks: bit 12, the folder password."""
        if not caller.user.can(Perm.READ_ARCHIVES):
            raise PermissionDenied()
        full = self._fs.resolve(caller, path)
        meta = self._fs.check_access(caller, full, password)
        await self._fs.confine(caller, full)
        catalog = await self.catalog(full, archive_pass, refresh)
        return Opened(full, catalog, self._fs.needs_sign(full, meta))

    async def listing(self, opened: Opened, inner: str) -> list[Member]:
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
        found = await asyncio.to_thread(scan, source, password)
        self._catalogs[key] = found
        while len(self._catalogs) > CATALOGS_KEPT:
            self._catalogs.popitem(last=False)
        return found

    async def _source(self, path: str) -> tuple[Source, Obj]:
        obj, link, _ = await self._fs.link(path, LinkArgs())
        if obj.is_dir:
            raise ServerError("not a file")
        return Source(link, obj.size, obj.name, asyncio.get_running_loop(), self._http), obj

    def check_sign(self, path: str, sign: str, signer: Signer) -> None:
        """``/ae`` links carry an archive sign where ``/d`` links of the path carry one."""
        if signer.needed(self._fs.needs_sign(path, self._metas.nearest(path))):
            signer.verify(path, sign.removesuffix("/"))

    async def member(self, path: str, inner: str, password: str) -> tuple[Obj, Link]:
        """One file of the archive at ``path``, as a link read by ranges (``/ae``)."""
        inner = clean_inner(inner)
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
    ) -> list[Any]:
        if not caller.user.can(Perm.DECOMPRESS):
            raise PermissionDenied()
        folder = self._fs.resolve(caller, src_dir)
        sources = [await self._writer.child(caller, folder, name) for name in names]
        target = await self._writer.folder(caller, dst_dir)
        if not self._writer.can_write_in(caller, target):
            raise PermissionDenied()
        inner = clean_inner(inner_path)
        tasks = []
        for src in sources:
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
            }
            tasks.append(
                await self._writer.tasks.submit(
                    "decompress", title, caller.user, payload, _size(node)
                )
            )
        return tasks

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
        await asyncio.to_thread(work.mkdir, 0o700)
        loop = asyncio.get_running_loop()
        done = 0

        def progress(written: int) -> None:
            nonlocal done
            step, done = written - done, written
            loop.call_soon_threadsafe(ctx.add_done, step)

        ctx.set_status("walking and decompressing")
        try:
            await asyncio.to_thread(extract, source, password, inner, str(work), progress)
        except BaseException:
            source.cancelled.set()
            await asyncio.to_thread(shutil.rmtree, work, True)
            raise
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
            },
        )
        ctx.set_progress(100)

    async def run_upload(self, ctx: TaskContext, payload: dict[str, Any]) -> None:
        """Store one extracted entry: a file is uploaded; a folder is made (unless its
        contents go in place) and a task spawned for each of its entries."""
        file, name, dst_dir = str(payload["file"]), str(payload["name"]), str(payload["dst_dir"])
        if not await asyncio.to_thread(os.path.exists, file):
            raise ObjectNotFound("the extracted files are gone (was the server restarted?)")
        try:
            if await asyncio.to_thread(os.path.isdir, file):
                await self._upload_folder(ctx, file, name, dst_dir, bool(payload.get("in_place")))
                return
            size = (await asyncio.to_thread(os.stat, file)).st_size
            ctx.set_status("uploading")
            ctx.set_total(size)
            stream = _counted(file_stream(file), ctx)
            target = clean_path(f"{dst_dir}/{name}")
            await self._writer.store(self._writer.place(target), stream, size, None, True)
        finally:
            await asyncio.to_thread(_remove, file)

    async def _upload_folder(
        self, ctx: TaskContext, folder: str, name: str, dst_dir: str, in_place: bool
    ) -> None:
        ctx.set_status("src object is dir, listing objs")
        target = dst_dir
        if not in_place:
            target = clean_path(f"{dst_dir}/{name}")
            if await self._writer.exists(self._writer.place(target)) is None:
                await self._writer.tree.make_dir(target)
        into = self._writer.place(target)
        for entry in sorted(await asyncio.to_thread(os.listdir, folder)):
            owned = self._temp_dir / f"{WORK_PREFIX}{secrets.token_hex(12)}"
            await asyncio.to_thread(os.rename, os.path.join(folder, entry), owned)
            await ctx.spawn(
                "decompress_upload",
                f"upload {entry} to [{into.mount_path}]({into.sub_path})",
                {"file": str(owned), "name": entry, "dst_dir": target, "in_place": False},
            )


def _size(node: Member) -> int:
    if node.children is None:
        return node.size
    return sum(_size(child) for child in node.children.values())


async def _counted(stream: Any, ctx: TaskContext) -> Any:
    async for data in stream:
        ctx.add_done(len(data))
        yield data


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
