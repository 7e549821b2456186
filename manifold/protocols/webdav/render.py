"""Multistatus answers, rendered by joining pre-escaped pieces.

A listing of tens of thousands of entries is rendered by string formatting alone
(no element tree per entry): each entry's live properties come from a template
for files and one for folders, dead properties are appended as stored (they are
XML already), and the pieces are joined once.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from xml.sax.saxutils import escape

from manifold.models import Obj
from manifold.services.fs.ops import etag

HEAD = b'<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">'
TAIL = b"</D:multistatus>"
OK = "HTTP/1.1 200 OK"
DAV = "{DAV:}"
SUPPORTED_LOCK = (
    "<D:supportedlock>"
    "<D:lockentry><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>"
    "<D:lockentry><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>"
    "</D:supportedlock>"
)
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_TYPES: dict[str, str] = {}
_STATUS_TEXT = {
    200: "OK", 201: "Created", 204: "No Content", 401: "Unauthorized", 403: "Forbidden",
    404: "Not Found", 409: "Conflict", 412: "Precondition Failed", 423: "Locked",
    424: "Failed Dependency", 500: "Internal Server Error", 507: "Insufficient Storage",
}  # fmt: skip


def status_line(code: int) -> str:
    return f"HTTP/1.1 {code} {_STATUS_TEXT.get(code, 'Error')}"


def http_date(when: datetime) -> str:
    if when.tzinfo is not UTC:
        when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return (
        f"{_DAYS[when.weekday()]}, {when.day:02d} {_MONTHS[when.month - 1]} {when.year:04d} "
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} GMT"
    )


def iso_date(when: datetime) -> str:
    if when.tzinfo is not UTC:
        when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return (
        f"{when.year:04d}-{when.month:02d}-{when.day:02d}T"
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d}Z"
    )


def content_type(name: str) -> str:
    dot = name.rfind(".")
    ext = name[dot:].lower() if dot > 0 else ""
    found = _TYPES.get(ext)
    if found is None:
        found = (mimetypes.guess_type("x" + ext)[0] if ext else None) or "application/octet-stream"
        _TYPES[ext] = found
    return found


def text(value: str) -> str:
    if "&" in value or "<" in value or ">" in value:
        return escape(value)
    return value


# --- live properties ------------------------------------------------------------

LIVE_FILE = (
    "resourcetype", "displayname", "getcontentlength", "getlastmodified", "creationdate",
    "getcontenttype", "getetag", "supportedlock",
)  # fmt: skip
LIVE_DIR = ("resourcetype", "displayname", "getlastmodified", "creationdate", "supportedlock")


def live_value(obj: Obj, name: str) -> str | None:
    """The XML of one live property of ``obj`` (``DAV:`` local ``name``), or None."""
    maker = _LIVE.get(name)
    return maker(obj) if maker is not None else None


def _resourcetype(obj: Obj) -> str | None:
    if obj.is_dir:
        return "<D:resourcetype><D:collection/></D:resourcetype>"
    return "<D:resourcetype/>"


def _file_only(make: Callable[[Obj], str]) -> Callable[[Obj], str | None]:
    return lambda obj: None if obj.is_dir else make(obj)


_LIVE: dict[str, Callable[[Obj], str | None]] = {
    "resourcetype": _resourcetype,
    "displayname": lambda o: f"<D:displayname>{text(o.name)}</D:displayname>",
    "getcontentlength": _file_only(lambda o: f"<D:getcontentlength>{o.size}</D:getcontentlength>"),
    "getlastmodified": lambda o: f"<D:getlastmodified>{http_date(o.modified)}</D:getlastmodified>",
    "creationdate": lambda o: (
        f"<D:creationdate>{iso_date(o.created or o.modified)}</D:creationdate>"
    ),
    "getcontenttype": _file_only(
        lambda o: f"<D:getcontenttype>{content_type(o.name)}</D:getcontenttype>"
    ),
    "getetag": _file_only(lambda o: f"<D:getetag>{etag(o)}</D:getetag>"),
    "supportedlock": lambda _: SUPPORTED_LOCK,
}
PROTECTED = frozenset(DAV + name for name in (*_LIVE, "lockdiscovery"))


def prop_element(name: str, value: str) -> str:
    """A property element named ``{namespace}local`` holding ``value`` (XML)."""
    namespace, local = split_name(name)
    if namespace == "DAV:":
        return f"<D:{local}>{value}</D:{local}>" if value else f"<D:{local}/>"
    return f'<{local} xmlns="{escape(namespace, {chr(34): "&quot;"})}">{value}</{local}>'


def empty_element(name: str) -> str:
    namespace, local = split_name(name)
    if namespace == "DAV:":
        return f"<D:{local}/>"
    return f'<{local} xmlns="{escape(namespace, {chr(34): "&quot;"})}"/>'


def split_name(name: str) -> tuple[str, str]:
    if name.startswith("{"):
        end = name.index("}")
        return name[1:end], name[end + 1 :]
    return "", name


# --- responses --------------------------------------------------------------------


def allprop(href: str, obj: Obj, dead: Mapping[str, str]) -> str:
    if obj.is_dir:
        live = (
            f"<D:resourcetype><D:collection/></D:resourcetype>"
            f"<D:displayname>{text(obj.name)}</D:displayname>"
            f"<D:getlastmodified>{http_date(obj.modified)}</D:getlastmodified>"
        )
    else:
        live = (
            f"<D:resourcetype/><D:displayname>{text(obj.name)}</D:displayname>"
            f"<D:getcontentlength>{obj.size}</D:getcontentlength>"
            f"<D:getlastmodified>{http_date(obj.modified)}</D:getlastmodified>"
            f"<D:getcontenttype>{content_type(obj.name)}</D:getcontenttype>"
            f"<D:getetag>{etag(obj)}</D:getetag>"
        )
    extra = "".join(prop_element(n, v) for n, v in dead.items()) if dead else ""
    return (
        f"<D:response><D:href>{href}</D:href><D:propstat><D:prop>{live}"
        f"<D:creationdate>{iso_date(obj.created or obj.modified)}</D:creationdate>"
        f"{SUPPORTED_LOCK}{extra}</D:prop><D:status>{OK}</D:status></D:propstat></D:response>"
    )


def propname(href: str, obj: Obj, dead: Mapping[str, str]) -> str:
    names = "".join(f"<D:{n}/>" for n in (LIVE_DIR if obj.is_dir else LIVE_FILE))
    names += "<D:lockdiscovery/>" + "".join(empty_element(n) for n in dead)
    return (
        f"<D:response><D:href>{href}</D:href><D:propstat><D:prop>{names}</D:prop>"
        f"<D:status>{OK}</D:status></D:propstat></D:response>"
    )


def named(
    href: str,
    obj: Obj,
    names: Iterable[str],
    dead: Mapping[str, str],
    lockdiscovery: str | None = None,
) -> str:
    found: list[str] = []
    missing: list[str] = []
    for name in names:
        value: str | None = None
        if name.startswith(DAV):
            local = name[len(DAV) :]
            if local == "lockdiscovery" and lockdiscovery is not None:
                value = lockdiscovery
            else:
                value = live_value(obj, local)
        if value is None and name in dead:
            value = prop_element(name, dead[name])
        if value is None:
            missing.append(empty_element(name))
        else:
            found.append(value)
    parts = [f"<D:response><D:href>{href}</D:href>"]
    if found:
        parts.append(
            f"<D:propstat><D:prop>{''.join(found)}</D:prop><D:status>{OK}</D:status></D:propstat>"
        )
    if missing:
        parts.append(
            f"<D:propstat><D:prop>{''.join(missing)}</D:prop>"
            f"<D:status>{status_line(404)}</D:status></D:propstat>"
        )
    parts.append("</D:response>")
    return "".join(parts)


def status_response(href: str, code: int) -> str:
    return (
        f"<D:response><D:href>{href}</D:href><D:status>{status_line(code)}</D:status></D:response>"
    )


def propstat_response(href: str, results: list[tuple[str, int]]) -> str:
    """One response of per-property statuses (a PROPPATCH answer)."""
    by_code: dict[int, list[str]] = {}
    for name, code in results:
        by_code.setdefault(code, []).append(empty_element(name))
    stats = "".join(
        f"<D:propstat><D:prop>{''.join(items)}</D:prop><D:status>{status_line(code)}</D:status></D:propstat>"
        for code, items in by_code.items()
    )
    return f"<D:response><D:href>{href}</D:href>{stats}</D:response>"


def multistatus(parts: Iterable[str]) -> bytes:
    return HEAD + "".join(parts).encode() + TAIL


ActiveLock = tuple[str, bool, bool, str, int, str]
"""(token, exclusive, infinite, owner, timeout, root href) of a lock; the token is
empty where it is not shown."""


def lock_discovery(locks: Iterable[ActiveLock]) -> str:
    """``DAV:lockdiscovery`` of ``locks``; a lock without a token is shown without
    its ``DAV:locktoken``, which RFC 4918 makes optional (section 14.1)."""
    active = "".join(
        "<D:activelock><D:locktype><D:write/></D:locktype>"
        f"<D:lockscope>{'<D:exclusive/>' if exclusive else '<D:shared/>'}</D:lockscope>"
        f"<D:depth>{'infinity' if infinite else '0'}</D:depth>"
        + (f"<D:owner>{owner}</D:owner>" if owner else "")
        + f"<D:timeout>Second-{timeout}</D:timeout>"
        + (f"<D:locktoken><D:href>{token}</D:href></D:locktoken>" if token else "")
        + f"<D:lockroot><D:href>{root}</D:href></D:lockroot></D:activelock>"
        for token, exclusive, infinite, owner, timeout, root in locks
    )
    return f"<D:lockdiscovery>{active}</D:lockdiscovery>" if active else "<D:lockdiscovery/>"


def error_body(condition: str) -> bytes:
    head = '<?xml version="1.0" encoding="utf-8"?>\n<D:error xmlns:D="DAV:">'
    return f"{head}<D:{condition}/></D:error>".encode()
