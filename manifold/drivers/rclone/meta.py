"""The Rclone driver's static config and per-storage options."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from manifold.drivers.base import DriverConfig, option

CONFIG = DriverConfig(
    name="Rclone",
    local_sort=True,
    # Bytes come from the rclone process on this machine, which no client can reach:
    # this server streams them itself.
    only_proxy=True,
    default_root="",
    call_timeout=60.0,
    retries=3,
    max_concurrency=16,
    idle_timeout=120.0,
)

CONFIG_HELP = (
    "The remote's section as `rclone config show NAME` prints it: `key = value` lines "
    "(type = sftp, host = ..., token = {...}); a [name] line is ignored. Passwords may "
    "be obscured as rclone stores them, or plain."
)
ROOT_HELP = (
    "A folder of the remote (empty: its root; on SFTP the login's home, a leading / "
    "for an absolute path; on S3 bucket/folder)"
)


class Addition(BaseModel):
    """Options of one Rclone storage. ``root_folder_path`` is mandatory, as every root
    option is: a missing key must never serve a whole remote by accident."""

    # Never shown back in a validation error: the section holds passwords and tokens.
    model_config = ConfigDict(hide_input_in_errors=True)

    config: str = option("", type="text", required=True, help=CONFIG_HELP, secret=True)
    root_folder_path: str = option(..., help=ROOT_HELP, shown_default="")
