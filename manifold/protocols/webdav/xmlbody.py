"""Reading the XML bodies of PROPFIND, PROPPATCH and LOCK requests.

Bodies are untrusted and small: one over ``MAX_BODY`` bytes is refused, and so is
any document type declaration (the only way to define entities, hence to blow a
small body up); expat never fetches external entities. A malformed body, or a
namespace prefix bound to nothing, answers 400.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from manifold.protocols.webdav.statuses import DavError

MAX_BODY = 1 << 20
DAV = "{DAV:}"
# A property's name as ElementTree spells it: "{namespace}local" ("local" in none).
PropName = str


@dataclass(slots=True)
class PropfindBody:
    """``allprop`` (the default), ``propname``, or the named properties."""

    mode: str = "allprop"
    names: tuple[PropName, ...] = ()


@dataclass(slots=True)
class PropUpdate:
    """PROPPATCH instructions in document order: (name, value XML or None to remove)."""

    changes: list[tuple[PropName, str | None]] = field(default_factory=list)


@dataclass(slots=True)
class LockInfo:
    exclusive: bool
    owner: str  # the ``owner`` element's content, as XML, sent back in lockdiscovery


def parse(body: bytes) -> ET.Element | None:
    if not body.strip():
        return None
    if len(body) > MAX_BODY:
        raise DavError(413)
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise DavError(400, message="document type declarations are not accepted")
    try:
        return ET.fromstring(body)  # noqa: S314 - no DTD reaches the parser (above)
    except ET.ParseError as exc:
        raise DavError(400, message=f"malformed XML: {exc}") from None


def propfind(body: bytes) -> PropfindBody:
    root = parse(body)
    if root is None:
        return PropfindBody()
    if root.tag != DAV + "propfind":
        raise DavError(400, message="expected DAV:propfind")
    for child in root:
        if child.tag == DAV + "propname":
            return PropfindBody("propname")
        if child.tag == DAV + "allprop":
            return PropfindBody("allprop")
        if child.tag == DAV + "prop":
            return PropfindBody("prop", tuple(prop.tag for prop in child))
    raise DavError(400, message="DAV:propfind names nothing")


def proppatch(body: bytes) -> PropUpdate:
    root = parse(body)
    if root is None or root.tag != DAV + "propertyupdate":
        raise DavError(400, message="expected DAV:propertyupdate")
    update = PropUpdate()
    for action in root:
        if action.tag not in (DAV + "set", DAV + "remove"):
            continue
        for prop in action.iter(DAV + "prop"):
            for item in prop:
                value = inner_xml(item) if action.tag == DAV + "set" else None
                update.changes.append((item.tag, value))
    return update


def lockinfo(body: bytes) -> LockInfo | None:
    """The lock asked for, or None for a body-less LOCK (a refresh)."""
    root = parse(body)
    if root is None:
        return None
    if root.tag != DAV + "lockinfo":
        raise DavError(400, message="expected DAV:lockinfo")
    scope = root.find(DAV + "lockscope")
    kind = root.find(DAV + "locktype")
    if scope is None or kind is None or kind.find(DAV + "write") is None:
        raise DavError(400, message="only write locks with a scope are supported")
    owner = root.find(DAV + "owner")
    return LockInfo(scope.find(DAV + "exclusive") is not None, inner_xml(owner))


def inner_xml(element: ET.Element | None) -> str:
    """An element's content as XML text (children keep their namespaces)."""
    if element is None:
        return ""
    parts = [escape(element.text or "")]
    parts.extend(ET.tostring(child, encoding="unicode") for child in element)
    return "".join(parts)
