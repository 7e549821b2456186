"""Object stores whose folders are key prefixes (S3, Azure Blob Storage): paths as keys.

``Obj.path`` is the object's path in the bucket with a leading ``/`` (the root
folder's path included), so a key is the path without its leading slash and a
folder's prefix is its key with a trailing one. Folders are prefixes: they exist
while some key lies below them, and carry no time of their own.
"""

from __future__ import annotations


def key_of(path: str) -> str:
    """The key of the object at ``path`` (``/a/b`` -> ``a/b``)."""
    return path.strip("/")


def prefix_of(path: str) -> str:
    """The prefix every key inside the folder at ``path`` starts with (``""``: the bucket)."""
    key = key_of(path)
    return f"{key}/" if key else ""


def join(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"


def parent_of(path: str) -> str:
    return path.rstrip("/").rpartition("/")[0] or "/"


def name_of(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2]


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it."""
    folder = folder.rstrip("/")
    return path.rstrip("/") == folder or path.startswith(f"{folder}/")
