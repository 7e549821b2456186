"""The SMB driver's static config and per-storage options (AList's names and order)."""

from __future__ import annotations

from manifold.drivers.base import DriverConfig, RootPath, option

CONFIG = DriverConfig(
    name="SMB",
    local_sort=True,
    only_local=True,
    no_cache=True,
    # The share's top folder.
    default_root=".",
    call_timeout=30.0,
    retries=3,
    max_concurrency=8,
    idle_timeout=60.0,
)


class Addition(RootPath):
    """Options of one SMB storage, in the order AList's form shows them.

    ``address`` is ``host`` or ``host:port`` (445 when left out); ``root_folder_path``
    is a folder inside the share, ``.`` for its top.
    """

    address: str = option(..., required=True)
    username: str = option(..., required=True)
    password: str = option("")
    share_name: str = option(..., required=True)
