"""The Azure Blob Storage driver's static config and per-storage options (OpenList's
names, defaults and order)."""

from __future__ import annotations

from pydantic import ConfigDict

from manifold.drivers.base import DriverConfig, RootPath, option

CONFIG = DriverConfig(
    name="Azure Blob Storage",
    local_sort=True,
    check_status=True,
    default_root="/",
    # A remote object store, as S3: a metadata call that hangs fails as temporary, an
    # idempotent one is tried again, and one storage keeps at most this many requests
    # under way (a folder copy runs its own few copies inside one call).
    call_timeout=30.0,
    retries=3,
    max_concurrency=16,
    idle_timeout=60.0,
)

# The form's text for an empty endpoint, as OpenList shows it.
ENDPOINT_PLACEHOLDER = "https://<accountname>.blob.core.windows.net/"
DEFAULT_SIGN_HOURS = 4

_ENDPOINT_HELP = (
    "The storage account's blob endpoint, e.g. https://accountname.blob.core.windows.net/ "
    "(or just the account name: 3 to 24 lowercase letters and digits). An endpoint that "
    "names the account in its path, as Azurite's http://127.0.0.1:10000/devstoreaccount1, "
    "is taken as it is."
)
_KEY_HELP = "One of the storage account's access keys (base64), for Shared Key authorization."
_CONTAINER_HELP = "The container of the storage account; made when it does not exist yet."
_EXPIRE_HELP = "How many hours a download link (a SAS URL) stays valid."
_DIRECT_HELP = (
    "Let browsers upload straight to the container through a SAS URL of the one blob, "
    "valid as long as a download link (the account needs a CORS rule allowing PUT)."
)


class Addition(RootPath):
    """Options of one Azure Blob Storage, in the order the admin form shows them.

    The required fields default to empty and are checked by ``init``, so a storage
    saved without one fails with a plain status; a validation error never shows the
    values it was given (the access key among them).
    """

    model_config = ConfigDict(hide_input_in_errors=True)

    endpoint: str = option(
        "", required=True, help=_ENDPOINT_HELP, shown_default=ENDPOINT_PLACEHOLDER
    )
    access_key: str = option("", required=True, help=_KEY_HELP)
    container_name: str = option("", required=True, help=_CONTAINER_HELP)
    sign_url_expire: int = option(DEFAULT_SIGN_HOURS, type="number", help=_EXPIRE_HELP)
    enable_direct_upload: bool = option(False, help=_DIRECT_HELP, shown_default="")
