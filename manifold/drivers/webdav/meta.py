"""The WebDav driver's static config and per-storage options (AList's names and order)."""

from __future__ import annotations

from pydantic import BaseModel

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="WebDav",
    local_sort=True,
    # Downloads need the storage's credentials, which a redirect cannot carry: this
    # server fetches the bytes itself, sending the Authorization header.
    only_proxy=True,
    default_root="/",
    call_timeout=30.0,
    retries=3,
    max_concurrency=16,
    idle_timeout=60.0,
)

VENDORS = "sharepoint,other"
SKIP_VERIFY_HELP = (
    "Unsafe: accept any TLS certificate, a forged one too, so anyone on the network "
    "path can read and change the traffic, the password included"
)


class Addition(BaseModel):
    """Options of one WebDav storage in AList's order. ``root_folder_path`` comes after
    the credentials there, so it is declared here rather than through ``RootPath``;
    like ``RootPath``'s it is mandatory, so a missing key never serves a whole server."""

    vendor: str = option("other", type="select", options=VENDORS)
    address: str = option(..., required=True)
    username: str = option("", required=True)
    password: str = option("", required=True)
    root_folder_path: str = option(..., required=True, shown_default="/")
    tls_insecure_skip_verify: bool = option(False, help=SKIP_VERIFY_HELP)
