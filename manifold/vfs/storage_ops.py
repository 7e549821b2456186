"""Operations on one mounted storage, in paths inside it: lookup, list cache, sorting.

Listings are cached per path for the storage's ``cache_expiration`` minutes, and
identical concurrent calls share one driver call. ``ListCache`` is the interface;
each process keeps entries in memory; what one process changes, the others drop (the
``on_changed`` hook tells them, through the change bus). The memory
cache holds at most ``LIST_CACHE_OBJECTS`` objects in all, dropping the listings used
least recently first, and keeps each storage's keys apart, so that dropping a folder
and what is below it looks only at that storage's listings.

Storages that are never cached (drivers with ``no_cache``, or a cache time of 0)
still keep each listing for ``SNAPSHOT_SECONDS``, so that paging through a big
folder scans it once rather than once per page; ``refresh`` and writes made
through Manifold drop or patch it as they do a cached listing. When the driver can
fingerprint a folder (Local: one ``stat``), such a kept listing is checked against
the folder's fingerprint on every use, so a change made behind the server's back
shows at once; a write through Manifold changes the fingerprint too, so the next
listing after it is one rescan.

A listing looks its folder up first (a file is no folder, nothing is not found), unless
the driver makes the folder from its path (``Driver.folder_at``) because its listing
tells those apart itself: then it is one round trip to the back end, as rclone's.

Every listing and every looked-up object passes ``vfs.names`` first: an entry whose name
cannot be an entry of its folder, or holds a character no new name may, is left out.

A driver whose back end keeps listings of its own (another AList) hears of a
``refresh`` through ``Driver.list_refreshed``, so the refresh reaches the back end.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import itertools
import operator
import posixpath
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from manifold.concurrency import SingleFlight
from manifold.drivers.base import (
    EXCLUSIVE_CREATE,
    ArchiveEntry,
    ArchiveMeta,
    Driver,
    Upload,
    gathered,
)
from manifold.errors import (
    ManifoldError,
    NotAFile,
    NotAFolder,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    ServerError,
)
from manifold.models import DiskUsage, Link, LinkArgs, Obj, OtherArgs, Storage
from manifold.paths import clean_path, refuse_long_name, split_path
from manifold.vfs.names import NameCheck

SNAPSHOT_SECONDS = 5.0
# Objects the memory list cache holds over all listings (an object is a few hundred
# bytes): a crawler's walk of a big remote tree cannot grow it without bound.
LIST_CACHE_OBJECTS = 500_000
# Objects one storage's listings may hold of that: a crawl of one big bucket drops its
# own oldest listings, not every other storage's.
STORAGE_CACHE_OBJECTS = 200_000
# Links kept per storage, and how long before its expiry a kept link is given up.
LINK_CACHE = 10_000
LINK_MARGIN = 0.2
LINK_MARGIN_SECONDS = 30.0
# Fingerprints kept per storage: enough for every folder being paged through.
_FINGERPRINTS = 10_000
_INSTANCES = itertools.count(1)
_SWEEP_SECONDS = 10.0


class ListCache(Protocol):
    """Listings by storage (``scope``, one per mounted instance) and path. A stored list
    is never changed in place: a change puts a new list, so readers may keep and derive
    from the list they got (``vfs.memo``)."""

    def get(self, scope: str, path: str) -> builtins.list[Obj] | None: ...

    def put(self, scope: str, path: str, objs: builtins.list[Obj], ttl: float) -> None: ...

    def drop(self, scope: str, path: str) -> None: ...

    def drop_prefix(self, scope: str, prefix: str) -> None:
        """Drop the listing of ``prefix`` and of every folder below it."""
        ...


class MemoryListCache:
    """Listings in memory: a least-recently-used cache counted in objects, each
    listing kept until its time runs out or room is needed."""

    def __init__(
        self, max_objects: int = LIST_CACHE_OBJECTS, per_scope: int = STORAGE_CACHE_OBJECTS
    ) -> None:
        self._max = max_objects
        self._per_scope = min(per_scope, max_objects)
        # (scope, path) -> (expires at, objects); least recently used first.
        self._entries: OrderedDict[tuple[str, str], tuple[float, list[Obj]]] = OrderedDict()
        # scope -> the paths it holds, least recently used first, and their objects.
        self._scopes: dict[str, OrderedDict[str, None]] = {}
        self._scope_objects: dict[str, int] = {}
        self._objects = 0
        self._next_sweep = 0.0
        # Lookups that found a live listing, and those that did not (``/metrics``).
        self.hits = 0
        self.misses = 0

    def scope_objects(self, scope: str) -> int:
        """Objects held in ``scope``'s listings."""
        return self._scope_objects.get(scope, 0)

    @property
    def objects(self) -> int:
        """Objects held over all listings (an empty listing counts one)."""
        return self._objects

    def __len__(self) -> int:
        """Listings held, expired ones not yet swept included."""
        return len(self._entries)

    def get(self, scope: str, path: str) -> builtins.list[Obj] | None:
        key = (scope, path)
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        if entry[0] < time.monotonic():
            self._remove(key)
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        self._scopes[scope].move_to_end(path)
        return entry[1]

    def put(self, scope: str, path: str, objs: builtins.list[Obj], ttl: float) -> None:
        """Keep ``objs``, making room by dropping the least recently used listings; a
        listing bigger than the whole cache is not kept."""
        now = time.monotonic()
        if now >= self._next_sweep:
            self._sweep(now)
        key = (scope, path)
        self._remove(key)
        weight = _weight(objs)
        if weight > self._per_scope:
            return
        self._entries[key] = (now + ttl, objs)
        self._scopes.setdefault(scope, OrderedDict())[path] = None
        self._scope_objects[scope] = self._scope_objects.get(scope, 0) + weight
        self._objects += weight
        paths = self._scopes[scope]
        while self._scope_objects[scope] > self._per_scope:
            self._remove((scope, next(iter(paths))))
        while self._objects > self._max:
            self._remove(next(iter(self._entries)))

    def drop(self, scope: str, path: str) -> None:
        self._remove((scope, path))

    def drop_prefix(self, scope: str, prefix: str) -> None:
        below = prefix if prefix.endswith("/") else prefix + "/"
        paths = self._scopes.get(scope, ())
        for path in [p for p in paths if p == prefix or p.startswith(below)]:
            self._remove((scope, path))

    def _remove(self, key: tuple[str, str]) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        weight = _weight(entry[1])
        self._objects -= weight
        scope, path = key
        paths = self._scopes[scope]
        del paths[path]
        self._scope_objects[scope] -= weight
        if not paths:
            del self._scopes[scope]
            del self._scope_objects[scope]

    def _sweep(self, now: float) -> None:
        # Expired listings of folders nobody asks for again would otherwise stay forever.
        for key in [k for k, (expires, _) in self._entries.items() if expires < now]:
            self._remove(key)
        self._next_sweep = now + _SWEEP_SECONDS


