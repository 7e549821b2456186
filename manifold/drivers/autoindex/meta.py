"""AutoIndex options and static configuration, with OpenList's AutoIndex driver's names.

OpenList asks for XPath expressions (``item_xpath``, ``name_xpath``, ``size_xpath``,
``modified_xpath``) and a time layout to read a page; this driver recognises nginx's
and Apache's listing pages by themselves (``index``), so those options are not offered.
"""

from __future__ import annotations

from pydantic import BaseModel

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="AutoIndex",
    local_sort=True,
    check_status=True,
    no_upload=True,
    call_timeout=30.0,
    retries=2,
    max_concurrency=8,
    idle_timeout=60.0,
)

IGNORED = ".\n..\nParent Directory\nUp"


class Addition(BaseModel):
    url: str = option(..., required=True, help="The listing page of the top folder")
    ignore_file_names: str = option(IGNORED, type="text", help="Names left out, one a line")
