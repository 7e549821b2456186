"""Listing pages of a container as objects, and the times files report.

Folders are prefixes (``manifold.drivers.prefixes``: a path with a leading ``/`` is the
blob name without it). A folder made here is also a marker blob, its prefix itself
(``dir/``, empty, ``hdi_isfolder=true``), as OpenList makes them: an empty folder
exists, and a hierarchical listing shows the marker as the folder's prefix. A file's
time is the ``mtime`` its metadata carries (the uploader's time, which rclone writes
too), else the blob's last modification.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from azure.storage.blob import BlobProperties

from manifold.drivers.prefixes import prefix_of
from manifold.models import Obj, new_obj

# Metadata of a folder's marker blob, as OpenList (and Azure's Data Lake tools) set it.
FOLDER_METADATA = {"hdi_isfolder": "true"}
# Metadata key of a file's own modification time (RFC 3339), as rclone's.
MTIME = "mtime"
# Fractions of a second past microseconds (rclone writes nanoseconds).
_FRACTION = re.compile(r"(\.\d{6})\d+")


def page_objects(
    items: Iterable[Any], folder: str, folder_time: datetime, seen: set[str]
) -> list[Obj]:
    """The children of ``folder`` one hierarchical listing page shows; the folder's own
    marker left out, and a sub-folder an earlier page gave (``seen``) too."""
    cut = len(prefix_of(folder))
    base = folder.rstrip("/")
    found: list[Obj] = []
    for item in items:
        if not isinstance(item, BlobProperties):  # a prefix: ``sub/``
            name = item.name[cut:-1]
            if name and "/" not in name and name not in seen:
                seen.add(name)
                found.append(new_obj(name, 0, True, folder_time, None, f"{base}/{name}", ""))
            continue
        name = item.name[cut:]
        if name and "/" not in name:
            found.append(file_obj(f"{base}/{name}", item))
    return found


def file_obj(path: str, blob: BlobProperties) -> Obj:
    """The file at ``path`` as ``blob`` (a listing's item or a lookup) describes it."""
    name = path.rpartition("/")[2]
    return new_obj(name, int(blob.size or 0), False, modified_of(blob), None, path, "")


def modified_of(blob: BlobProperties) -> datetime:
    said = (blob.metadata or {}).get(MTIME)
    if said:
        parsed = parse_time(said)
        if parsed is not None:
            return parsed
    modified: datetime = blob.last_modified
    return modified if modified.tzinfo else modified.replace(tzinfo=UTC)


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time (``Z`` or an offset, any fraction of a second); None if not one."""
    with suppress(ValueError):
        parsed = datetime.fromisoformat(_FRACTION.sub(r"\1", text.strip()))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def mtime_metadata(modified: datetime | None) -> dict[str, str]:
    """The metadata that keeps an upload's own time (none when the sender gave none)."""
    if modified is None:
        return {}
    aware = modified if modified.tzinfo else modified.replace(tzinfo=UTC)
    return {MTIME: aware.astimezone(UTC).isoformat().replace("+00:00", "Z")}
