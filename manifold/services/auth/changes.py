"""A mark in the data folder that users were changed behind a running server's back.

The command line (``manifold admin set``, ``cancel2fa``) writes the database itself,
whatever address the server listens on, and then renews this mark; the server keeps
users cached, and on seeing the mark renewed drops them all, so the next login reads
the new password or the cleared two-factor secret, and tokens issued before a
password change are refused (the user's token generation changed with it).

The mark is a file replaced whole on each change (a new inode every time), so one
``stat`` tells whether it changed. A login looks every time; a request with a token
at most once a second, so the token path stays a few microseconds.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

MARK_NAME = ".users-changed"
# The longest a running server keeps accepting a token the command line revoked.
LOOK_EVERY = 1.0

Identity = tuple[int, int, int] | None


class UserChanges:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / MARK_NAME
        self._seen = _identity(self._path)
        self._looked = time.monotonic()

    def mark(self) -> None:
        """Tell running servers that users changed (called by the command line)."""
        temp = self._path.with_name(f"{MARK_NAME}.{secrets.token_hex(4)}")
        temp.write_text(secrets.token_hex(8))
        os.replace(temp, self._path)

    def changed(self, now: bool = False) -> bool:
        """Whether the mark was renewed since the last call that said so. Unless
        ``now``, the file is looked at no more than once every ``LOOK_EVERY`` seconds."""
        moment = time.monotonic()
        if not now and moment - self._looked < LOOK_EVERY:
            return False
        self._looked = moment
        current = _identity(self._path)
        if current == self._seen:
            return False
        self._seen = current
        return True


def _identity(path: Path) -> Identity:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns)
