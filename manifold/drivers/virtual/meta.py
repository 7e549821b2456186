"""Virtual options and static configuration, with AList's Virtual driver's names and
``depth`` besides (AList's tree has no bottom)."""

from __future__ import annotations

from manifold.drivers.base import DriverConfig, RootPath, option

CONFIG = DriverConfig(
    name="Virtual",
    local_sort=True,
    only_local=True,
    need_ms=True,
    no_upload=True,
)


class Addition(RootPath):
    root_folder_path: str = option("/", help="Seeds the tree: another root, other names")
    num_file: int = option(30, type="number", required=True, help="Files in each folder")
    num_folder: int = option(30, type="number", required=True, help="Folders in each folder")
    max_file_size: int = option(1073741824, type="number", required=True, help="Bytes at most")
    min_file_size: int = option(1048576, type="number", required=True, help="Bytes at least")
    depth: int = option(
        3, type="number", help="Levels of folders below the root; the last holds files only"
    )
