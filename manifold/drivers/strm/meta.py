"""Strm options and static configuration, with OpenList's Strm driver's names.

OpenList's ``SaveStrmToLocal`` (copies of the ``.strm`` files written to a local
folder as listings pass) is not offered: the storage serves them itself.
"""

from __future__ import annotations

from pydantic import BaseModel

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="Strm",
    local_sort=True,
    only_proxy=True,
    no_cache=True,
    no_upload=True,
    default_root="/",
)

VIDEO_TYPES = "mp4,mkv,flv,avi,wmv,ts,rmvb,webm,mp3,flac,aac,wav,ogg,m4a,wma,alac"
PASSED_TYPES = "ass,srt,vtt,sub,strm"


class Addition(BaseModel):
    paths: str = option(..., type="text", required=True, help="name:/path or /path, one a line")
    siteUrl: str = option(
        "", type="text", help="Site URL the links start with (empty: the server's site_url)"
    )
    PathPrefix: str = option("/d", type="text", help="Route the links go through")
    downloadFileTypes: str = option(
        PASSED_TYPES, type="text", help="Extensions shown as they are (subtitles)"
    )
    filterFileTypes: str = option(VIDEO_TYPES, type="text", help="Extensions shown as .strm files")
    minFileSize: int = option(0, help="Leave out media smaller than this, in MB (0: none)")
    encodePath: bool = option(True, required=True, help="Percent-encode the path in the links")
    withoutUrl: bool = option(False, help="Links without the site URL, from / on")
    withSign: bool = option(False, help="Sign every link, even where /d asks no sign")
