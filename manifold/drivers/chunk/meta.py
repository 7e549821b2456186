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
    remote_path: str = option(..., required=True, help="Path in this server the parts are kept in")
    part_size: int = option(..., type="number", required=True, help="Bytes in each part")
    chunk_large_file_only: bool = option(False, help="Keep files of at most part_size bytes whole")
    chunk_prefix: str = option(DEFAULT_PREFIX, help="Starts the name of each file's parts folder")
    custom_ext: str = option("", help="Ends the name of each part")
    store_hash: bool = option(True, help="Keep each file's MD5 beside its parts")
    num_list_workers: int = option(
        5, type="number", required=True, help="Parts folders read at once in a listing"
    )
    show_hidden: bool = option(True, help="List names that start with a dot")
