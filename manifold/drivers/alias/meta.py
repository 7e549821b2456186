"""Alias options and static configuration, as AList's Alias driver has them."""

from __future__ import annotations

from pydantic import BaseModel

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="Alias",
    local_sort=True,
    no_cache=True,
    default_root="/",
    proxy_range_option=True,
)


class Addition(BaseModel):
    paths: str = option(..., type="text", required=True)
    protect_same_name: bool = option(True, help="Protects same-name files from Delete or Rename")
    download_concurrency: int = option(0, help="Need to enable proxy")
    download_part_size: int = option(0, help="Need to enable proxy. Unit: KB")
    writable: bool = option(False)
