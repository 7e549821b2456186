"""The template's static config and per-storage options.

This module never imports the back end's library: a server without the library still
lists the driver (as unavailable, with the reason) and shows its form.
"""

from __future__ import annotations

from manifold.drivers.base import DriverConfig, RootPath, option

CONFIG = DriverConfig(
    # AList's driver name, letter for letter: stored storages refer to it.
    name="Template",
    # What the root option shows when the form leaves it empty.
    default_root="/",
    # A remote back end asks for layers around it (``vfs.layers``): a call that takes
    # longer fails as temporary, an idempotent call that failed so is tried again, and
    # at most this many calls reach the back end at once (also its thread count).
    call_timeout=30.0,
    retries=3,
    max_concurrency=8,
)


class Addition(RootPath):
    """The form's fields after ``root_folder_path``, with AList's names, in its order.

    ``RootPath`` (or ``RootID`` for a back end addressed by ids) gives the root option;
    ``Driver.root_obj`` builds the root folder from it.
    """

    address: str = option(..., required=True, help="host:port of the server")
    username: str = option("")
    password: str = option("")
