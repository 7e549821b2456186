"""UrlTree's text, read into a tree of nodes (AList's format).

One entry a line, indented two spaces a level. ``Folder:`` (a line ending in a colon)
opens a folder; the lines indented below it are its entries. Any other line is a file,
``[name:[size:[modified:]]]URL``: the URL from its ``http://`` or ``https://`` on, a size
in bytes and a modification time in Unix seconds before it, each ended by a colon. A
file without a name is named after the last segment of its URL's path, decoded (AList
takes it raw, query string and all).

Every mistake is refused with its line, rather than skipped: a wrong indent, a tab, a
file without a URL, a size or time that is no number, a name that cannot be one, and
two entries of one name in a folder.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from manifold.errors import InvalidRequest, ManifoldError
from manifold.paths import validate_name

INDENT = 2


@dataclass(slots=True)
class Node:
    """A folder (``url`` empty) or a file of the tree; ``size`` is a folder's total."""

    name: str
    url: str = ""
    size: int = 0
    modified: int = 0
    known_size: bool = False
    children: dict[str, Node] = field(default_factory=dict)

    @property
    def is_file(self) -> bool:
        return bool(self.url)

    def find(self, path: str) -> Node | None:
        """The node at ``path`` (``/`` is this one)."""
        node: Node | None = self
        for name in path.strip("/").split("/") if path.strip("/") else []:
            node = None if node is None or node.is_file else node.children.get(name)
        return node

    def files(self) -> list[Node]:
        """Every file below, at any depth."""
        found = []
        for child in self.children.values():
            found.extend([child] if child.is_file else child.files())
        return found

    def total(self) -> int:
        """Sets each folder's size to what its files add up to, and returns it."""
        if self.is_file:
            return self.size
        self.size = sum(child.total() for child in self.children.values())
        return self.size


def build(text: str) -> Node:
    root = Node("")
    stack: list[tuple[int, Node]] = [(-1, root)]
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        try:
            level = _level(line)
            while level <= stack[-1][0]:
                stack.pop()
            node = _node(line.strip())
            _add(stack[-1][1], node)
        except ManifoldError as exc:
            raise InvalidRequest(f"url_structure line {number}: {exc.message}") from None
        if not node.is_file:
            stack.append((level, node))
    return root


def _level(line: str) -> int:
    indent = len(line) - len(line.lstrip(" "))
    if line[indent] == "\t":
        raise InvalidRequest("indent with spaces, not tabs")
    if indent % INDENT:
        raise InvalidRequest(f"an indent of {indent} spaces is not a multiple of {INDENT}")
    return indent // INDENT


def _node(line: str) -> Node:
    if line.endswith(":") and "://" not in line:
        return Node(_named(line[:-1]))
    start = min((i for i in (line.find("http://"), line.find("https://")) if i >= 0), default=-1)
    if start < 0:
        raise InvalidRequest("a file needs an http:// or https:// URL")
    url, info = line[start:], line[:start]
    if info and not info.endswith(":"):
        raise InvalidRequest("what comes before the URL must end with a colon")
    parts = info[:-1].split(":") if info else []
    if len(parts) > 3:
        raise InvalidRequest("a file is name:size:modified:URL at most")
    node = Node(_named(parts[0] if parts else _url_name(url)), url)
    if len(parts) > 1:
        node.size, node.known_size = _number(parts[1], "size"), True
    if len(parts) > 2:
        node.modified = _number(parts[2], "modified time")
    return node


def _add(folder: Node, node: Node) -> None:
    if node.name in folder.children:
        raise InvalidRequest(f"a second entry named {node.name!r} in one folder")
    folder.children[node.name] = node


def _named(name: str) -> str:
    return validate_name(name.strip())


def _url_name(url: str) -> str:
    split = urlsplit(url)
    return unquote(posixpath.basename(split.path.rstrip("/"))) or split.hostname or url


def _number(text: str, what: str) -> int:
    if not text.strip().isdigit():
        raise InvalidRequest(f"the {what} {text!r} is not a whole number")
    return int(text.strip())
