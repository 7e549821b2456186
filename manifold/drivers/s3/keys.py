"""S3 listing pages as objects (paths as keys: ``manifold.drivers.prefixes``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from manifold.drivers.prefixes import prefix_of
from manifold.models import Obj, new_obj


def is_empty(page: Mapping[str, Any]) -> bool:
    """Whether a listing page holds no key and no prefix at all (hidden ones count)."""
    return not page.get("Contents") and not page.get("CommonPrefixes")


def last_key(page: Mapping[str, Any]) -> str:
    """The greatest key or prefix of a page: where a v1 listing without ``NextMarker``
    goes on from."""
    keys = [item["Key"] for item in page.get("Contents") or ()]
    keys += [item["Prefix"] for item in page.get("CommonPrefixes") or ()]
    return max(keys, default="")


def page_objects(
    page: Mapping[str, Any],
    folder: str,
    hidden: str,
    folder_time: datetime,
    seen: set[str],
) -> list[Obj]:
    """The children of ``folder`` one listing page shows, placeholders left out.

    ``seen`` holds the sub-folder names earlier pages gave: a store may repeat the
    common prefixes on every page of a v1 listing (moto does), and a folder is
    listed once.
    """
    prefix = prefix_of(folder)
    base = folder.rstrip("/")
    cut = len(prefix)
    found: list[Obj] = []
    for item in page.get("CommonPrefixes") or ():
        name = item["Prefix"][cut:-1]
        if name and name not in seen:
            seen.add(name)
            found.append(new_obj(name, 0, True, folder_time, None, f"{base}/{name}", ""))
    found += _files(page.get("Contents") or (), cut, base, hidden)
    return found


def _files(contents: Iterable[Mapping[str, Any]], cut: int, base: str, hidden: str) -> list[Obj]:
    found = []
    for item in contents:
        name = item["Key"][cut:]
        # The folder's own key (``dir/``, made by other tools) and its placeholder.
        if not name or name == hidden or "/" in name:
            continue
        found.append(
            new_obj(name, item["Size"], False, item["LastModified"], None, f"{base}/{name}", "")
        )
    return found
