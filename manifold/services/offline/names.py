"""Names for what an offline download brings: taken from a server or a torrent, so
cleaned before they name anything, and never put over an existing entry.

A name from elsewhere has its control and text-reordering characters replaced
(``safe_name``) and is shortened to ``MAX_NAME_BYTES`` bytes of UTF-8, the limit of
common file systems, keeping its extension. When the name is taken in the target
folder, the file is stored as ``name (1).ext``, ``name (2).ext`` and so on.
"""

from __future__ import annotations

import os

from manifold.paths import safe_name

MAX_NAME_BYTES = 255
# A longer "extension" is a part of the name with a dot in it, not a file type.
MAX_EXTENSION_BYTES = 32
UNNAMED = "UnnamedURL"


def clean_name(name: str) -> str:
    """``name`` made safe to store: one segment, no control characters, short enough."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1].replace("\0", "")
    if name in ("", ".", ".."):
        return UNNAMED
    return fit_name(safe_name(name))


def fit_name(name: str, limit: int = MAX_NAME_BYTES) -> str:
    """``name`` cut to ``limit`` bytes of UTF-8 at a character boundary, its extension kept."""
    if len(name.encode()) <= limit:
        return name
    stem, extension = os.path.splitext(name)
    if len(extension.encode()) > MAX_EXTENSION_BYTES:
        stem, extension = name, ""
    return _cut(stem, limit - len(extension.encode())) + extension


def _cut(text: str, limit: int) -> str:
    return text.encode()[:limit].decode(errors="ignore")


def numbered(name: str, number: int) -> str:
    """The ``number``-th other choice for ``name``: ``a (1).txt`` for ``a.txt``."""
    if number == 0:
        return name
    stem, extension = os.path.splitext(name)
    if len(extension.encode()) > MAX_EXTENSION_BYTES or not stem:
        stem, extension = name, ""
    suffix = f" ({number}){extension}"
    return _cut(stem, MAX_NAME_BYTES - len(suffix.encode())) + suffix
