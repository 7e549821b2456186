"""PROPFIND answers (RFC 4918 ``multistatus``) read into entries, fed as they arrive.

Servers differ in what they send: hrefs absolute (``http://host/dav/a%20b``) or
relative to the request, percent-encoded in any case or not at all, collections with
or without a trailing slash, properties missing or listed under a 404 ``propstat``.
An entry keeps only what is certain: the href's decoded path, the kind, and the
properties a 2xx ``propstat`` carried.

The answer is untrusted: a document type declaration (the only way to define
entities, hence to blow a small answer up) is refused before its first entity, no
external entity is ever fetched (expat does not), and an answer or a single text
larger than its cap is refused.

A big folder's answer is read a piece at a time: ``MultistatusReader.take`` hands
over the entries read so far and forgets them, and ``Children`` turns each batch into
the folder's children, so a listing never holds the whole document or all its entries
at once (the driver runs both in a worker thread, off the event loop).
"""

from __future__ import annotations

import email.utils
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import unquote, urljoin, urlsplit

from manifold.errors import NotSupported, ServerError
from manifold.models import DiskUsage

# The properties a listing asks for; nothing else is kept.
PROPS = ("resourcetype", "getcontentlength", "getlastmodified", "creationdate", "getetag")
PROPFIND_BODY = (
    '<?xml version="1.0" encoding="utf-8"?>\n<D:propfind xmlns:D="DAV:"><D:prop>'
    + "".join(f"<D:{name}/>" for name in PROPS)
    + "</D:prop></D:propfind>"
).encode()

# RFC 4331's space of a folder, asked of the storage's root alone (``quota_usage``).
QUOTAS = ("quota-available-bytes", "quota-used-bytes")
QUOTA_BODY = (
    '<?xml version="1.0" encoding="utf-8"?>\n<D:propfind xmlns:D="DAV:"><D:prop>'
    + "".join(f"<D:{name}/>" for name in QUOTAS)
    + "</D:prop></D:propfind>"
).encode()

# Far above a folder of a million entries' answer; a server sending more is broken.
MAX_ANSWER_BYTES = 1 << 30
MAX_TEXT_CHARS = 1 << 16
_DAV = "{DAV:}"
_KEPT = frozenset({*PROPS, *QUOTAS})
_TEXTS = frozenset({"href", "status", *_KEPT})


class BadAnswer(ServerError):
    """The server's PROPFIND answer could not be read."""


@dataclass(slots=True)
class Entry:
    """One ``response`` of a multistatus answer."""

    href: str = ""
    # The ``response``'s own status (a missing member answered inside the 207).
    status: str = ""
    collection: bool = False
    props: dict[str, str] = field(default_factory=dict)

    def path(self, base_url: str) -> str:
        """The href resolved against the request's URL, decoded, without a trailing slash."""
        resolved = urlsplit(urljoin(base_url, self.href)).path
        return unquote(resolved).rstrip("/") or "/"

    @property
    def is_dir(self) -> bool:
        # A server that omits ``resourcetype`` still marks collections by the slash.
        return self.collection or ("resourcetype" not in self.props and self.href.endswith("/"))

    @property
    def found(self) -> bool:
        return _ok(self.status)

    @property
    def size(self) -> int:
        try:
            return max(0, int(self.props.get("getcontentlength", "")))
        except ValueError:
            return 0

    @property
    def modified(self) -> datetime | None:
        return http_date(self.props.get("getlastmodified", ""))

    @property
    def created(self) -> datetime | None:
        return iso_date(self.props.get("creationdate", ""))

    @property
    def etag(self) -> str:
        return self.props.get("getetag", "")


def http_date(text: str) -> datetime | None:
    """An RFC 1123 date (``getlastmodified``); None when missing or unreadable."""
    if not text:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def iso_date(text: str) -> datetime | None:
    """An RFC 3339 date (``creationdate``); None when missing or unreadable."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return http_date(text)  # some servers send the RFC 1123 form here too
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _ok(status: str) -> bool:
    """Whether a ``HTTP/1.1 200 OK`` status line says 2xx (a missing one counts as such)."""
    parts = status.split()
    return len(parts) < 2 or parts[1].startswith("2")


def _local(tag: str) -> str | None:
    """A DAV element's local name (also without a namespace, as broken servers send)."""
    if tag.startswith(_DAV):
        return tag[len(_DAV) :]
    return None if tag.startswith("{") else tag


class _Refused(Exception):
    pass


