"""The S3 driver's static config and per-storage options (AList's names and texts)."""

from __future__ import annotations

from pydantic import ConfigDict

from manifold.drivers.base import DriverConfig, RootPath, option

CONFIG = DriverConfig(
    name="S3",
    local_sort=True,
    check_status=True,
    default_root="/",
    # A remote object store: a metadata call that hangs fails as temporary, an
    # idempotent one is tried again, and one storage keeps at most this many requests
    # under way (a folder copy runs its own few copies inside one call).
    call_timeout=30.0,
    retries=3,
    max_concurrency=16,
    idle_timeout=60.0,
)

# AList's region when the form leaves it empty; S3-compatible stores ignore it, AWS
# answers with the bucket's region.
DEFAULT_REGION = "alist"
# AList's name for the empty object that keeps a folder (a prefix) alive.
DEFAULT_PLACEHOLDER = ".alist"

_TLS_HELP = (
    "Do not verify the endpoint's TLS certificate. Unsafe: anyone between this server "
    "and the endpoint can read and change the data and the requests."
)

DIRECT_UPLOAD_HELP = (
    "Let browsers upload straight to the bucket through a signed PUT URL (the bucket "
    "needs a CORS rule allowing PUT from the site)."
)


class Addition(RootPath):
    """Options of one S3 storage, in the order the admin form shows them.

    The required fields default to empty here and are checked by ``init``, so a
    storage saved without one fails with a plain status rather than a validation
    error; and a validation error never shows the values it was given, since the
    one for a missing key shows the whole addition, secret included.
    """

    model_config = ConfigDict(hide_input_in_errors=True)

    bucket: str = option("", required=True)
    endpoint: str = option("", required=True)
    region: str = option("")
    access_key_id: str = option("", required=True)
    secret_access_key: str = option("", required=True)
    session_token: str = option("")
    custom_host: str = option("")
    enable_custom_host_presign: bool = option(False, shown_default="")
    sign_url_expire: int = option(4, type="number")
    placeholder: str = option("")
    force_path_style: bool = option(False, shown_default="")
    list_object_version: str = option("v1", type="select", options="v1,v2")
    remove_bucket: bool = option(
        False, help="Remove bucket name from path when using custom host.", shown_default=""
    )
    add_filename_to_disposition: bool = option(
        False, help="Add filename to Content-Disposition header.", shown_default=""
    )
    enable_direct_upload: bool = option(
        False,
        help=DIRECT_UPLOAD_HELP,
        shown_default="",
    )
    tls_insecure_skip_verify: bool = option(False, help=_TLS_HELP)
