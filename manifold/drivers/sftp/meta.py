"""The SFTP driver's static config and per-storage options (AList's names, in its order)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="SFTP",
    local_sort=True,
    # No URL reaches the files: every download is streamed through this server.
    only_local=True,
    default_root="/",
    check_status=True,
    call_timeout=30.0,
    retries=3,
    # Requests share one SSH connection, which pipelines them; more at once only queue
    # on the server's single SFTP process.
    max_concurrency=8,
    idle_timeout=60.0,
)

_FINGERPRINT_HELP = (
    "The server's host key fingerprint as `ssh-keygen -lf` prints it (SHA256:...). "
    "Empty: the key offered at the first connection is recorded here and required from "
    "then on."
)


class Addition(BaseModel):
    """Options of one SFTP storage, in the order the admin form shows them.

    Not a ``RootPath``: AList places the root after the credentials, and the form keeps
    AList's order. The root is mandatory all the same (a missing key must never serve
    the server's whole tree by accident).
    """

    # A validation error never echoes the options: they hold the password and key.
    model_config = ConfigDict(hide_input_in_errors=True)

    address: str = option("", required=True)
    username: str = option("", required=True)
    private_key: str = option("", type="text")
    password: str = option("")
    passphrase: str = option("")
    root_folder_path: str = option(..., required=True, shown_default="/")
    ignore_symlink_error: bool = option(False)
    host_key_fingerprint: str = option("", help=_FINGERPRINT_HELP)