class _Target:
    """An ``XMLParser`` target building entries from the start/end events."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._stack: list[str | None] = []
        self._text: list[str] = []
        self._size = 0
        self._entry: Entry | None = None
        self._props: dict[str, str] = {}
        self._collection = False
        self._status = ""

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        name = _local(tag)
        parent = self._stack[-1] if self._stack else None
        self._stack.append(name)
        self._text, self._size = [], 0
        if name == "response":
            self._entry = Entry()
        elif name == "propstat":
            self._props, self._collection, self._status = {}, False, ""
        elif name == "collection" and parent == "resourcetype":
            self._collection = True

    def data(self, text: str) -> None:
        self._size += len(text)
        if self._size > MAX_TEXT_CHARS:
            raise _Refused("a text in the answer is too long")
        self._text.append(text)

    def end(self, tag: str) -> None:
        name = self._stack.pop()
        parent = self._stack[-1] if self._stack else None
        entry = self._entry
        if entry is None or name not in _TEXTS | {"propstat", "response"}:
            return
        text = "".join(self._text).strip()
        if name == "href" and parent == "response":
            entry.href = text
        elif name == "status" and parent == "response":
            entry.status = text
        elif name == "status" and parent == "propstat":
            self._status = text
        elif name in _KEPT and parent == "prop":
            self._props[name] = text
        elif name == "propstat" and _ok(self._status):
            entry.props.update(self._props)
            entry.collection = entry.collection or self._collection
        elif name == "response":
            self.entries.append(entry)
            self._entry = None

    def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
        # Called at the declaration's start, before any entity in it is read.
        raise _Refused("the answer declares a document type")

    def close(self) -> list[Entry]:
        return self.entries


class MultistatusReader:
    """Feeds a multistatus answer chunk by chunk; ``close`` returns its entries."""

    def __init__(self, limit: int = MAX_ANSWER_BYTES) -> None:
        self._target = _Target()
        # The target refuses a DTD before its first entity (see the module's docstring).
        self._parser = ET.XMLParser(target=self._target)  # noqa: S314
        self._left = limit

    def feed(self, data: bytes) -> None:
        self._left -= len(data)
        if self._left < 0:
            raise BadAnswer("the WebDAV server's answer is too large")
        try:
            self._parser.feed(data)
        except (_Refused, ET.ParseError) as exc:
            raise BadAnswer(f"unreadable answer from the WebDAV server: {exc}") from exc

    def take(self, data: bytes = b"") -> list[Entry]:
        """Feed ``data``, then hand over the entries read so far, forgetting them."""
        if data:
            self.feed(data)
        entries, self._target.entries = self._target.entries, []
        return entries

    def close(self) -> list[Entry]:
        """The entries not yet taken, once the answer is whole."""
        try:
            self._parser.close()
        except (_Refused, ET.ParseError) as exc:
            raise BadAnswer(f"unreadable answer from the WebDAV server: {exc}") from exc
        return self.take()


class Children:
    """A depth-1 answer to a PROPFIND of ``url`` read in batches of entries: ``own`` is
    the folder's own entry once seen (None while the server has not sent it), and
    ``take`` gives each child's decoded name with its entry, once each over all batches.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self._want = unquote(urlsplit(url).path).rstrip("/") or "/"
        self._seen: set[str] = set()
        self.own: Entry | None = None

    def take(self, entries: list[Entry]) -> list[tuple[str, Entry]]:
        found: list[tuple[str, Entry]] = []
        for entry in entries:
            if not entry.found:
                continue
            path = entry.path(self._url)
            if self.own is None and _is_self(path, self._want):
                self.own = entry
                continue
            name = _child_name(path, self._want)
            if name and name not in self._seen:
                self._seen.add(name)
                found.append((name, entry))
        return found


def listing(url: str, entries: list[Entry]) -> tuple[Entry | None, list[tuple[str, Entry]]]:
    """A whole depth-1 answer to a PROPFIND of ``url``: the folder's own entry (None if
    the server left it out), and each child's decoded name with its entry, once each."""
    children = Children(url)
    found = children.take(entries)
    return children.own, found


def _is_self(path: str, want: str) -> bool:
    """Whether a listed path is the listed folder itself; a server behind a proxy may
    answer without the part of the path the proxy added."""
    # Both start with a slash, so a suffix match ends on a segment boundary.
    return path == "/" or want.endswith(path)


def _child_name(path: str, want: str) -> str | None:
    """The listed path's name in the folder ``want``; None for a deeper one."""
    prefix = want.rstrip("/") + "/"
    if path.startswith(prefix):
        rest = path[len(prefix) :]
        return None if "/" in rest else rest
    return path.rsplit("/", 1)[-1]


def parse(data: bytes) -> list[Entry]:
    """The entries of a whole answer at once."""
    reader = MultistatusReader()
    reader.feed(data)
    return reader.close()


def quota_usage(entries: list[Entry]) -> DiskUsage:
    """The space RFC 4331's properties tell (the bytes used and still available, so
    their sum for the size); ``NotSupported`` where the server gives neither."""
    for entry in entries:
        free = entry.props.get("quota-available-bytes", "").strip()
        used = entry.props.get("quota-used-bytes", "").strip()
        if free.isdigit() and used.isdigit():
            return DiskUsage(int(used) + int(free), int(used), int(free))
    raise NotSupported("the WebDAV server tells no quota (RFC 4331)")
