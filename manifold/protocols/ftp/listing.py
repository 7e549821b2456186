"""How folders and files are written over FTP: LIST lines, MLSD/MLST facts, times.

LIST follows ``ls -l`` as most servers write it (rclone, FileZilla and curl parse
it): the permission string, a link count, owner and group, the size, the month, day
and either the time (within the last half year) or the year, then the name. Times
are UTC, as FTP's MDTM and MLSD facts are (RFC 3659).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from manifold.models import Obj

_HALF_YEAR = timedelta(days=182)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun",
           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")  # fmt: skip


def stamp(moment: datetime) -> str:
    """``YYYYMMDDHHMMSS`` in UTC (MDTM, MLSD's ``modify``)."""
    return _utc(moment).strftime("%Y%m%d%H%M%S")


def list_line(obj: Obj, now: datetime) -> str:
    mode = "drwxr-xr-x" if obj.is_dir else "-rw-r--r--"
    size = 0 if obj.is_dir else obj.size
    moment = _utc(obj.modified)
    day = f"{_MONTHS[moment.month - 1]} {moment.day:2d}"
    recent = now - _HALF_YEAR < moment <= now + timedelta(days=1)
    when = f"{moment.hour:02d}:{moment.minute:02d}" if recent else f" {moment.year}"
    return f"{mode} 1 owner group {size:>12} {day} {when} {obj.name}"


def facts(obj: Obj, name: str | None = None) -> str:
    """MLSD/MLST facts (RFC 3659 section 7) and the name."""
    kind = "dir" if obj.is_dir else "file"
    parts = [f"type={kind}", f"modify={stamp(obj.modified)}"]
    if not obj.is_dir:
        parts.append(f"size={obj.size}")
    parts.append("perm=" + ("elcmdf" if obj.is_dir else "rawdf"))
    return ";".join(parts) + "; " + (obj.name if name is None else name)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
