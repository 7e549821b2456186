"""Keys of a bucket in S3's order, found by walking the tree only as far as a page needs.

S3 lists keys sorted by their UTF-8 bytes (code point order, as Python compares
strings). A folder ``d`` holds keys that all start with ``d/``, so sorting a folder's
entries by name, with ``/`` after each folder's, and descending into folders in that
order gives every key in S3's order. A prefix names the one folder to start in; a
folder whose keys all sort before the marker is never listed; the walk stops when the
page is full. With the delimiter ``/`` folders are common prefixes and none is entered.
A folder behind a password, or one a link takes out of the bucket, is refused when a
prefix names it, and left out of a walk that only passes through it (S3 cannot give a
password), so one such folder does not cost the whole listing. No key starts with
``/`` or holds an empty segment: a prefix that does names none.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from manifold.errors import Forbidden, NotAFolder, ObjectNotFound, StorageNotFound
from manifold.models import Obj
from manifold.protocols.s3.buckets import Bucket

ListFolder = Callable[[str], Awaitable[builtins.list[Obj]]]
MAX_KEYS = 1000


@dataclass(frozen=True, slots=True)
class Entry:
    """A key with its object, or a common prefix (``obj`` None)."""

    key: str
    obj: Obj | None


@dataclass(slots=True)
class Page:
    entries: list[Entry]
    truncated: bool

    @property
    def last(self) -> str:
        return self.entries[-1].key if self.entries else ""


async def page(
    bucket: Bucket,
    list_folder: ListFolder,
    prefix: str,
    delimiter: str,
    after: str,
    max_keys: int,
) -> Page:
    """Up to ``max_keys`` entries after the key ``after``, and whether more follow."""
    if not max_keys or not _may_match(prefix):
        return Page([], False)
    entries: list[Entry] = []
    walk = _grouped(bucket, list_folder, prefix, delimiter, after)
    try:
        async for entry in walk:
            if len(entries) == max_keys:
                return Page(entries, True)
            entries.append(entry)
    finally:
        await walk.aclose()
    return Page(entries, False)


async def _grouped(
    bucket: Bucket, list_folder: ListFolder, prefix: str, delimiter: str, after: str
) -> AsyncGenerator[Entry]:
    """The walk, keys that hold a delimiter other than ``/`` folded into prefixes."""
    shallow = delimiter == "/"
    last_group = ""
    async for entry in _walk(bucket, list_folder, prefix, after, shallow):
        if not delimiter or shallow:
            yield entry
            continue
        rest = entry.key[len(prefix) :]
        cut = rest.find(delimiter)
        if cut < 0:
            yield entry
            continue
        group = prefix + rest[: cut + len(delimiter)]
        if group != last_group and group > after:
            last_group = group
            yield Entry(group, None)


async def _walk(
    bucket: Bucket, list_folder: ListFolder, prefix: str, after: str, shallow: bool
) -> AsyncIterator[Entry]:
    folder_key, _, start = prefix.rpartition("/")
    folder_key = f"{folder_key}/" if folder_key else ""
    async for entry in _folder(bucket, list_folder, folder_key, start, after, shallow):
        yield entry


async def _folder(
    bucket: Bucket,
    list_folder: ListFolder,
    folder_key: str,
    start: str,
    after: str,
    shallow: bool,
    folder: Obj | None = None,
) -> AsyncIterator[Entry]:
    objs = await _entries(list_folder, bucket.path_of(folder_key), entered=folder is not None)
    if objs is None:
        return
    if not objs and folder is not None and folder_key > after:
        yield Entry(folder_key, folder)  # an empty folder: the zero-byte key "name/"
        return
    for obj in sorted(objs, key=_order):
        if not obj.name.startswith(start):
            continue
        key = folder_key + obj.name
        if not obj.is_dir:
            if key > after:
                yield Entry(key, obj)
            continue
        key += "/"
        if shallow:
            if key > after:
                yield Entry(key, None)
        elif key > after or after.startswith(key):
            async for entry in _folder(bucket, list_folder, key, "", after, shallow, obj):
                yield entry


def _may_match(prefix: str) -> bool:
    """Whether any key can start with ``prefix``: keys are paths below the bucket, with
    no empty, ``.`` or ``..`` segment, and the last segment of a prefix is open."""
    folders = prefix.split("/")[:-1]
    return all(part not in ("", ".", "..") for part in folders)


def _order(obj: Obj) -> str:
    return f"{obj.name}/" if obj.is_dir else obj.name


async def _entries(list_folder: ListFolder, path: str, entered: bool) -> builtins.list[Obj] | None:
    """A folder's entries; None for one that is not there, or (``entered`` on the way
    down a walk) one refused: behind a password, or taken out of the bucket by a link."""
    try:
        return await list_folder(path)
    except (ObjectNotFound, NotAFolder, StorageNotFound):
        return None
    except Forbidden:
        if entered:
            return None
        raise
