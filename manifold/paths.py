"""Pure path logic in virtual (slash-separated) paths. No I/O.

Every path a client sends is cleaned here; every path joined onto a user's base
path goes through ``join_base``, which can never return a path outside the base.
"""

from __future__ import annotations

import posixpath
import re
import secrets
from collections.abc import Sequence

from manifold.errors import InvalidName, NameTooLong, RelativePath


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


# Longer client paths are refused: far beyond any file system's (Linux allows 4096
# bytes), and work on a path grows with its length times its depth in places (resolving
# links walks every ancestor), so a path of a million segments cost minutes.
MAX_PATH_LENGTH = 32 << 10


def join_base(base: str, requested: str) -> str:
    """Join a client-supplied path onto a base path, refusing any ``..`` segment.

    AList refuses only some spellings of ``..``; here any ``..`` segment is refused,
    a NUL byte too, so no spelling can climb out of ``base``.
    """
    if len(requested) > MAX_PATH_LENGTH:
        raise InvalidName(f"path is longer than {MAX_PATH_LENGTH} characters")
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


def child_path(parent: str, name: str) -> str:
    """``parent/name`` for a ``name`` a listing gave; ``RelativePath`` unless the result
    is an entry directly below ``parent`` named ``name``.

    Every walk joins listed names through here: a name a back end made up (``..``,
    ``a/../../b``, ``a\\b``, which ``clean_path`` reads as ``a/b``) can then never
    take the walk out of the folder it lists.
    """
    parent = clean_path(parent)
    joined = clean_path(f"{parent}/{name}")
    if not is_tree_name(name) or split_path(joined) != (parent, name):
        raise RelativePath()
    return joined


def split_path(path: str) -> tuple[str, str]:
    """Parent folder and name of a cleaned path; the root's name is empty."""
    path = clean_path(path)
    if path == "/":
        return "/", ""
    parent, _, name = path.rpartition("/")
    return parent or "/", name


# C0 and C1 controls, DEL, and the Unicode format characters that reorder or hide text
# (bidi embeddings, overrides and isolates, zero-width marks): a name holding one can
# pose as another in a listing or a terminal.
_UNSAFE = frozenset(
    [chr(c) for c in range(0x20)]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + list("\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e")
    + list("\u2060\u2066\u2067\u2068\u2069\ufeff")
)


def has_unsafe_chars(name: str) -> bool:
    """Whether ``name`` holds a control or text-reordering character (see ``safe_name``)."""
    return not _UNSAFE.isdisjoint(name)


def safe_name(name: str, replacement: str = "_") -> str:
    """``name`` with every control and text-reordering character replaced.

    For names Manifold takes from elsewhere (a download's ``Content-Disposition``, an
    archive member); a name a client types itself is refused instead
    (``validate_new_name``).
    """
    if not has_unsafe_chars(name):
        return name
    return "".join(replacement if c in _UNSAFE else c for c in name)


def validate_new_name(name: str) -> str:
    """``validate_name``, no control or text-reordering character and at most
    ``MAX_NAME_BYTES`` bytes: for a name a client gives to something new (an upload, a
    folder, a rename's target)."""
    validate_name(name)
    if has_unsafe_chars(name):
        raise InvalidName(f"invalid name: {name!r}: control characters are not allowed")
    return refuse_long_name(name)


# The longest name common file systems keep (ext4, XFS, Btrfs, NTFS in UTF-16 units):
# longer ones get a "name too long" from the back end that clients take for a failure
# worth retrying, so they are refused before any back end sees them.
MAX_NAME_BYTES = 255


def name_bytes(name: str) -> int:
    """The length of ``name`` in UTF-8 (a lone surrogate counting as three bytes)."""
    return len(name.encode("utf-8", "surrogatepass"))


def refuse_long_name(name: str) -> str:
    """``name``, or ``NameTooLong`` when it is over ``MAX_NAME_BYTES`` bytes."""
    if name_bytes(name) > MAX_NAME_BYTES:
        raise NameTooLong(name)
    return name


# What a name can never hold: a path reads a backslash as a slash, and NUL ends it.
_SEPARATORS = frozenset("/\\\x00")


def is_tree_name(name: str) -> bool:
    """Whether ``name`` can be one entry of a folder in the tree at all: not empty, not
    ``.`` or ``..``, and no ``/``, ``\\`` (paths read it as ``/``) or NUL."""
    return bool(name) and name not in (".", "..") and _SEPARATORS.isdisjoint(name)


def is_listable_name(name: str) -> bool:
    """Whether an entry a back end lists under ``name`` is shown: a tree name
    (``is_tree_name``) with no control or text-reordering character, the rule new names
    follow (``validate_new_name``), so that no listing shows a name no client could
    have given. Length is no reason: a back end may keep longer names (S3)."""
    return is_tree_name(name) and not has_unsafe_chars(name)


# Drivers write data in progress (uploads, copies) under names with this prefix and
# sweep stale ones away, so no client may make, rename onto or touch such a name.
RESERVED_PREFIX = ".manifold-upload-"
# An object set aside or passed by while another takes a name is parked under this
# prefix: hidden, never reserved, and never swept by the drivers (it may be the only
# copy of a user's data should a step fail).
PARKING_PREFIX = ".manifold-parked-"


def parking_name() -> str:
    """A name no one uses, for an object on its way to a taken or another name."""
    return PARKING_PREFIX + secrets.token_hex(8)


def is_reserved_name(name: str) -> bool:
    """Whether ``name`` starts with ``RESERVED_PREFIX``, in any letter case: data in
    progress, which no client makes, sees or reads."""
    return name.casefold().startswith(RESERVED_PREFIX)


# Any character ``is_listable_name`` refuses but the slash: ``all_shown_names`` joins
# names with slashes and counts them instead.
_UNLISTABLE_CHAR = re.compile("[" + re.escape("".join(sorted(_UNSAFE | {"\\"}))) + "]")


def all_shown_names(names: Sequence[str]) -> bool:
    """Whether every name is listable (``is_listable_name``) and none reserved
    (``is_reserved_name``): the same answer as asking each, in a few passes in C over
    the names joined with slashes, for listings of 100,000 entries.

    With no slash inside a name (as many slashes as gaps), an empty name shows as
    ``//`` and a name ``.`` or ``..`` as ``/./`` or ``/../``; case folding maps each
    character on its own, so a reserved name shows in the folded whole as ``/`` and
    the prefix.
    """
    if not names:
        return True
    joined = "/" + "/".join(names) + "/"
    return (
        joined.count("/") == len(names) + 1
        and "//" not in joined
        and "/./" not in joined
        and "/../" not in joined
        and _UNLISTABLE_CHAR.search(joined) is None
        and "/" + RESERVED_PREFIX not in joined.casefold()
    )


def validate_name(name: str) -> str:
    """Return ``name`` if it can be a single entry of a folder, else raise.

    Refuses ``.`` and ``..`` (``RelativePath``) and the empty name, slashes,
    backslashes and NUL (``InvalidName``), so no name can leave its folder on
    any platform; and names under ``RESERVED_PREFIX`` in any letter case
    (``InvalidName``), which drivers keep for unfinished data.
    """
    if name in (".", ".."):
        raise RelativePath()
    if not name or not _SEPARATORS.isdisjoint(name):
        raise InvalidName(f"invalid name: {name!r}")
    if is_reserved_name(name):
        raise InvalidName(
            f"invalid name: {name!r}: names starting with {RESERVED_PREFIX} are reserved"
        )
    return name
