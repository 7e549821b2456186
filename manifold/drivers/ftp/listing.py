"""Folder listings as FTP servers send them: MLSD facts (RFC 3659) where offered, else
the ``ls -l`` lines of ``LIST`` (Unix style, or the DOS style of Windows servers).

A line is decoded with the storage's encoding; a name that does not decode is left
out rather than shown as a name no command could reach. Names keep their spaces:
only the line ending is cut, never a blank at either end of the name.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

# An entry whose kind LIST does not tell (a symbolic link): the driver asks the server.
LINK = "link"

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
_UNIX = re.compile(
    r"^(?P<kind>[-dlbcps])[-rwxsStTl]{9}\S*\s+\d+\s+\S+\s+(?:\S+\s+)?(?P<size>\d+)\s+"
    r"(?P<month>[A-Za-z]{3})\s+(?P<day>\d{1,2})\s+(?P<when>\d{1,2}:\d{2}|\d{4}) (?P<name>.+)$"
)
_DOS = re.compile(
    r"^(?P<date>\d{2}-\d{2}-\d{2,4})\s+(?P<time>\d{1,2}:\d{2}[AP]M)\s+"
    r"(?P<size><DIR>|\d+)\s+(?P<name>.+)$"
)


class Entry(NamedTuple):
    """One listed name. ``kind`` is ``file``, ``dir`` or ``LINK``; ``modified`` is UTC
    (None when the server gave no time). A tuple: a listing makes thousands, and a
    frozen dataclass sets each field through a slower call."""

    name: str
    kind: str
    size: int
    modified: datetime | None

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"


def decode_line(raw: bytes, encoding: str) -> str | None:
    """A listing line without its line ending, or None when it does not decode."""
    try:
        return raw.rstrip(b"\r\n").decode(encoding)
    except UnicodeDecodeError:
        return None


def parse_facts(text: str) -> dict[str, str]:
    """``type=file;size=3;modify=...;`` as a dict with lower-case keys."""
    facts = {}
    for fact in text.split(";"):
        key, sep, value = fact.partition("=")
        if sep:
            facts[key.strip().lower()] = value
    return facts


def parse_mlsx(line: str) -> Entry | None:
    """An MLSD line (facts, one space, the name); None for ``.``, ``..`` and odd kinds."""
    facts_text, sep, name = line.partition(" ")
    if not sep or not name:
        return None
    facts = parse_facts(facts_text)
    if facts.get("type", "").lower() in ("cdir", "pdir"):
        return None  # the folder itself and its parent
    return entry_from_facts(name, facts)


def entry_from_facts(name: str, facts: dict[str, str]) -> Entry | None:
    kind = facts.get("type", "").lower()
    if kind == "file":
        size = facts.get("size", "0")
        return Entry(name, "file", int(size) if size.isdigit() else 0, mlsx_time(facts))
    if kind in ("dir", "cdir", "pdir"):
        return Entry(name, "dir", 0, mlsx_time(facts))
    if kind.startswith("os.unix=slink") or kind.startswith("os.unix=symlink"):
        return Entry(name, LINK, 0, mlsx_time(facts))
    return None  # devices and anything else a server makes up


def mlsx_time(facts: dict[str, str]) -> datetime | None:
    return parse_timeval(facts.get("modify", ""))


# Times kept once read: the entries of a listing share a few (files written together).
@functools.lru_cache(maxsize=4096)
def parse_timeval(value: str) -> datetime | None:
    """RFC 3659's ``YYYYMMDDHHMMSS[.sss]``, always UTC."""
    whole, _, fraction = value.strip().partition(".")
    if len(whole) != 14 or not whole.isdigit():
        return None
    # ISO 8601's basic form, which ``fromisoformat`` reads in C: ``strptime`` was a
    # third of a long MLSD listing's parsing.
    try:
        when = datetime.fromisoformat(f"{whole[:8]}T{whole[8:]}Z")
    except ValueError:
        return None
    if fraction.isdigit():
        when += timedelta(microseconds=int(fraction[:6].ljust(6, "0")))
    return when


def parse_list(line: str, now: datetime) -> Entry | None:
    """A LIST line, Unix or DOS style; None for ``total``, ``.``/``..`` and unknown lines.

    LIST times carry no zone; they are taken as UTC (vsftpd's default, and what an
    unknown server most likely means). A Unix date without a year is the last such
    date not after tomorrow, as ``ls`` means it.
    """
    found = _UNIX.match(line)
    if found is not None:
        return _unix_entry(found, now)
    found = _DOS.match(line)
    if found is not None:
        return _dos_entry(found)
    return None


def _unix_entry(found: re.Match[str], now: datetime) -> Entry | None:
    name = found["name"]
    kind = {"-": "file", "d": "dir", "l": LINK}.get(found["kind"])
    if kind is None:
        return None
    if kind == LINK:
        name = name.split(" -> ", 1)[0]
    if name in (".", ".."):
        return None
    modified = _unix_time(found["month"], found["day"], found["when"], now)
    size = int(found["size"]) if kind == "file" else 0
    return Entry(name, kind, size, modified)


def _unix_time(month_text: str, day_text: str, when: str, now: datetime) -> datetime | None:
    month = _MONTHS.get(month_text.lower())
    if month is None:
        return None
    try:
        if ":" not in when:
            return datetime(int(when), month, int(day_text), tzinfo=UTC)
        hour, minute = (int(part) for part in when.split(":"))
        stamp = datetime(now.year, month, int(day_text), hour, minute, tzinfo=UTC)
        if stamp > now + timedelta(days=1):
            stamp = stamp.replace(year=now.year - 1)
        return stamp
    except ValueError:  # 29 February of a year without one, a day 31 in April
        return None


def _dos_entry(found: re.Match[str]) -> Entry | None:
    name = found["name"]
    if name in (".", ".."):
        return None
    try:
        pattern = "%m-%d-%y" if len(found["date"]) == 8 else "%m-%d-%Y"
        date = datetime.strptime(found["date"], pattern)
        clock = datetime.strptime(found["time"], "%I:%M%p")
    except ValueError:
        modified = None
    else:
        modified = date.replace(hour=clock.hour, minute=clock.minute, tzinfo=UTC)
    if found["size"] == "<DIR>":
        return Entry(name, "dir", 0, modified)
    return Entry(name, "file", int(found["size"]), modified)
