"""Objects as the API shows them (AList's ``ObjResp``), encoded straight to JSON bytes.

A listing's entries are encoded one at a time, only when a page first needs them,
and kept with the listing they came from (``vfs.memo``): the next page or the next
request of the same folder joins kept fragments instead of rendering, signing and
encoding again. Kept fragments are used only while everything that shaped them is
unchanged: the listing itself, the signing key and expiry, and the settings that
decide an entry's name and type.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import orjson

from manifold.api.fs_time import ORJSON_TIME, json_time
from manifold.container import Services
from manifold.models import THUMB_SELF, Obj
from manifold.services.fs.read import Listing, Related
from manifold.vfs.memo import DerivedMemo

# Kept fragments at once, in entries (a fragment is about 300 bytes).
_FRAGMENT_BUDGET = 400_000
# Entries encoded between two chances for other requests to run (about 10 ms).
_SLICE = 2_000
# Joined pages kept by each listing's fragments (``_Fragments.joined``).
_JOINED_KEPT = 4
_SHAPING_SETTINGS = (
    "sign_all",
    "filename_char_mapping",
    "audio_types",
    "video_types",
    "image_types",
    "text_types",
)


def file_type(services: Services, name: str, is_dir: bool) -> int:
    if is_dir:
        return 1
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return services.settings.type_of_extension(ext)


class FolderStyle:
    """How the objects of one folder are shown right now; built once per request."""

    def __init__(self, services: Services, folder: str, signed: bool) -> None:
        settings = services.settings
        self._services = services
        self._folder = folder.rstrip("/")
        signer = services.signer.batch()
        self._thumb_sign = signer
        self._sign = signer if services.signer.needed(signed) else None
        self._names = settings.name_table()
        self._mapped = _any_of(self._names)
        self._site = services.config.site_url.rstrip("/")
        # A sign of a fixed path changes exactly when the signing key or expiry does.
        self.key = (signer("/"), bool(self._sign), *(settings.get(k) for k in _SHAPING_SETTINGS))

    def entry(self, obj: Obj, type_code: int | None = None) -> dict[str, Any]:
        """``obj`` as a dict for ``orjson.dumps(..., option=ORJSON_TIME)``."""
        name = obj.name
        is_dir = obj.is_dir
        sign = self._sign(f"{self._folder}/{name}") if self._sign and not is_dir else ""
        modified = json_time(obj.modified)
        hash_info = obj.hash_info
        return {
            "id": obj.id,
            "path": "",
            "name": name.translate(self._names) if self._mapped(name) else name,
            "size": obj.size,
            "is_dir": is_dir,
            "modified": modified,
            "created": modified if obj.created is None else json_time(obj.created),
            "sign": sign,
            "thumb": self._thumb(name, obj.thumb) if obj.thumb else "",
            "type": file_type(self._services, name, is_dir) if type_code is None else type_code,
            "hashinfo": "null" if hash_info is None else orjson.dumps(hash_info).decode(),
            "hash_info": hash_info,
        }

    def _thumb(self, name: str, thumb: str) -> str:
        """A thumbnail this server makes (``THUMB_SELF``) is a ``/d`` URL with the site
        prefix and a sign, whatever ``sign_all`` says, as AList's Local gives; any
        other (a back end's own URL) is shown as it is."""
        if thumb != THUMB_SELF:
            return thumb
        path = f"{self._folder}/{name}"
        url = f"{self._site}/d{quote(self._folder + '/')}{quote(name, safe='')}"
        return f"{url}?type=thumb&sign={self._thumb_sign(path)}"

    def encode(self, obj: Obj) -> bytes:
        # Kept as a copy: orjson's own result sits in a buffer sized for a larger
        # document, and holding 100,000 of those costs three times the encoding.
        return bytes(memoryview(orjson.dumps(self.entry(obj), option=ORJSON_TIME)))


class _Fragments:
    """The encoded entries of one visible listing; ``b""`` marks one not encoded yet.

    A listing that replaces an older one of the same folder (a rescan) takes over the
    fragments of the entries that did not change: an entry that is the very object
    the older listing held at the same place (drivers reuse unchanged objects) at
    once, any other found by name and compared whole.
    """

    __slots__ = ("_by_name", "_joined", "complete", "entries", "key", "old", "parts")

    def __init__(
        self, key: tuple[object, ...], entries: list[Obj], older: _Fragments | None
    ) -> None:
        self.key = key
        self.entries = entries
        self.parts = [b""] * len(entries)
        self.complete = False
        # The older listing's entries and fragments (not the older object itself,
        # which may hold its own predecessor: no chains of generations).
        same = older is not None and older.key == key
        self.old: tuple[list[Obj], list[bytes]] | None = (
            (older.entries, older.parts) if older is not None and same else None
        )
        self._by_name: dict[str, tuple[Obj, bytes]] | None = None
        self._joined: dict[tuple[int, int], bytes] = {}

    def joined(self, start: int, stop: int) -> bytes:
        """The encoded entries ``start`` to ``stop``, comma-separated, kept for the
        pages asked for last: the same page of an unchanged folder asked again (a
        client polling, a rescan that found nothing new) is one piece already joined,
        not ten thousand fragments scattered in memory gathered again."""
        found = self._joined.get((start, stop))
        if found is None:
            found = b",".join(self.parts[start:stop])
            if len(self._joined) >= _JOINED_KEPT:
                self._joined.pop(next(iter(self._joined)))
            self._joined[(start, stop)] = found
        return found

    def fill(self, start: int, stop: int, encode: Callable[[Obj], bytes]) -> None:
        if self.complete:
            return
        parts, entries, old = self.parts, self.entries, self.old
        old_entries, old_parts = old if old is not None else ([], [])
        kept = len(old_entries)
        for index in range(start, stop):
            if parts[index]:
                continue
            obj = entries[index]
            part = b""
            if index < kept and old_entries[index] is obj:
                part = old_parts[index]
            elif old is not None:
                before = self._old_by_name(old).get(obj.name)
                if before is not None and (before[0] is obj or before[0] == obj):
                    part = before[1]
            parts[index] = part or encode(obj)

    def done(self) -> None:
        """Every entry is encoded: the older listing is no longer needed."""
        self.complete = True
        self.old = self._by_name = None

    def _old_by_name(self, old: tuple[list[Obj], list[bytes]]) -> dict[str, tuple[Obj, bytes]]:
        if self._by_name is None:
            pairs = zip(*old, strict=True)
            self._by_name = {obj.name: (obj, part) for obj, part in pairs if part}
        return self._by_name


class ListingRenderer:
    """Renders ``/api/fs/list`` answers, keeping encoded entries between requests."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._kept: DerivedMemo[_Fragments] = DerivedMemo(_FRAGMENT_BUDGET)

    async def content(self, listing: Listing) -> list[bytes]:
        """The page's entries as a JSON array: ``null`` for an empty folder (AList's
        answer), ``[]`` for a page past the end (which the web page iterates)."""
        if listing.start >= listing.stop:
            return [b"[]" if listing.total else b"null"]
        style = FolderStyle(self._services, listing.path, listing.signed)
        entries = listing.entries
        kept = self._kept.get(listing.view, entries)
        if kept is None or kept.key != style.key:
            fresh = _Fragments(style.key, entries, self._kept.peek(listing.view))
            # An entry counts twice: its fragment, and its copy in a joined page.
            kept = self._kept.put(listing.view, entries, fresh, 2 * len(entries))
        await _fill(kept, listing.start, listing.stop, style.encode)
        return [b"[", kept.joined(listing.start, listing.stop), b"]"]

    async def body(self, listing: Listing) -> list[bytes]:
        """The whole ``data`` object of the answer, in pieces to concatenate."""
        rest = {
            "total": listing.total,
            "readme": listing.readme,
            "header": listing.header,
            "write": listing.write,
            "provider": listing.provider,
        }
        if listing.direct_upload_tools:  # OpenList leaves the key out when empty
            rest["direct_upload_tools"] = listing.direct_upload_tools
        return [b'{"content":', *await self.content(listing), b",", orjson.dumps(rest)[1:]]


async def _fill(kept: _Fragments, start: int, stop: int, encode: Callable[[Obj], bytes]) -> None:
    """Encode the page's missing entries a slice at a time, letting other requests run
    between slices: a whole listing of 200,000 entries is a second of encoding."""
    for at in range(start, stop, _SLICE):
        if at > start:
            await asyncio.sleep(0)
        kept.fill(at, min(at + _SLICE, stop), encode)
    if start == 0 and stop == len(kept.parts):
        kept.done()


def related_entries(services: Services, related: Related | None) -> list[dict[str, Any]] | None:
    """``related`` of ``/api/fs/get``: list entries signed as their folder's, or None."""
    if related is None:
        return None
    style = FolderStyle(services, related.folder, related.signed)
    return [style.entry(obj) for obj in related.objs]


def _any_of(table: dict[int, str]) -> Callable[[str], bool]:
    """Whether a name holds a character ``table`` maps (cheaper than translating)."""
    if not table:
        return lambda _name: False
    pattern = re.compile("[" + re.escape("".join(map(chr, table))) + "]")
    return lambda name: pattern.search(name) is not None
