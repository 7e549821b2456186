"""Chunk options and static configuration, with OpenList's Chunk driver's names."""

from __future__ import annotations

from pydantic import BaseModel

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="Chunk",
    local_sort=True,
    only_proxy=True,
    no_cache=True,
    default_root="/",
)

DEFAULT_PREFIX = "[openlist_chunk]"


class Addition(BaseModel):
    remote_path: str = option(..., required=True, help="where the parts are kept in this server")
    part_size: int = option(..., type="number", required=True, help="bytes")
    chunk_large_file_only: bool = option(False, help="chunk only if file size > part_size")
    chunk_prefix: str = option(DEFAULT_PREFIX, help="the prefix of chunk folder")
    custom_ext: str = option("")
    store_hash: bool = option(True)
    num_list_workers: int = option(5, type="number", required=True)
    show_hidden: bool = option(True, help="show hidden directories and files")
