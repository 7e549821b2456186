"""What ``df`` says of a folder's disk, for the drivers' space tests to compare with."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

# Other processes write to the same disk while a test runs: free space is compared
# within this many bytes.
SLACK = 512 << 20


@dataclass(frozen=True)
class Df:
    """``df``'s Size and Avail of a folder's file system, in bytes."""

    size: int
    avail: int


def df(folder: Path) -> Df:
    out = subprocess.run(
        ["df", "-B1", "--output=size,avail", str(folder)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    size, avail = out.splitlines()[-1].split()
    return Df(int(size), int(avail))


def near(a: int, b: int) -> bool:
    return abs(a - b) <= SLACK
