"""Which process listens on a loopback TCP port, read from ``/proc``.

rclone's API listens on a loopback port that any local user could connect to (its
random login keeps them out) or, in the moment between a port being chosen and rclone
binding it, listen on first. The API client sends the login with every request, so it
must know the listener is the rclone it started before the first one:
``listened_by(pid, port)`` is true only when a socket of that process listens there.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

_LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp prints it (little-endian hex)
_LISTEN = "0A"


def free_port() -> int:
    """A loopback port free just now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def listened_by(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the socket listening on 127.0.0.1:``port``."""
    inodes = _listening_inodes(port)
    return bool(inodes) and bool(inodes & _socket_inodes(pid))


def _listening_inodes(port: int) -> set[str]:
    wanted = f"{_LOOPBACK}:{port:04X}"
    found = set()
    with contextlib.suppress(OSError), open("/proc/net/tcp", encoding="ascii") as table:
        next(table, None)  # the header
        for line in table:
            fields = line.split()
            if len(fields) > 9 and fields[1] == wanted and fields[3] == _LISTEN:
                found.add(fields[9])
    return found


def _socket_inodes(pid: int) -> set[str]:
    found = set()
    with contextlib.suppress(OSError):
        for entry in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(entry)
                if target.startswith("socket:["):
                    found.add(target[8:-1])
    return found
