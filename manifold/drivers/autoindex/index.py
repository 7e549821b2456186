"""A directory listing page read into entries: nginx's ``autoindex`` (a ``<pre>`` of
links, each followed by its time and size) and Apache's ``mod_autoindex`` (the same
in a ``<pre>``, or a table row per entry), and pages built like them.

Each link whose target lies directly inside the listed folder is an entry: a folder
when the target ends with a slash. Its name comes from the target, decoded (nginx
shortens long names in the link's text); the text after the link, up to the next link
or the end of its table row, gives the time and the size as the page shows them. A
size with a unit (``1.5K``, as Apache and nginx's ``autoindex_exact_size off`` show)
is only near the real one; ``exact`` says which. Times are read as UTC (nginx's
default; Apache shows its own zone, which the page does not name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from urllib.parse import unquote, urljoin, urlsplit

UNITS = {"": 1, "b": 1, "byte": 1, "bytes": 1}
UNITS.update({f"{p}{s}": 1024 ** (i + 1) for i, p in enumerate("kmgtp") for s in ("", "b", "ib")})

_TIMES = [
    (re.compile(r"\b(\d{1,2}-[A-Za-z]{3}-\d{4}) (\d{1,2}:\d{2}(?::\d{2})?)"), "%d-%b-%Y"),
    (re.compile(r"\b(\d{4}-\d{2}-\d{2})[ T](\d{1,2}:\d{2}(?::\d{2})?)"), "%Y-%m-%d"),
]
_SIZE = re.compile(r"(?<![\w.:-])(\d+(?:\.\d+)?)\s*([a-z]*)(?![\w.:-])", re.IGNORECASE)
# Tags that end an entry's trailing text besides the next link.
_ROW_ENDS = frozenset({"tr", "pre", "table", "hr", "li", "br"})


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    is_dir: bool
    size: int
    exact: bool
    modified: datetime | None


class _Links(HTMLParser):
    """Every ``<a href>`` of a page with its text and the text that follows it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[list[str]] = []  # [href, text, trailing]
        self._in_link = False
        self._open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            self._open = self._in_link = href is not None
            if href is not None:
                self.links.append([href, "", ""])
        elif tag in _ROW_ENDS:
            self._open = False

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._in_link = False
        elif tag in _ROW_ENDS:
            self._open = False

    def handle_data(self, data: str) -> None:
        if not self._open:
            return
        self.links[-1][1 if self._in_link else 2] += data


def entries(page: str, folder_url: str, ignored: frozenset[str]) -> list[Entry]:
    """The entries of the listing ``page`` of ``folder_url`` (which ends with a slash),
    in the page's order; a name linked twice (Apache's icon and name) is taken once,
    from its last link, which carries the time and size."""
    parser = _Links()
    parser.feed(page)
    parser.close()
    found: dict[str, Entry] = {}
    for href, text, trailing in parser.links:
        child = _child(href, folder_url)
        if child is None or child[0] in ignored or text.strip() in ignored:
            continue
        name, is_dir = child
        size, exact = (0, False) if is_dir else _size(_after_time(trailing))
        entry = Entry(name, is_dir, size, exact, _time(trailing))
        found.pop(name, None)
        found[name] = entry
    return list(found.values())


def _child(href: str, folder_url: str) -> tuple[str, bool] | None:
    """The name of the entry ``href`` links to, and whether it is a folder; None for a
    link anywhere but directly inside the folder (a sort order, the parent, a site)."""
    if href.startswith(("?", "#")):
        return None
    target = urlsplit(urljoin(folder_url, href))._replace(query="", fragment="").geturl()
    if not target.startswith(folder_url) or target == folder_url:
        return None
    rest = target[len(folder_url) :]
    is_dir = rest.endswith("/")
    if "/" in rest.rstrip("/"):
        return None
    name = unquote(rest.rstrip("/"))
    if not name or "/" in name or name in (".", ".."):
        return None
    return name, is_dir


def _time(text: str) -> datetime | None:
    for pattern, day_format in _TIMES:
        match = pattern.search(text)
        if match is None:
            continue
        day, clock = match.groups()
        clock_format = "%H:%M:%S" if clock.count(":") == 2 else "%H:%M"
        try:
            parsed = datetime.strptime(f"{day} {clock}", f"{day_format} {clock_format}")
        except ValueError:
            return None
        return parsed.replace(tzinfo=UTC)
    return None


def _after_time(text: str) -> str:
    """``text`` after the time it shows (whose digits are no size), or all of it."""
    for pattern, _ in _TIMES:
        match = pattern.search(text)
        if match is not None:
            return text[match.end() :]
    return text


def _size(text: str) -> tuple[int, bool]:
    """The first size ``text`` shows, and whether it is exact; (0, False) for none."""
    for match in _SIZE.finditer(text):
        number, unit = match.group(1), match.group(2).lower()
        scale = UNITS.get(unit)
        if scale is None:
            continue
        exact = scale == 1 and "." not in number
        return int(float(number) * scale), exact
    return 0, False
