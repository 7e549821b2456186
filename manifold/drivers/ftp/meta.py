"""The FTP driver's static config and per-storage options (AList's names and order,
then Manifold's own TLS options)."""

from __future__ import annotations

from pydantic import BaseModel

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="FTP",
    local_sort=True,
    only_local=True,
    default_root="/",
    # Each call borrows a logged-in connection from a pool of ``max_concurrency``.
    call_timeout=30.0,
    retries=3,
    max_concurrency=8,
    idle_timeout=60.0,
)

TLS_MODES = ("none", "explicit")

_TLS_HELP = (
    "explicit: ask the server for TLS (AUTH TLS) before logging in, and encrypt every "
    "transfer; the storage fails if the server does not offer it"
)
_INSECURE_HELP = (
    "Unsafe: accept any certificate the server shows, so anyone between this server "
    "and the FTP server can read and change the traffic, password included"
)


class Addition(BaseModel):
    """Options of one FTP storage. AList shows ``root_folder_path`` last, so the model
    declares it here rather than inheriting ``RootPath`` (whose field comes first)."""

    address: str = option(..., required=True)
    encoding: str = option("", required=True)
    username: str = option("", required=True)
    password: str = option("", required=True)
    # Mandatory as in ``RootPath``: a missing key never serves the server's whole tree.
    root_folder_path: str = option(..., required=True, shown_default="/")
    tls: str = option("none", type="select", options=",".join(TLS_MODES), help=_TLS_HELP)
    tls_insecure_skip_verify: bool = option(False, help=_INSECURE_HELP)
