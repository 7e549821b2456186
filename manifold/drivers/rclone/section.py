"""The ``config`` option: one remote's section as ``rclone config show NAME`` prints it.

``key = value`` lines, blank lines and ``#``/``;`` comments, and at most one
``[name]`` line first (the name is the server's to choose, so it is ignored). Errors
name the line by its number and its key, never its value: a value may be a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from manifold.errors import InvalidRequest

KEY = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class Section:
    """A parsed section: the backend type, the other keys' values, and the line each
    key came from (for errors)."""

    type: str
    values: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)


def parse(text: str) -> Section:
    """``text`` parsed; ``InvalidRequest`` naming the first bad line."""
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            if values or lines.get("[", 0):
                raise _bad(number, "holds a second [name] line: paste one remote's section")
            lines["["] = number
            continue
        key, equals, value = (part.strip() for part in line.partition("="))
        if not equals or not KEY.fullmatch(key):
            raise _bad(number, "is not `key = value`")
        if key in values:
            raise _bad(number, f"sets {key} a second time")
        values[key], lines[key] = value, number
    lines.pop("[", None)
    kind = values.pop("type", "")
    if not kind:
        raise InvalidRequest("config has no `type = ...` line (the backend, e.g. type = sftp)")
    return Section(kind, values, lines)


# Keys any section may hold: rclone keeps an OAuth token under ``token`` whatever the
# backend (most list it as an option, the others keep it as they find it).
ANY_BACKEND = frozenset({"type", "token"})


def check(section: Section, providers: dict[str, dict[str, bool]]) -> None:
    """``InvalidRequest`` naming the line of an unknown backend type or option."""
    options = providers.get(section.type)
    if options is None:
        raise _bad(section.lines["type"], f"names no rclone backend: {section.type!r}")
    for key, number in section.lines.items():
        if key not in ANY_BACKEND and key not in options:
            raise _bad(number, f"sets {key}, which the {section.type} backend does not have")


def updated(text: str, changes: dict[str, str]) -> str:
    """``text`` with the keys in ``changes`` set to their new values: the line of each
    key rewritten in place, a key it lacks added at the end."""
    left = dict(changes)
    out: list[str] = []
    for raw in text.splitlines():
        key, equals, _ = (part.strip() for part in raw.strip().partition("="))
        if equals and key in left:
            raw = f"{key} = {left.pop(key)}"
        out.append(raw)
    out += [f"{key} = {value}" for key, value in left.items()]
    return "\n".join(out) + "\n"


def _bad(number: int, what: str) -> InvalidRequest:
    return InvalidRequest(f"config line {number} {what}")
