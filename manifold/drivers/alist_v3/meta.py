"""AList V3 options and static configuration, as AList's AList V3 driver has them.

The options after AList's own are Manifold's: ``tls_insecure_skip_verify``.
"""

from __future__ import annotations

from manifold.drivers.base import DriverConfig, RootPath, option

CONFIG = DriverConfig(
    name="AList V3",
    local_sort=True,
    default_root="/",
    check_status=True,
    proxy_range_option=True,
    # The remote keeps an index of its own; walking it would index a whole site.
    never_indexed=True,
    call_timeout=30.0,
    retries=3,
    max_concurrency=16,
    idle_timeout=60.0,
)

_INSECURE_HELP = (
    "Skip checking the server's TLS certificate. Unsafe: anyone on the way can read "
    "and change the traffic, the login token included"
)


class Addition(RootPath):
    """Options of one AList V3 storage, in the order the admin form shows them."""

    url: str = option(..., required=True)
    meta_password: str = option("")
    username: str = option("")
    password: str = option("")
    token: str = option("")
    # AList's spelling, kept: stored storages refer to the key.
    pass_ua_to_upsteam: bool = option(True)
    # On: the remote reads this storage's archives (their meta, listings, members and
    # extractions into this storage); off: this server reads them by ranges.
    forward_archive_requests: bool = option(True)
    tls_insecure_skip_verify: bool = option(False, help=_INSECURE_HELP)
