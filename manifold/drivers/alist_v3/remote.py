"""What the remote's JSON API says, read into Manifold's terms: objects from its
entries, errors from its envelope codes and messages, link lifetimes from its signs.

Pure functions of the remote's answers; the driver does the asking.
"""

from __future__ import annotations

import posixpath
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from manifold.drivers.base import RESERVED_PREFIX, ArchiveEntry
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
    WrongArchivePassword,
)
from manifold.models import DiskUsage, Obj

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# AList's user roles (``model.GUEST``): a guest session needs the remote's consent.
ROLE_GUEST = 1
# Task states after which a task changes no more: succeeded, canceled, failed.
TASK_SUCCEEDED = 2
TASK_DONE = frozenset({2, 4, 7})

# AList's and Manifold's texts for a taken name: ``file exists``, ``file [a.txt]
# exists`` (a write without overwrite) and ``object already exists`` (the driver's).
_EXISTS = re.compile(r"(file (\[.*\] )?exists|already exists)$", re.IGNORECASE)
# A copy task's name ends with where it copies to: `` to [<mount path>](<folder>)``.
_COPY_TARGET = re.compile(r" to \[(.*)\]\((.*)\)$")
# HTTP statuses worth trying again: the remote or a proxy before it is busy or down.
_TEMPORARY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class Envelope:
    """One ``{code, message, data}`` answer."""

    __slots__ = ("code", "data", "message")

    def __init__(self, code: int, message: str, data: Any) -> None:
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def parse(cls, body: bytes) -> Envelope:
        """The envelope in ``body``; ``ServerError`` for anything else (a web page, a
        proxy's error): the URL is not an AList's."""
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError:
            decoded = None
        if not isinstance(decoded, dict) or not isinstance(decoded.get("code"), int):
            raise ServerError("request failed: the answer is not an AList API envelope")
        return cls(decoded["code"], str(decoded.get("message") or ""), decoded.get("data"))

    @property
    def ok(self) -> bool:
        return self.code == 200

    def error(self) -> ManifoldError:
        return envelope_error(self.code, self.message)


def envelope_error(code: int, message: str) -> ManifoldError:
    """The ``manifold.errors`` class for a remote error, worded as AList words it
    (``request failed,code: <code>, message: <msg>``): the remote's sentinel text
    (``object not found``) stays at the end, where clients look for it."""
    text = f"request failed,code: {code}, message: {message}"
    lower = message.lower()
    if code == 202:  # AList's one use of it: the archive's password is wrong or missing
        return WrongArchivePassword(text)
    if lower.endswith("object not found") or "storage not found" in lower:
        return ObjectNotFound(text)
    if lower.endswith("not a folder"):
        return NotAFolder(text)
    if lower.endswith("not a file"):
        return NotAFile(text)
    if _EXISTS.search(message):
        return ObjectExists(text)
    if code in (401, 403):
        return PermissionDenied(text)
    if code == 400:
        return InvalidRequest(text)
    if code == 429 or "storage not init" in lower:
        return TemporaryFailure(text)
    if lower.endswith(("not support", "not implement", "upload not supported")):
        return NotSupported(text)
    return ServerError(text)