def _weight(objs: builtins.list[Obj]) -> int:
    return max(1, len(objs))


class _Claim:
    """A destination's lock and how many calls hold or wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class StorageOps:
    def __init__(
        self,
        storage: Storage,
        driver: Driver[Any],
        cache: ListCache,
        no_cache: bool = False,
        on_listed: Callable[[str, builtins.list[Obj]], None] | None = None,
        on_changed: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.storage = storage
        # Told of every listing this process patched or dropped (the folder, and
        # whether what is below it went too): other processes drop theirs.
        self._on_changed = on_changed
        self._no_cache = no_cache
        # Told of every listing fetched from the back end (not of cached ones).
        self._on_listed = on_listed
        self.driver = driver
        self._cache = cache
        self._flight: SingleFlight[builtins.list[Obj]] = SingleFlight()
        self._revalidates = no_cache and "fingerprint" in driver.capabilities()
        # Cache key -> (folder, its fingerprint when listed), oldest first.
        self._prints: OrderedDict[str, tuple[Obj, str | None]] = OrderedDict()
        # Each mounted instance keys its listings apart: a storage edited, disabled or
        # deleted and mounted again (its id reused) never sees the old instance's.
        self._scope = f"{storage.id}.{next(_INSTANCES)}"
        self._prefix = self._scope + ":"
        # Links with an expiry, by (path, link type): (kept until, object, link).
        self._links: OrderedDict[tuple[str, str], tuple[float, Obj, Link]] = OrderedDict()
        # A back end that cannot refuse a taken name itself (``EXCLUSIVE_CREATE``) gets
        # its puts and copies that must not replace one at a time per destination.
        self._exclusive = EXCLUSIVE_CREATE in driver.promises()
        self._claims: dict[str, _Claim] = {}
        self._names = NameCheck(storage.mount_path)

    @property
    def _ttl(self) -> float:
        """Seconds a listing is kept: the cache time, or a snapshot's when never cached."""
        minutes = self.storage.cache_expiration
        if self._no_cache or minutes <= 0:
            return SNAPSHOT_SECONDS
        return float(minutes) * 60

    async def get(self, path: str) -> Obj:
        """The object at ``path`` inside the storage."""
        path = clean_path(path)
        if path == "/":
            return await self.driver.root_obj()
        self._names.refuse_unlisted(path)
        if "get" in self.driver.capabilities():
            return self._names.found(path, await self.driver.get(path))
        parent, name = split_path(path)
        for obj in await self.list(parent):
            if obj.name == name:
                return obj
        raise ObjectNotFound()

    async def list(self, path: str, refresh: bool = False) -> builtins.list[Obj]:
        path = clean_path(path)
        key = self._prefix + path
        cached = self._cache.get(self._scope, path)
        if refresh:
            self._cache.drop(self._scope, path)
            self._tell(path, False)
        elif cached is not None and (not self._revalidates or await self._unchanged(key)):
            return cached
        # A refresh the back end hears of (``list_refreshed``) never joins a plain
        # listing already under way: that one may be answered from the back end's cache.
        forwarded = refresh and "list_refreshed" in self.driver.capabilities()
        flight = key + "\0refresh" if forwarded else key
        return await self._flight.run(
            flight, lambda: self._list_fresh(path, key, cached, forwarded)
        )

    async def _unchanged(self, key: str) -> bool:
        """Whether the folder a kept listing came from still has its fingerprint."""
        kept = self._prints.get(key)
        if kept is None or kept[1] is None:
            return False
        try:
            return await self.driver.fingerprint(kept[0]) == kept[1]
        except ManifoldError:
            return False  # gone or unreadable: the rescan says which

    async def _list_fresh(
        self, path: str, key: str, before: builtins.list[Obj] | None, refresh: bool = False
    ) -> builtins.list[Obj]:
        folder = await self._folder(path)
        # Taken before the scan: a change during the scan shows as a new fingerprint.
        token = await self.driver.fingerprint(folder) if self._revalidates else None
        if refresh:
            listed = await self.driver.list_refreshed(folder)
        elif "list_pages" in self.driver.capabilities():
            # A page a call, each within the time limit: a folder of 100,000 keys
            # never waits on one call for all of them, nor holds more than the bound.
            limit = self.driver.resources.max_listing_entries
            where = posixpath.join(self.storage.mount_path, path.lstrip("/"))
            listed = await gathered(self.driver.list_pages(folder), where, limit)
        else:
            listed = await self.driver.list(folder)
        objs = self._sorted(self._names.listed(path, listed))
        if before is not None and _same_objects(objs, before):
            # A rescan that found nothing changed hands out the list it replaces, so
            # that what was derived from it (``vfs.memo``) is still found.
            objs = before
        if objs:  # as AList: an empty listing is not kept
            self._cache.put(self._scope, path, objs, self._ttl)
            if self._revalidates:
                self._remember(key, folder, token)
        if self._on_listed is not None:
            self._on_listed(path, objs)
        return objs

    async def _folder(self, path: str) -> Obj:
        """The folder at ``path`` to list: made from the path where the driver's listing
        tells a missing folder and a file itself (``Driver.folder_at``: one round trip,
        as rclone lists), else looked up. A kept listing checked against a fingerprint
        needs the folder as the back end has it, so that is always looked up."""
        if path != "/" and not self._revalidates:
            self._names.refuse_unlisted(path)
            folder = self.driver.folder_at(path)
            if folder is not None:
                return folder
        folder = await self.get(path)
        if not folder.is_dir:
            raise NotAFolder()
        return folder

    def left_out(self, path: str) -> int:
        """How many entries the last listing of ``path`` left out for their names
        (``vfs.names``): a folder that lists empty is not empty while this is not 0."""
        return self._names.left_out(clean_path(path))

    def _remember(self, key: str, folder: Obj, token: str | None) -> None:
        self._prints[key] = (folder, token)
        self._prints.move_to_end(key)
        while len(self._prints) > _FINGERPRINTS:
            self._prints.popitem(last=False)

    async def link(self, path: str, args: LinkArgs) -> tuple[Obj, Link]:
        """``path``'s object and a link to its bytes.

        A link that says how long it stays valid (an S3 presigned URL) is kept until
        shortly before then, so that downloads of one file do not each cost the back
        end a round trip; a write through this server to the path drops it.
        """
        path = clean_path(path)
        key = (path, args.type)
        kept = self._links.get(key)
        now = time.monotonic()
        if kept is not None:
            if kept[0] > now:
                self._links.move_to_end(key)
                return kept[1], kept[2]
            del self._links[key]
        obj = await self.get(path)
        if obj.is_dir:
            raise NotAFile()
        link = await self.driver.link(obj, args)
        if link.url and link.reader is None and link.expires_in:
            margin = max(LINK_MARGIN_SECONDS, link.expires_in * LINK_MARGIN)
            if link.expires_in > margin:
                self._links[key] = (now + link.expires_in - margin, obj, link)
                while len(self._links) > LINK_CACHE:
                    self._links.popitem(last=False)
        return obj, link

    def _drop_links(self, path: str, below: bool = False) -> None:
        if not self._links:
            return
        prefix = path.rstrip("/") + "/"
        for key in [k for k in self._links if k[0] == path or (below and k[0].startswith(prefix))]:
            del self._links[key]

    async def other(self, path: str, method: str, data: Any) -> Any:
        """A driver-specific operation on the object at ``path`` (AList's ``Other``)."""
        try:
            obj = await self.get(path)
        except ManifoldError as exc:
            raise exc.with_context("failed to get obj") from exc
        if "other" not in self.driver.capabilities():
            raise NotSupported("not implement")
        return await self.driver.other(OtherArgs(obj, method, data))

    def direct_upload_tools(self) -> builtins.list[str]:
        """How a browser may upload straight to this storage (``fs/list`` shows them)."""
        return self.driver.direct_upload_tools()

    async def direct_upload_info(self, path: str, size: int) -> dict[str, Any]:
        """A signed upload of the file at ``path`` straight to the back end; its
        folder is looked up (made by the caller beforehand) so the driver gets it."""
        if not self.driver.direct_upload_tools():
            raise NotSupported("not implement")
        parent, name = split_path(clean_path(path))
        return await self.driver.direct_upload_info(await self.get(parent), name, size)

    async def space(self) -> DiskUsage:
        """The storage's total and free space, where its back end knows them
        (``Driver.details``: a Local storage's root folder, an SFTP or SMB share)."""
        if "details" not in self.driver.capabilities():
            raise NotSupported("this storage does not report its space")
        return await self.driver.details()

    # --- archives the back end reads itself (``NotSupported`` where it does not) ----

    async def archive_meta(self, path: str, password: str) -> ArchiveMeta:
        file = await self._archive(path, "archive_meta")
        return await self.driver.archive_meta(file, password)

    async def archive_list(
        self, path: str, password: str, inner: str
    ) -> builtins.list[ArchiveEntry]:
        file = await self._archive(path, "archive_list")
        return await self.driver.archive_list(file, password, inner)

    async def archive_link(self, path: str, password: str, inner: str) -> Link:
        file = await self._archive(path, "archive_link")
        return await self.driver.archive_link(file, password, inner)

    async def archive_decompress(
        self,
        path: str,
        dst_dir: str,
        password: str,
        inner: str,
        into_new_dir: bool,
        overwrite: bool,
    ) -> None:
        file = await self._archive(path, "archive_decompress")
        dst_dir = clean_path(dst_dir)
        folder = await self.get(dst_dir)
        await self.driver.archive_decompress(file, folder, password, inner, into_new_dir, overwrite)
        self.forget(dst_dir)  # the back end writes there, now or soon

    async def _archive(self, path: str, capability: str) -> Obj:
        if capability not in self.driver.capabilities():
            raise NotSupported()
        obj = await self.get(path)
        if obj.is_dir:
            raise NotAFile()
        return obj

    def forget(self, path: str, tell: bool = True) -> None:
        """Drop the cached listings and links of ``path`` and everything below it
        (and, with ``tell``, have other processes drop theirs)."""
        self.dropped(path, below=True)
        if tell:
            self._tell(path, True)

    def dropped(self, path: str, below: bool) -> None:
        """Drop the listing of ``path`` (and with ``below`` of what is below it) and
        the links below it: another process changed it."""
        path = clean_path(path)
        if below:
            self._cache.drop_prefix(self._scope, path)
        else:
            self._cache.drop(self._scope, path)
        self._drop_links(path, below=True)

    def _tell(self, path: str, below: bool) -> None:
        if self._on_changed is not None:
            self._on_changed(clean_path(path), below)

    def _sorted(self, objs: builtins.list[Obj]) -> builtins.list[Obj]:
        storage = self.storage
        if storage.order_by in ("name", "size", "modified"):
            reverse = storage.order_direction == "desc"
            objs = sorted(objs, key=_SORT_KEYS[storage.order_by], reverse=reverse)
        if storage.extract_folder == "front":
            objs = sorted(objs, key=lambda o: not o.is_dir)
        elif storage.extract_folder == "back":
            objs = sorted(objs, key=lambda o: o.is_dir)
        return objs

    # --- writes: each patches the cached listings it changes ------------------------
    # Patches replace a cached list with a new one (never mutate it: a reader may be
    # iterating the old one), so the next listing is right without a driver call.
    # A new name over 255 bytes is refused here at the latest (``refuse_long_name``),
    # before any back end answers it with a failure clients retry.

    async def make_dir(self, path: str) -> Obj:
        """Create the folder ``path`` and any missing parents; an existing folder is fine.

        The deepest folder that exists is found by halving (a folder exists only where
        its parents do), then each missing level is made inside the one before: a path
        of any depth costs a few lookups and one driver call a missing level, with no
        nesting of calls.
        """
        names = [name for name in clean_path(path).split("/") if name]
        depth, obj = await self._deepest(names)
        if not obj.is_dir:
            raise ObjectExists("file exists")
        for name in names[depth:]:
            refuse_long_name(name)
        for at in range(depth, len(names)):
            obj = await self.driver.make_dir(obj, names[at])
            self.patch_add(_joined(names[:at]), obj)
        return obj

    async def _deepest(self, names: builtins.list[str]) -> tuple[int, Obj]:
        """How many of ``names`` lead to an existing object, and that object."""
        try:
            return len(names), await self.get(_joined(names))
        except ObjectNotFound:
            pass
        found, missing, obj = 0, len(names), None
        while missing - found > 1:
            middle = (found + missing) // 2
            try:
                obj = await self.get(_joined(names[:middle]))
                found = middle
            except ObjectNotFound:
                missing = middle
        if obj is None or found == 0:
            obj = await self.get("/")
        return found, obj

    async def rename(self, path: str, new_name: str) -> Obj:
        path = clean_path(path)
        parent, name = split_path(path)
        obj = await self.driver.rename(await self.get(path), refuse_long_name(new_name))
        self.patch_remove(parent, name)
        self.patch_add(parent, obj)
        if obj.is_dir:
            self.forget(path)
        return obj

    async def move(self, path: str, dst_dir: str) -> Obj:
        path, dst_dir = clean_path(path), clean_path(dst_dir)
        parent, name = split_path(path)
        obj = await self.driver.move(await self.get(path), await self.get(dst_dir))
        self.patch_remove(parent, name)
        self.patch_add(dst_dir, obj)
        if obj.is_dir:
            self.forget(path)
        return obj

    async def move_over(self, path: str, dst: str) -> Obj:
        """Give the file ``path`` the full path ``dst``, replacing the file there in one
        step (``Driver.move_over``); the cached listings show it once, at ``dst``."""
        path, dst = clean_path(path), clean_path(dst)
        (parent, name), (dst_dir, new_name) = split_path(path), split_path(dst)
        refuse_long_name(new_name)
        src, folder, replaced = await asyncio.gather(
            self.get(path), self.get(dst_dir), self.get(dst)
        )
        obj = await self.driver.move_over(src, folder, new_name, replaced)
        self.patch_remove(parent, name)
        self.patch_add(dst_dir, obj)
        return obj

    async def move_listed(self, path: str, obj: Obj, dst_dir: str, folder: Obj) -> Obj:
        """``move`` of ``obj`` (at ``path``, as a listing gave it) into ``folder`` (at
        ``dst_dir``, as ``make_dir`` or a lookup gave it): a move of many files into
        one folder, one at a time, asks the back end to look up neither again."""
        path, dst_dir = clean_path(path), clean_path(dst_dir)
        parent, name = split_path(path)
        moved = await self.driver.move(obj, folder)
        self.patch_remove(parent, name)
        self.patch_add(dst_dir, moved)
        return moved

    async def copy(self, path: str, dst_dir: str) -> Obj:
        dst_dir = clean_path(dst_dir)
        source = await self.get(path)
        async with self._claim(f"{dst_dir.rstrip('/')}/{source.name}"):
            obj = await self.driver.copy(source, await self.get(dst_dir))
        self.patch_add(dst_dir, obj)
        return obj

    async def remove(self, path: str) -> None:
        path = clean_path(path)
        if path == "/":
            raise ServerError.root_removal()
        parent, name = split_path(path)
        await self.driver.remove(await self.get(path))
        self.patch_remove(parent, name)
        self.forget(path)

    async def put(self, dst_dir: str, upload: Upload) -> Obj:
        """Store a file, creating missing folders; nothing is visible until it is whole."""
        refuse_long_name(upload.name)
        folder = await self.make_dir(dst_dir)
        if upload.overwrite:
            obj = await self.driver.put(folder, upload)
        else:
            async with self._claim(f"{clean_path(dst_dir).rstrip('/')}/{upload.name}"):
                obj = await self.driver.put(folder, upload)
        self.patch_add(clean_path(dst_dir), obj)
        return obj

    @contextlib.asynccontextmanager
    async def _claim(self, path: str) -> AsyncIterator[None]:
        """One call at a time for ``path`` when the back end cannot decide a race for a
        name itself: each then finds the name taken or free as the last one left it."""
        if self._exclusive:
            yield
            return
        claim = self._claims.setdefault(path, _Claim())
        claim.users += 1
        try:
            async with claim.lock:
                yield
        finally:
            claim.users -= 1
            if not claim.users:
                del self._claims[path]

    def patch_add(self, folder: str, obj: Obj) -> None:
        """Put ``obj`` into the cached listing of ``folder``, replacing its namesake."""
        folder = clean_path(folder)
        self._drop_links(_child(folder, obj.name), below=obj.is_dir)
        cached = self._cache.get(self._scope, folder)
        self._tell(folder, False)
        if cached is None:
            return
        objs = [o for o in cached if o.name != obj.name]
        objs.append(obj)
        self._cache.put(self._scope, folder, self._sorted(objs), self._ttl)

    def patch_remove(self, folder: str, name: str) -> None:
        folder = clean_path(folder)
        self._drop_links(_child(folder, name), below=True)
        self._tell(folder, False)
        cached = self._cache.get(self._scope, folder)
        if cached is None:
            return
        self._cache.put(self._scope, folder, [o for o in cached if o.name != name], self._ttl)


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key for "human" order, as AList sorts names: ``file2`` before ``file10``.

    Text and digit runs alternate (text first), so tuples compare like with like;
    equal numbers with more leading zeros sort after.
    """
    parts = _DIGITS.split(name)
    return tuple(
        part if index % 2 == 0 else (int(part), len(part)) for index, part in enumerate(parts)
    )


_SORT_KEYS: dict[str, Callable[[Obj], Any]] = {
    "name": lambda o: natural_key(o.name),
    "size": lambda o: o.size,
    "modified": lambda o: o.modified,
}


def _same_objects(new: builtins.list[Obj], old: builtins.list[Obj]) -> bool:
    """Whether two listings hold the very same objects in the same order (drivers
    that reuse unchanged objects across scans, as Local does, make this common; Local
    hands out the very list of its last scan when nothing changed)."""
    return new is old or (len(new) == len(old) and all(map(operator.is_, new, old)))


def _joined(names: builtins.list[str]) -> str:
    return "/" + "/".join(names)


def _child(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"
