"""UrlTree options and static configuration, with AList's UrlTree driver's names.

AList's ``writable`` (entries added, moved and removed through the tree, saved back
into the text) is not offered: every URL here is the admin's, since the server
fetches them for ``/p``.
"""

from __future__ import annotations

from pydantic import BaseModel

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="UrlTree",
    local_sort=True,
    no_cache=True,
    no_upload=True,
    check_status=True,
)

_STRUCTURE_HELP = (
    "One entry a line, two spaces a level: 'Folder:' opens a folder, a file is "
    "[name:[size:[modified:]]]URL"
)


class Addition(BaseModel):
    url_structure: str = option(..., type="text", required=True, help=_STRUCTURE_HELP)
    head_size: bool = option(
        False, help="Ask each URL without a size for it (HEAD) when the storage starts"
    )