def status_error(status: int, reason: str) -> ManifoldError:
    """An HTTP error status (the remote, or a proxy before it, failed outright)."""
    text = f"request failed, status: {status} {reason}".rstrip()
    return TemporaryFailure(text) if status in _TEMPORARY_STATUS else ServerError(text)


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time of the remote (Go's, with nanoseconds) as an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def entry_obj(entry: dict[str, Any], path: str) -> Obj:
    """A remote listing entry (or ``fs/get`` answer) as the object at remote ``path``."""
    is_dir = bool(entry.get("is_dir"))
    return Obj(
        name=str(entry.get("name") or ""),
        size=0 if is_dir else int(entry.get("size") or 0),
        is_dir=is_dir,
        modified=parse_time(entry.get("modified")) or EPOCH,
        created=parse_time(entry.get("created")),
        path=path,
        thumb=str(entry.get("thumb") or ""),
        hash_info=_hashes(entry),
    )


def list_objs(folder: str, content: Any, seen: set[str]) -> list[Obj]:
    """The objects of one page of the remote's ``fs/list`` in ``folder``, leaving out
    temporaries (``RESERVED_PREFIX``) and names already in ``seen`` (a folder that
    changed between two pages shifts entries across them); every name read is added
    to ``seen``."""
    found: list[Obj] = []
    for entry in content if isinstance(content, list) else []:
        name = str(entry.get("name", "")) if isinstance(entry, dict) else ""
        if not name or name in seen:
            continue
        seen.add(name)
        if not name.casefold().startswith(RESERVED_PREFIX):
            found.append(entry_obj(entry, child_path(folder, name)))
    return found


def archive_entry(entry: dict[str, Any]) -> ArchiveEntry:
    """A member of an archive as the remote's archive meta or list shows it."""
    is_dir = bool(entry.get("is_dir"))
    children = entry.get("children")
    return ArchiveEntry(
        name=str(entry.get("name") or ""),
        is_dir=is_dir,
        size=0 if is_dir else int(entry.get("size") or 0),
        modified=parse_time(entry.get("modified")) or EPOCH,
        children=archive_entries(children) if isinstance(children, list) else None,
    )


def archive_entries(content: Any) -> tuple[ArchiveEntry, ...]:
    """The members in an answer's ``content`` (none when it holds no list)."""
    if not isinstance(content, list):
        return ()
    return tuple(archive_entry(e) for e in content if isinstance(e, dict))


def _hashes(entry: dict[str, Any]) -> dict[str, str]:
    """The remote's hashes; an empty map when it has none (AList's ``hashinfo`` "{}")."""
    found = entry.get("hash_info")
    if not isinstance(found, dict):
        try:
            found = orjson.loads(entry.get("hashinfo") or "null")
        except (orjson.JSONDecodeError, TypeError):
            found = None
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v) for k, v in found.items() if v}


def sign_expiry(url: str, now: float) -> float | None:
    """Seconds ``url`` stays valid when it carries an AList sign (``<mac>:<unix
    expiry>``); None when it never expires (expiry 0) or carries none."""
    signs = parse_qs(urlsplit(url).query).get("sign")
    if not signs:
        return None
    expire = signs[0].rpartition(":")[2]
    if not expire.isdigit() or int(expire) == 0:
        return None
    return max(0.0, int(expire) - now)


def child_path(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"


def parent_path(path: str) -> str:
    return path.rstrip("/").rpartition("/")[0] or "/"


def is_inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both clean remote paths)."""
    folder = folder.rstrip("/")
    return path == folder or path.startswith(folder + "/") or folder == ""


def joined(*parts: str) -> str:
    """The clean absolute path of ``parts`` joined."""
    return posixpath.normpath("/" + "/".join(parts)).replace("//", "/")


def copies_into(task: Any, folder: str) -> bool:
    """Whether the remote copy task ``task`` copies into ``folder`` or below it (a full
    path on the remote), by the task's name."""
    name = task.get("name") if isinstance(task, dict) else None
    found = _COPY_TARGET.search(name) if isinstance(name, str) else None
    return found is not None and is_inside(joined(found[1], found[2]), folder)


def mount_usage(entry: Any) -> DiskUsage:
    """A remote object's ``mount_details`` (OpenList's total, used and free space)."""
    found = entry.get("mount_details") if isinstance(entry, dict) else None
    given = [found.get(k) for k in _SPACE] if isinstance(found, dict) else []
    figures = [n for n in given if isinstance(n, int) and n >= 0]
    if len(figures) != len(_SPACE):
        raise NotSupported("the remote tells no space for this folder")
    return DiskUsage(*figures)


# The figures of a ``mount_details``, in ``DiskUsage``'s order.
_SPACE = ("total_space", "used_space", "free_space")
