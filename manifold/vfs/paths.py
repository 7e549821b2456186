"""Pure path logic in virtual (slash-separated) paths. No I/O.

Every path a client sends is cleaned here; every path joined onto a user's base
path goes through ``join_base``, which can never return a path outside the base.
"""

from __future__ import annotations

import posixpath

from manifold.errors import InvalidRequest, RelativePath


def clean_path(path: str) -> str:
    """Backslashes become slashes, a leading slash is added, then POSIX clean.

    ``..`` above the root stays at the root; the result never ends with a slash
    (except the root itself) and never holds ``.`` or ``..`` segments.
    """
    path = path.replace("\\", "/")
    if not path.startswith("/"):
        path = "/" + path
    cleaned = posixpath.normpath(path)
    # normpath keeps a leading "//" (POSIX allows it to mean something); we do not.
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


def has_relative_segment(path: str) -> bool:
    """True when any segment of ``path`` is ``..`` (after treating backslashes as slashes)."""
    return ".." in path.replace("\\", "/").split("/")


def join_base(base: str, requested: str) -> str:
    """Join a client-supplied path onto a base path, refusing any ``..`` segment.

    AList refuses only some spellings of ``..``; here any ``..`` segment is refused,
    a NUL byte too, so no spelling can climb out of ``base``.
    """
    if "\x00" in requested or has_relative_segment(requested):
        raise RelativePath()
    base = clean_path(base)
    joined = clean_path(posixpath.join(base, clean_path(requested).lstrip("/")))
    if not is_sub_path(base, joined):
        raise RelativePath()
    return joined


def is_sub_path(parent: str, path: str) -> bool:
    """Whether ``path`` is ``parent`` or below it, comparing whole segments."""
    parent = clean_path(parent)
    path = clean_path(path)
    return parent == "/" or path == parent or path.startswith(parent + "/")


def split_path(path: str) -> tuple[str, str]:
    """Parent folder and name of a cleaned path; the root's name is empty."""
    path = clean_path(path)
    if path == "/":
        return "/", ""
    parent, _, name = path.rpartition("/")
    return parent or "/", name


# Drivers write data in progress (uploads, copies) under names with this prefix and
# sweep stale ones away, so no client may make, rename onto or touch such a name.
RESERVED_PREFIX = ".manifold-upload-"


def validate_name(name: str) -> str:
    """Return ``name`` if it can be a single entry of a folder, else raise.

    Refuses ``.`` and ``..`` (``RelativePath``) and the empty name, slashes,
    backslashes and NUL (``InvalidRequest``), so no name can leave its folder on
    any platform; and names under ``RESERVED_PREFIX`` (``InvalidRequest``), which
    drivers keep for unfinished data.
    """
    if name in (".", ".."):
        raise RelativePath()
    if not name or any(c in name for c in "/\\\x00"):
        raise InvalidRequest(f"invalid name: {name!r}")
    if name.startswith(RESERVED_PREFIX):
        raise InvalidRequest(
            f"invalid name: {name!r}: names starting with {RESERVED_PREFIX} are reserved"
        )
    return name
