"""Starts rclone so that it dies with the server, however the server ends.

Run as a script (``python -I launcher.py PARENT_PID PROGRAM ARGS...``), never
imported by the server: it asks Linux to kill it when its parent goes
(``PR_SET_PDEATHSIG``, which survives ``exec``), checks the parent did not go in
the meantime, then becomes the program. A server killed with SIGKILL so leaves no
rclone behind; a clean stop ends it earlier (``process.Rclone.aclose``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    parent, program = int(argv[1]), argv[2]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        sys.exit(f"prctl failed: {os.strerror(ctypes.get_errno())}")
    if os.getppid() != parent:  # the server went before the signal was asked for
        sys.exit(1)
    os.execv(program, argv[2:])  # noqa: S606 - becomes rclone itself, no shell


if __name__ == "__main__":
    main(sys.argv)
