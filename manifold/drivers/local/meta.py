"""The Local driver's static config and per-storage options (AList's names and texts)."""

from __future__ import annotations

from manifold.drivers.base import DriverConfig, RootPath, option

CONFIG = DriverConfig(
    name="Local",
    local_sort=True,
    only_local=True,
    no_cache=True,
    default_root="/",
)

DELETE_PERMANENTLY = "delete permanently"

_THUMB_CONCURRENCY_HELP = (
    "Number of concurrent thumbnail generation goroutines. This controls how many "
    "thumbnails can be generated in parallel."
)
_VIDEO_THUMB_POS_HELP = (
    "The position of the video thumbnail. If the value is a number (integer ot floating "
    "point), it represents the time in seconds. If the value ends with '%', it represents "
    "the percentage of the video duration."
)
_RECYCLE_HELP = "path to recycle bin, delete permanently if empty or keep 'delete permanently'"


class Addition(RootPath):
    """Options of one Local storage, in the order the admin form shows them."""

    thumbnail: bool = option(False, required=True, help="enable thumbnail", shown_default="")
    thumb_cache_folder: str = option("")
    thumb_concurrency: str = option("16", help=_THUMB_CONCURRENCY_HELP)
    video_thumb_pos: str = option("20%", help=_VIDEO_THUMB_POS_HELP)
    show_hidden: bool = option(True, help="show hidden directories and files")
    mkdir_perm: str = option("777")
    recycle_bin_path: str = option(DELETE_PERMANENTLY, help=_RECYCLE_HELP)
